"""Stateless enrichment, Kafka to Kafka, exactly once, with `process=`.

Each order gets its customer's tier from a lookup table. eos calls `enrich(row, state)` for every input
row inside the transaction that also commits the row's input offset, and writes what it returns.

    python examples/enrich.py --bootstrap localhost:9092

creates the topics, writes 10 sample orders per partition (`--sample 0` uses the topics as they are),
enriches what the input holds into the output and stops. Without `trigger(availableNow=True)` the query
keeps running. Readers of the output must read with isolation.level=read_committed.
"""

from __future__ import annotations

import json

import eos
from eos import testing

#: the reference data the job joins in, by customer key (a real job would load it at start)
TIERS = {b"k1": "gold", b"k2": "silver"}


def enrich(row, state):
    """One output per order: the order as JSON, with its customer's tier."""
    if row.value is None:
        return []  # a tombstone: no output
    customer = row.key.decode() if row.key else None
    order = {"order": row.value.decode(), "customer": customer, "tier": TIERS.get(row.key, "standard")}
    return eos.Output(value=json.dumps(order), key=row.key)


def main(spark, bootstrap, input_topic, output_topic, checkpoint, app_id):
    """Enrich what `input_topic` holds now into `output_topic`; returns the finished query."""
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=app_id,  # the consumer group of the input offsets, the prefix of the transactional ids
        output_topic=output_topic,
        processing_guarantee="exactly_once",  # the default; "at_least_once" needs no transactions
    )
    df = eos.read_stream(spark, config, [input_topic])  # Spark's Kafka source, read_committed
    query = (
        df.writeStream.foreachBatch(eos.sink(config, process=enrich))
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return query


if __name__ == "__main__":
    from _cli import parse, seed  # examples/_cli.py: the command line the examples share

    args = parse(__doc__, "enrich", "example-orders-enriched")
    seed(args)
    spark = eos.spark_session("example-enrich")
    main(spark, args.bootstrap, args.input, args.output, args.checkpoint, args.app_id)
    records, _ = testing.read_topic(args.bootstrap, args.output)  # read_committed
    print(f"{args.output}: {len(records)} committed records, e.g. {records[-1].value.decode()}")
    spark.stop()
