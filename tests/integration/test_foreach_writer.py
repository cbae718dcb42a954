"""`eos.foreach_writer` in micro-batch mode (any Spark; real-time mode, PySpark 4.2+: test_realtime_mode.py):
what a pipeline writing to Kafka uses takes the same way as with `foreachBatch`. Before, the writer
refused every one of these: it invented the types of all columns but the Kafka source's, so
`output_topic_column`, `output_partition_column` and `headers` failed with BatchSchemaError, and it had no
way to say that the query filters input rows (its error named `format("eos")`'s option)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from conftest import group_offsets

import eos
from eos import testing

PARTITIONS = 2
PER_PARTITION = 90


def test_output_topic_partition_and_timestamp_columns_headers_and_a_filter(spark, bootstrap, names, tmp_path):
    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, PARTITIONS)
    testing.create_topic(bootstrap, output, 3)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    # an hour ago: well inside the broker's retention, which deletes older segments by timestamp
    base = int(time.time() * 1000) - 3_600_000
    for seq in range(PER_PARTITION):
        for partition in range(PARTITIONS):
            value = testing.seq_value(source, partition, seq)
            headers = [("seq", str(seq).encode()), ("origin", b"orders")]
            at = base + seq * 1000 + partition  # a create time of the input's own
            producer.produce(source, value, b"k%d" % seq, partition=partition, headers=headers, timestamp=at)
    assert producer.flush(30) == 0
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic_column="out_topic",
        output_partition_column="out_partition",
        output_timestamp_column="timestamp",  # the input record's (a row's datetime, here)
        processing_guarantee="exactly_once",
    )
    df = (
        eos.read_stream(spark, config, [source], includeHeaders="true", maxOffsetsPerTrigger=60)
        .where("offset % 3 != 1")  # the query drops a third of the input on purpose
        .selectExpr("*", f"'{output}' AS out_topic", "cast(offset % 3 AS int) AS out_partition")
    )
    query = (
        df.writeStream.foreach(eos.foreach_writer(config, input_filtered=True))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()

    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert hanging == []
    kept = {
        testing.seq_value(source, p, seq)
        for p in range(PARTITIONS)
        for seq in range(PER_PARTITION)
        if seq % 3 != 1
    }
    assert sorted(r.value for r in records) == sorted(kept), "each kept record once, nothing else"
    for r in records:
        _, _, seq = testing.parse_value(r.value)
        assert r.partition == seq % 3, (r.partition, seq)  # offset == seq: produced in order per partition
        assert dict(r.headers) == {"seq": str(seq).encode(), "origin": b"orders"}
        assert r.timestamp == base + seq * 1000 + testing.parse_value(r.value)[1]


def test_a_missing_dead_letter_topic_is_refused_before_anything_is_written(spark, bootstrap, names, tmp_path):
    """The writer's pre-flight checks the topics in each task, as the sink's does per batch: with no bad
    row yet, a dead-letter topic that does not exist used to pass unnoticed until the first bad record
    failed mid-stream. Created, the same query on the same checkpoint writes every record once."""
    source, output, dead = names("in"), names("out"), names("dlq")
    testing.create_topic(bootstrap, source, PARTITIONS)
    testing.create_topic(bootstrap, output, PARTITIONS)
    sent = testing.produce_sequence(bootstrap, source, PARTITIONS, PER_PARTITION)
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=output,
        on_error="dead_letter",
        dead_letter_topic=dead,
        processing_guarantee="exactly_once",
    )

    def start():
        df = eos.read_stream(spark, config, [source])
        return (
            df.writeStream.foreach(eos.foreach_writer(config))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )

    with pytest.raises(Exception) as info:
        start().awaitTermination()
    assert "TopicNotFoundError" in str(info.value) and f"dead-letter topic '{dead}'" in str(info.value)
    assert set(group_offsets(config, source, PARTITIONS).values()) == {0}, "nothing committed past the start"
    records, _ = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert records == []

    testing.create_topic(bootstrap, dead, 1)
    start().awaitTermination()
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    assert result.exactly_once and result.missing == 0, result
