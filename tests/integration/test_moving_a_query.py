"""A `.format("kafka")` query moved to eos on its own checkpoint, and moved back: what the migration
page (docs/guide/moving-a-query.md) tells a user to do, run against a real broker."""

from __future__ import annotations

import eos
from eos import testing

PARTITIONS = 2


def _spark_sink(spark, bootstrap: str, source: str, output: str, checkpoint) -> None:
    """The query before the move (and after a rollback): Spark's own source and sink."""
    df = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 200)
        .load()
    )
    query = (
        df.select("key", "value")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", output)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def test_a_kafka_sink_query_moves_to_eos_on_its_checkpoint_and_back(spark, bootstrap, names, tmp_path):
    """300 records a partition through Spark's sink; 300 more through eos on the same checkpoint (its
    first batch starts where Spark's sink stopped: the group has no offsets, so eos skips nothing and
    the checkpoint decides); 300 more through Spark's sink again (a rollback); 300 more through eos
    again, same app_id. Read back read_committed: every input record once, in order per input
    partition."""
    source, output, app = names("move-in"), names("move-out"), names("move-app")
    testing.create_topic(bootstrap, source, PARTITIONS)
    testing.create_topic(bootstrap, output, PARTITIONS)
    checkpoint = tmp_path / "ckpt"
    sent = testing.produce_sequence(bootstrap, source, PARTITIONS, 300)
    _spark_sink(spark, bootstrap, source, output, checkpoint)

    more = testing.produce_sequence(bootstrap, source, PARTITIONS, 300, start=300)
    config = eos.Config(bootstrap_servers=bootstrap, app_id=app, output_topic=output)

    def through_eos() -> eos.Sink:
        sink = eos.sink(config)
        query = (
            eos.read_stream(spark, config, [source], maxOffsetsPerTrigger=200)
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        return sink

    sink = through_eos()
    assert sum(s.records_in for s in sink.history) == PARTITIONS * 300, sink.history
    assert sum(s.skipped for s in sink.history) == 0, sink.history

    back = testing.produce_sequence(bootstrap, source, PARTITIONS, 300, start=600)
    _spark_sink(spark, bootstrap, source, output, checkpoint)
    # and to eos once more, with the same app_id: its offsets in the group are the first move's
    again = testing.produce_sequence(bootstrap, source, PARTITIONS, 300, start=900)
    sink = through_eos()
    assert sum(s.records_in for s in sink.history) == PARTITIONS * 300, sink.history

    expected = [
        *testing.flatten(sent),
        *testing.flatten(more),
        *testing.flatten(back),
        *testing.flatten(again),
    ]
    result = testing.verify_exactly_once(bootstrap, output, expected)
    assert result.exactly_once, result
