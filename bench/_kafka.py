"""The bench's own Kafka chores: the input topic filled, an output counted read_committed, the group
coordinators made ready before eos asks for offsets, and the topics of a run deleted after it."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from bench._common import KEYS, PARTITIONS, VALUE_BYTES, log


def fill_input(bootstrap: str, topic: str, records: int) -> None:
    """`records` values of VALUE_BYTES bytes, keys k0..k9999, round-robin over PARTITIONS."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000})
    pad = b"x" * VALUE_BYTES
    for i in range(records):
        value = (b"%012d|" % i + pad)[:VALUE_BYTES]
        while True:
            try:
                producer.produce(topic, value, b"k%d" % (i % KEYS), partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError("input not delivered")


def count_committed(bootstrap: str, topic: str, timeout: float = 300) -> int:
    """Records a read_committed consumer sees in `topic`, read to the end of every partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-count-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.max.bytes": 52_428_800,
        }
    )
    try:
        parts = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
        consumer.assign([TopicPartition(topic, p, 0) for p in parts if ends[p] > 0])
        waiting = {p for p in parts if ends[p] > 0}
        count = 0
        deadline = time.monotonic() + timeout
        while waiting and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 0.5):
                err = msg.error()
                if err is None:
                    count += 1
                elif err.code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= ends[msg.partition()]:
                        waiting.discard(msg.partition())
                else:
                    raise KafkaException(err)
        if waiting:
            raise TimeoutError(f"{topic}: partitions {sorted(waiting)} not read to the end in {timeout}s")
        return count
    finally:
        consumer.close()


def wait_for_group_coordinators(bootstrap: str, topic: str, timeout: float = 120) -> None:
    """Commit an offset for a few groups until each succeeds: __consumer_offsets exists and is loaded.

    Before that, an admin ListConsumerGroupOffsets gets an OffsetFetch error that librdkafka handles by
    touching the consumer-group state an admin client does not have: a segfault in rd_kafka_cgrp_op
    (librdkafka issue 5040; docs/design.md, "Committed offsets on a fresh broker"). eos itself has read
    committed offsets through a consumer of the group since; the wait was added when it did not.
    """
    deadline = time.monotonic() + timeout
    for i in range(8):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-coordinator-{i}"})
        try:
            while True:
                try:
                    consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
                    break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        finally:
            consumer.close()


def delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        for f in admin.delete_topics([topic], operation_timeout=30).values():
            f.result(60)
    except Exception as exc:  # noqa: BLE001 - disk hygiene only
        log(f"could not delete {topic}: {exc}")
