"""The same exactly-once pipeline through a Spark Connect session (PySpark 4.0+, `pip install
'eos-spark[connect]'`).

The code is the classic code: `eos.read_stream`, then `foreachBatch(eos.sink(config))`. Under Connect
the sink is pickled and runs in a Python process on the server, so the server needs eos installed, and
`process` / `process_batch` / hooks must be importable or picklable there. The server shows the sink no
lineage, so each row is checked against its `eos_input` column (which `eos.read_stream` adds): keep it,
with `topic`, `partition` and `offset`, in what you write.

    python examples/connect.py --bootstrap localhost:9092                        # a local Connect server
    python examples/connect.py --bootstrap localhost:9092 --remote sc://host:15002  # a server of your own

creates the topics, writes 10 sample orders per partition (`--sample 0` uses the topics as they are),
writes them upper-cased and stops.
"""

from __future__ import annotations

import eos
from eos import testing


def main(spark, bootstrap, input_topic, output_topic, checkpoint, app_id):
    """`spark`: a Connect session. Upper-case what `input_topic` holds now into `output_topic`; returns
    the finished query."""
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=app_id,
        output_topic=output_topic,
        processing_guarantee="exactly_once",
    )
    upper = eos.read_stream(spark, config, [input_topic]).selectExpr(
        "key", "upper(CAST(value AS STRING)) AS value", "topic", "partition", "offset", "eos_input"
    )
    query = (
        upper.writeStream.foreachBatch(eos.sink(config))
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
        "connect",
        "example-orders-upper",
        more=lambda p: p.add_argument(
            "--remote", default="local", help="'local' starts a Connect server here; or sc://..."
        ),
    )
    seed(args)
    spark = eos.spark_session("example-connect", remote=args.remote)
    main(spark, args.bootstrap, args.input, args.output, args.checkpoint, args.app_id)
    records, _ = testing.read_topic(args.bootstrap, args.output)  # read_committed
    print(f"{args.output}: {len(records)} committed records, e.g. {records[-1].value.decode()}")
    spark.stop()
