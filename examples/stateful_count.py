"""A running count per key in a state store, exactly once.

`count(row, state)` reads and writes the store "counts". A store is scoped to the row's input partition
and kept in SQLite under `state_dir`; eos writes its changes to a compacted changelog topic
(`<app_id>-<input topic>-counts-changelog`, created by eos) in the same transaction as the outputs and
the input offset, and restores it from there when the local copy is lost or behind. So a count never
counts a record twice, whatever crashes.

    python examples/stateful_count.py --bootstrap localhost:9092

creates the topics, writes 10 sample orders per partition (`--sample 0` uses the topics as they are),
counts what the input holds and stops. Run it again with more input: the counts go on.
"""

from __future__ import annotations

import eos
from eos import testing


def count(row, state):
    """The order, tagged `#<n>`: its customer's n-th order in this input partition."""
    if row.key is None:
        return []  # a store key cannot be None: skip records without a key (or give them one)
    counts = state.store("counts")
    n = counts.get(row.key, 0) + 1
    counts.put(row.key, n)
    return eos.Output(value=row.value + b"#%d" % n, key=row.key)


def main(spark, bootstrap, input_topic, output_topic, checkpoint, app_id, state_dir="/tmp/eos-state"):
    """Count what `input_topic` holds now into `output_topic`; returns the finished query."""
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=app_id,
        output_topic=output_topic,
        processing_guarantee="exactly_once",
        state_dir=state_dir,  # a local disk of each executor
    )
    sink = eos.sink(config, process=count, stores={"counts": "json"})  # values as JSON, keys as they are
    query = (
        eos.read_stream(spark, config, [input_topic])
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return query


if __name__ == "__main__":
    from _cli import parse, seed  # examples/_cli.py: the command line the examples share

    args = parse(
        __doc__,
        "count",
        "example-order-counts",
        more=lambda p: p.add_argument("--state-dir", default="/tmp/eos-state"),
    )
    seed(args)
    spark = eos.spark_session("example-count")
    main(spark, args.bootstrap, args.input, args.output, args.checkpoint, args.app_id, args.state_dir)
    records, _ = testing.read_topic(args.bootstrap, args.output)  # read_committed
    print(f"{args.output}: {len(records)} committed records, e.g. {records[-1].value.decode()}")
    print(
        f"its stores: eos state show --app {args.app_id} --state-dir {args.state_dir}"
        f" --bootstrap-server {args.bootstrap}"
    )
    spark.stop()
