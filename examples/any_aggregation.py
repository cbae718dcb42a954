"""An aggregation written exactly once: `groupBy("key").count()` with `input_mode="any"`.

Rows of an aggregation do not come straight from Kafka, so there is no input offset to commit with them.
In this mode eos places each batch's rows in `parts` parts by a hash of the key and writes each part in
one transaction that also records "part i has written batch N"; a batch Spark runs again after a crash
writes nothing for the parts already committed. The query must be deterministic (no `rand()`, no clock),
and a query moved from `.format("kafka")` starts on a new checkpoint.

    python examples/any_aggregation.py --bootstrap localhost:9092

creates the topics, writes 10 sample orders per partition (`--sample 0` uses the topics as they are),
writes each customer's running count (update mode) and stops. Each key's counts keep their order.
"""

from __future__ import annotations

import eos
from eos import testing


def main(spark, bootstrap, input_topic, output_topic, checkpoint, app_id, parts=4):
    """The count of orders per customer key in `input_topic` so far, into `output_topic`; returns the
    finished query."""
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=app_id,
        output_topic=output_topic,
        processing_guarantee="exactly_once",
        input_mode="any",
        parts=parts,  # transactions per batch
    )
    counts = (
        eos.read_stream(spark, config, [input_topic])  # or any other streaming source
        .groupBy("key")
        .count()
        .selectExpr("key", "CAST(CAST(count AS STRING) AS BINARY) AS value")
    )
    query = (
        counts.writeStream.outputMode("update")
        .foreachBatch(eos.sink(config))
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return query


if __name__ == "__main__":
    from _cli import parse, seed  # examples/_cli.py: the command line the examples share

    args = parse(__doc__, "any-aggregation", "example-orders-per-customer")
    seed(args)
    spark = eos.spark_session("example-any-aggregation")
    main(spark, args.bootstrap, args.input, args.output, args.checkpoint, args.app_id)
    records, _ = testing.read_topic(args.bootstrap, args.output)  # read_committed
    last = {r.key: r.value for r in sorted(records, key=lambda r: (r.partition, r.offset))}
    print(", ".join(f"{k.decode()}: {v.decode()}" for k, v in sorted(last.items())[:10]), "...")
    print(f"each part's last commit: eos parts show --app {args.app_id} --bootstrap-server {args.bootstrap}")
    spark.stop()
