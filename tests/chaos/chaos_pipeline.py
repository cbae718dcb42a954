"""The driver program the chaos harness starts, kills and restarts.

    python -m tests.chaos.chaos_pipeline --bootstrap B --app-id A --input IN --output OUT --checkpoint DIR
        --summaries FILE --events-dir DIR [--stateful] [--max-offsets N] [--rerun-trigger FILE]

Like examples/pipeline.py, with what a fault schedule needs on a standalone cluster:
- every EOS_* variable of this process is passed to the executors (`spark.executorEnv`), so the crash
  points armed by the harness fire in the Python workers;
- task retries and speculation are on, and Spark's event log is written (the harness counts retried,
  speculative and killed task attempts from it);
- `--rerun-trigger FILE`: once FILE exists, SIGKILL this driver's process group right after the sink has
  finished a batch and before Spark writes that batch to its commit log (F5: Spark re-runs it); the
  batch id is appended to `<events-dir>/rerun-kills`.
"""

from __future__ import annotations

import argparse
import os
import signal

from pyspark import cloudpickle

import eos
from examples import pipeline

# The standalone cluster's executors run in work directories of their own, where the `examples` package
# (not installed) cannot be imported: Spark ships `count_per_key` to them by value.
cloudpickle.register_pickle_by_value(pipeline)


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("--bootstrap", "--app-id", "--input", "--output", "--checkpoint", "--summaries"):
        parser.add_argument(name, required=True)
    parser.add_argument("--events-dir", required=True)
    parser.add_argument("--max-offsets", type=int, default=2_000)
    parser.add_argument("--rerun-trigger")
    parser.add_argument("--stateful", action="store_true")
    args = parser.parse_args()

    config = eos.Config.from_env(
        bootstrap_servers=args.bootstrap, app_id=args.app_id, output_topic=args.output
    )
    conf = {
        "spark.task.maxFailures": "100",
        "spark.speculation": "true",
        "spark.speculation.interval": "200ms",
        "spark.speculation.quantile": "0.5",
        "spark.speculation.multiplier": "2",
        "spark.speculation.minTaskRuntime": "2s",
        # A killed attempt's Python worker is not SIGKILLed at once, so a paused zombie can resume.
        "spark.python.task.killTimeout": "60s",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": args.events_dir,
        "spark.eventLog.compress": "false",
        "spark.executor.memory": "768m",
        "spark.sql.shuffle.partitions": "4",
        "spark.pyspark.python": os.environ.get("PYSPARK_PYTHON", "python3"),
    }
    for key, value in os.environ.items():
        if key.startswith("EOS_"):
            conf[f"spark.executorEnv.{key}"] = value
    spark = eos.spark_session(f"chaos-{args.app_id}", conf=conf)
    df = eos.read_stream(spark, config, [args.input], maxOffsetsPerTrigger=args.max_offsets)
    sink = (
        eos.sink(config, pipeline.count_per_key, stores={"counts": "json"})
        if args.stateful
        else eos.sink(config)
    )

    def write(batch_df, batch_id):
        sink(batch_df, batch_id)
        pipeline.append_summary(args.summaries, sink.last)
        if args.rerun_trigger and os.path.exists(args.rerun_trigger):
            with open(os.path.join(args.events_dir, "rerun-kills"), "a") as f:
                f.write(f"{batch_id}\n")
            os.killpg(os.getpgrp(), signal.SIGKILL)

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
