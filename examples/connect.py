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

import argparse

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
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--remote", default="local", help="'local' starts a Connect server here; or sc://...")
    parser.add_argument("--input", default="example-orders")
    parser.add_argument("--output", default="example-orders-upper")
    parser.add_argument("--app-id", default="example-connect")
    parser.add_argument("--checkpoint", default="/tmp/eos-examples/connect")
    parser.add_argument("--sample", type=int, default=10, help="sample records per partition (0: none)")
    args = parser.parse_args()
    if args.sample:
        for topic in (args.input, args.output):
            testing.create_topic(args.bootstrap, topic, 4)
        testing.produce_sequence(args.bootstrap, args.input, 4, args.sample)
    spark = eos.spark_session("example-connect", remote=args.remote)
    main(spark, args.bootstrap, args.input, args.output, args.checkpoint, args.app_id)
    records, _ = testing.read_topic(args.bootstrap, args.output)  # read_committed
    print(f"{args.output}: {len(records)} committed records, e.g. {records[-1].value.decode()}")
    spark.stop()
