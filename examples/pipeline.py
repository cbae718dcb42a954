"""An eos pipeline: Kafka -> Spark Structured Streaming -> Kafka, written exactly once.

    python examples/pipeline.py --bootstrap B --app-id A --input IN --output OUT --checkpoint DIR
                                [--max-offsets N] [--min-partitions N] [--summaries FILE]

The processing guarantee is not an argument: it comes from EOS_PROCESSING_GUARANTEE (default
at_least_once, as in Kafka Streams), so a deployment switches it with no code change. Each batch's
summary is appended to --summaries as one JSON line. `make demo` and the integration tests run this
file as their driver process, so they can SIGKILL it.
"""

from __future__ import annotations

import argparse

import eos
from eos.testing import append_summary, count_per_key


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--app-id", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--max-offsets", type=int, default=0)
    parser.add_argument("--min-partitions", type=int, default=0)
    parser.add_argument("--commit-every", type=int, default=10_000)
    parser.add_argument("--summaries")
    parser.add_argument("--stateful", action="store_true", help="emit a running count per key")
    args = parser.parse_args()

    config = eos.Config.from_env(
        bootstrap_servers=args.bootstrap,
        app_id=args.app_id,
        output_topic=args.output,
        commit_every=args.commit_every,
    )
    spark = eos.spark_session(f"pipeline-{args.app_id}")
    options = {}
    if args.max_offsets:
        options["maxOffsetsPerTrigger"] = args.max_offsets
    if args.min_partitions:
        options["minPartitions"] = args.min_partitions
    df = eos.read_stream(spark, config, [args.input], **options)
    sink = eos.sink(config, count_per_key, stores={"counts": "json"}) if args.stateful else eos.sink(config)

    def write(batch_df, batch_id):
        sink(batch_df, batch_id)
        if args.summaries:
            append_summary(args.summaries, sink.last)

    query = (
        df.writeStream.foreachBatch(write)
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
