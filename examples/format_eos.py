"""`df.writeStream.format("eos")`: the sink as a Spark data source, its settings as options (PySpark 4.0+).

Written as Spark users write `.format("kafka")`: `kafka.bootstrap.servers`, `topic` and `kafka.*` as
Spark's Kafka sink takes them, every eos setting as `eos.<dotted key>`. This copies a topic exactly once.
Unlike Spark's sink, the Kafka source's `topic`, `partition` and `offset` columns (and `eos_input`) are
the input coordinates eos commits, not where the output goes: keep them in what you write. Keep each
input partition in one task too (no `minPartitions`, `repartition` or `union` before the sink; use
`foreachBatch(eos.sink(config))` for such queries). After each batch eos records what it committed in a
ledger beside the checkpoint: `eos ledger show --checkpoint-location DIR`.

    python examples/format_eos.py --bootstrap localhost:9092

creates the topics, writes 10 sample records per partition (`--sample 0` uses the topics as they are),
copies what the input holds and stops.
"""

from __future__ import annotations

import eos
from eos import testing


def main(spark, bootstrap, input_topic, output_topic, checkpoint, app_id):
    """Copy what `input_topic` holds now to `output_topic`; returns the finished query."""
    # eos.spark_session() registers format("eos"); on a session built otherwise call eos.register(spark)
    source = eos.Config(bootstrap_servers=bootstrap, app_id=app_id, output_topic=output_topic)
    df = eos.read_stream(spark, source, [input_topic])  # starts where the group app_id committed
    query = (
        df.writeStream.format("eos")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", output_topic)
        .option("eos.app.id", app_id)
        .option("eos.processing.guarantee", "exactly_once")
        .option("eos.commit.every", "10000")  # input records per transaction, at most
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return query


if __name__ == "__main__":
    from _cli import parse, seed  # examples/_cli.py: the command line the examples share

    args = parse(__doc__, "format-eos", "example-orders-copy")
    seed(args)
    spark = eos.spark_session("example-format-eos")
    main(spark, args.bootstrap, args.input, args.output, args.checkpoint, args.app_id)
    records, _ = testing.read_topic(args.bootstrap, args.output)  # read_committed
    print(f"{args.output}: {len(records)} committed records")
    print(f"what each batch committed: eos ledger show --checkpoint-location {args.checkpoint}")
    spark.stop()
