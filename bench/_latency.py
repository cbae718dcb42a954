"""End-to-end latency, measured after the rounds: a steady input rate through a 1 s trigger, from the
produce time written in each value to the record being visible to a read_committed consumer."""

from __future__ import annotations

import shutil
import threading
import time
import uuid
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, Producer

import eos
from bench import bench_report as report
from bench._common import KEYS, PARTITIONS, VALUE_BYTES
from bench._kafka import delete_topic
from eos import testing

if TYPE_CHECKING:
    from bench._rows import Bench


def latency(bench: Bench, row: str) -> dict:
    """A 1 s trigger under a steady input rate: produce time (in the value) -> visible read_committed."""
    topic_in = f"bench-lat-in-{uuid.uuid4().hex[:6]}"
    testing.create_topic(bench.bootstrap, topic_in, PARTITIONS)
    out = bench.new_output(f"lat-{row}")
    guarantee = "exactly_once" if row.startswith("eos_exactly_once") else "at_least_once"
    data_path = "jvm" if row.endswith("_jvm") else "python"
    config = bench.config(f"lat-{row}", guarantee, output_topic=out, data_path=data_path)
    df = eos.read_stream(bench.session(), config, [topic_in])
    if row == "spark_kafka_sink":
        writer = (
            df.select("key", "value")
            .writeStream.format("kafka")
            .option("kafka.bootstrap.servers", bench.bootstrap)
            .option("topic", out)
        )
    else:
        writer = df.writeStream.foreachBatch(eos.sink(config))
    ckpt = bench.work / f"ckpt-lat-{uuid.uuid4().hex[:8]}"
    query = writer.option("checkpointLocation", str(ckpt)).trigger(processingTime="1 second").start()
    samples: list[float] = []
    stop = threading.Event()
    reader = threading.Thread(target=_read_latencies, args=(bench.bootstrap, out, samples, stop), daemon=True)
    reader.start()
    try:
        time.sleep(5)  # the query's first (empty) batches
        rate, seconds, warmup = bench.args.latency_rate, bench.args.latency_seconds, 5.0
        producer = Producer({"bootstrap.servers": bench.bootstrap, "linger.ms": 5})
        t0 = time.monotonic()
        sent, warm_index = 0, int(rate * warmup)
        pad = b"x" * VALUE_BYTES
        while (elapsed := time.monotonic() - t0) < seconds + warmup:
            due = int(elapsed * rate)
            while sent < due:
                value = (b"%020d|%d|" % (time.time_ns(), 1 if sent >= warm_index else 0) + pad)[:VALUE_BYTES]
                producer.produce(topic_in, value, b"k%d" % (sent % KEYS), partition=sent % PARTITIONS)
                sent += 1
            producer.poll(0)
            time.sleep(0.002)
        producer.flush(30)
        expected = sent - warm_index
        deadline = time.monotonic() + 60
        while len(samples) < expected and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        stop.set()
        query.stop()
        reader.join(10)
        shutil.rmtree(ckpt, ignore_errors=True)
        delete_topic(bench.bootstrap, topic_in)
        delete_topic(bench.bootstrap, out)
    result = report.latency_summary(samples)
    result.update(expected=expected, rate_per_s=rate, seconds=seconds, guarantee=guarantee)
    return result


def _read_latencies(bootstrap: str, topic: str, samples: list[float], stop: threading.Event) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-lat-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 10,
        }
    )
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            for msg in consumer.consume(1000, 0.1):
                if msg.error() is None:
                    now = time.time_ns()
                    value = msg.value()
                    produced, _, rest = value.partition(b"|")
                    if rest[:1] == b"1":
                        samples.append((now - int(produced)) / 1e6)
    finally:
        consumer.close()
