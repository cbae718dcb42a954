"""eos.spark_session() has the Kafka connector and reads only committed records."""

from __future__ import annotations

from confluent_kafka import Producer

from eos import testing


def test_spark_batch_read_is_read_committed(spark, bootstrap, names):
    topic = names("spark-read")
    testing.create_topic(bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": names("tid")})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, f"c{i}".encode(), partition=i % 2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, f"a{i}".encode(), partition=i % 2)
    producer.flush(30)  # the aborted records must reach the log, not be purged
    producer.abort_transaction(30)

    everything, _ = testing.read_topic(bootstrap, topic, isolation="read_uncommitted", timeout=30)
    assert len(everything) == 15  # the aborted records are really in the log

    rows = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", "read_committed")
        .load()
        .select("value")
        .collect()
    )
    assert sorted(bytes(r.value) for r in rows) == sorted(f"c{i}".encode() for i in range(10))
