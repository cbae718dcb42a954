"""`eos.foreach_writer` in micro-batch mode (any Spark; real-time mode, PySpark 4.2+: test_realtime_mode.py):
what a pipeline writing to Kafka uses takes the same way as with `foreachBatch`. Before, the writer
refused every one of these: it invented the types of all columns but the Kafka source's, so
`output_topic_column`, `output_partition_column` and `headers` failed with BatchSchemaError, and it had no
way to say that the query filters input rows (its error named `format("eos")`'s option)."""

from __future__ import annotations

import time

from confluent_kafka import Producer

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
