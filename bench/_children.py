"""The rows without Spark, each in a process of its own (`python -m bench.run_bench --child-loop|
--child-quix ...`, started by `Bench._child`), so that nothing of the Spark driver is shared: a plain
confluent-kafka transactional loop, and Quix Streams exactly-once."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from bench import bench_report as report
from bench._common import COMMIT_EVERY, PARTITIONS, ms


def child_loop(bootstrap: str, topic_in: str, topic_out: str, records: int) -> dict:
    """Row 5: one Python process, consume -> produce -> send_offsets -> commit every COMMIT_EVERY records."""
    group = f"bench-loop-{uuid.uuid4().hex[:8]}"
    t0 = time.perf_counter()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": group,
            "linger.ms": 5,
            "partitioner": "murmur2_random",
        }
    )
    producer.init_transactions(30)
    consumer.assign([TopicPartition(topic_in, p, 0) for p in range(PARTITIONS)])
    done, in_txn, commits = 0, 0, []
    producer.begin_transaction()
    while done < records:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is not None:
                raise KafkaException(msg.error())
            while True:
                try:
                    producer.produce(topic_out, msg.value(), msg.key())
                    break
                except BufferError:
                    producer.poll(0.05)
            done += 1
            in_txn += 1
            if in_txn >= COMMIT_EVERY or done == records:
                t = time.perf_counter()
                producer.send_offsets_to_transaction(
                    consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
                )
                producer.commit_transaction(60)
                commits.append(time.perf_counter() - t)
                in_txn = 0
                if done < records:
                    producer.begin_transaction()
        producer.poll(0)
    seconds = time.perf_counter() - t0
    consumer.close()
    return {
        "seconds": seconds,
        "transactions": len(commits),
        "commit_p50_ms": ms(report.percentile(commits, 50)),
        "commit_p99_ms": ms(report.percentile(commits, 99)),
    }


def child_quix(bootstrap: str, topic_in: str, topic_out: str, records: int) -> dict:
    """Row 6: Quix Streams' exactly-once Application, pass-through, its defaults otherwise."""
    import logging

    from quixstreams import Application

    t0 = time.perf_counter()
    app = Application(
        broker_address=bootstrap,
        consumer_group=f"bench-quix-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        processing_guarantee="exactly-once",
        loglevel=logging.WARNING,
        auto_create_topics=False,
        use_changelog_topics=False,
    )
    src = app.topic(topic_in, key_deserializer="bytes", value_deserializer="bytes")
    dst = app.topic(topic_out, key_serializer="bytes", value_serializer="bytes")
    app.dataframe(src).to_topic(dst)
    app.run(count=records, collect=False)
    return {"seconds": time.perf_counter() - t0}


def quix_problem() -> str | None:
    """Why Quix Streams cannot run here, if it cannot (checked in a child: the driver never imports it)."""
    proc = subprocess.run([sys.executable, "-c", "import quixstreams"], capture_output=True, text=True)
    if proc.returncode != 0:
        return f"not installable/importable: {proc.stderr.strip().splitlines()[-1] if proc.stderr else ''}"
    return None
