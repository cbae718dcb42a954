"""The driver program the chaos harness starts, kills and restarts.

    python -m tests.chaos.chaos_pipeline --bootstrap B --app-id A --input IN --output OUT --checkpoint DIR
        --summaries FILE --events-dir DIR [--stateful | --aggregate] [--format-eos] [--max-offsets N]
        [--rerun-trigger FILE]

Like examples/pipeline.py, with what a fault schedule needs on a standalone cluster:
- every EOS_* variable of this process is passed to the executors (`spark.executorEnv`), so the crash
  points armed by the harness fire in the Python workers;
- task retries and speculation are on, and Spark's event log is written (the harness counts retried,
  speculative and killed task attempts from it);
- `--rerun-trigger FILE`: once FILE exists, SIGKILL this driver's process group right after the sink has
  finished a batch and before Spark writes that batch to its commit log (F5: Spark re-runs it); the
  batch id is appended to `<events-dir>/rerun-kills`.
- `--aggregate`: `groupBy(key).count()` in update mode (examples/pipeline.py's), in input_mode "any";
- `--format-eos`: write with `df.writeStream.format(...)` instead of `foreachBatch`; the data source's
  driver-side commit (S3) is where the summary line is written and where the F5 kill comes. Stateless
  with EOS_DATA_PATH=jvm, it is `format("eos")` itself, which eos's JVM provider routes to the JVM data
  path: the summary line and the F5 kill come after each batch the route wrote (`jvm_route_batches`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys

import attrs
from pyspark import cloudpickle

import eos
from eos._core._spec import Functions
from eos._spark._datasource import source_class
from examples import pipeline

# The standalone cluster's executors run in work directories of their own, where the `examples` and
# `tests` packages (not installed) cannot be imported: Spark ships what they use by value.
cloudpickle.register_pickle_by_value(pipeline)
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def rerun_kill(events_dir: str, trigger: str | None, batch_id: int) -> None:
    """F5: once `trigger` exists, SIGKILL the driver's process group now, the batch written but not yet
    in Spark's commit log."""
    if trigger and os.path.exists(trigger):
        with open(os.path.join(events_dir, "rerun-kills"), "a") as f:
            f.write(f"{batch_id}\n")
        os.killpg(os.getpgrp(), signal.SIGKILL)


def chaos_source(functions: Functions, summaries: str, events_dir: str, trigger: str | None):
    """`format("eos")` whose driver-side commit (S3) also appends the batch's figures to `summaries`, as
    the foreachBatch pipeline's `on_batch` does, and is where the F5 kill comes."""
    base = source_class("eos-chaos", functions)

    class ChaosSource(base):
        def streamWriter(self, schema, overwrite):  # noqa: N802 - Spark's name
            writer = super().streamWriter(schema, overwrite)
            commit = writer.commit

            def commit_then_maybe_die(messages, batch_id):
                commit(messages, batch_id)
                stats = [p for m in messages if m for p in m.partitions]
                figures = ("records_in", "records_out", "skipped", "transactions", "aborted", "redos")
                summary = {"batch_id": batch_id, **{k: sum(p[k] for p in stats) for k in figures}}
                with open(summaries, "a") as f:
                    f.write(json.dumps(summary) + "\n")
                rerun_kill(events_dir, trigger, batch_id)

            writer.commit = commit_then_maybe_die
            return writer

    return ChaosSource


def jvm_route_batches(summaries: str, events_dir: str, trigger: str | None) -> None:
    """`format("eos")` on the JVM data path: each batch its route (eos._spark._format_jvm.Batches) wrote
    appends the sink's summary to `summaries`, then F5 may kill the driver, as in the other pipelines."""
    from eos._spark import _format_jvm

    call = _format_jvm.Batches.call

    def call_then_maybe_die(self, jdf, batch_id, query):
        call(self, jdf, batch_id, query)
        pipeline.append_summary(summaries, self.sink.last)
        rerun_kill(events_dir, trigger, batch_id)

    _format_jvm.Batches.call = call_then_maybe_die


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("--bootstrap", "--app-id", "--input", "--output", "--checkpoint", "--summaries"):
        parser.add_argument(name, required=True)
    parser.add_argument("--events-dir", required=True)
    parser.add_argument("--max-offsets", type=int, default=2_000)
    parser.add_argument("--rerun-trigger")
    parser.add_argument("--stateful", action="store_true")
    parser.add_argument("--format-eos", action="store_true")
    parser.add_argument("--aggregate", action="store_true", help="groupBy(key).count(), input_mode any")
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
    output_mode = "append"
    if args.aggregate:
        df, output_mode = pipeline.aggregate(df, "count")
        config = attrs.evolve(config, input_mode="any")
    stores = {"counts": "json"}
    if args.format_eos:
        options = {
            "kafka.bootstrap.servers": config.bootstrap_servers,
            "topic": config.output_topic,
            "eos.app.id": config.app_id,
            "eos.processing.guarantee": config.processing_guarantee,
            "eos.transaction.timeout.ms": config.transaction_timeout_ms,
            "eos.commit.interval.ms": config.commit_interval_ms,
        }
        if config.data_path == "jvm" and not args.stateful:  # format("eos") itself, on the JVM route
            jvm_route_batches(args.summaries, args.events_dir, args.rerun_trigger)
            writer = df.writeStream.format("eos")
            options["eos.data.path"] = config.data_path
        else:
            functions = (
                Functions(process=pipeline.count_per_key, stores={"counts": eos.StoreSpec()})
                if args.stateful
                else Functions()
            )
            spark.dataSource.register(
                chaos_source(functions, args.summaries, args.events_dir, args.rerun_trigger)
            )
            writer = df.writeStream.format("eos-chaos")
            options["eos.state.dir"] = config.state_dir
        for key, value in options.items():
            writer = writer.option(key, str(value))
    else:
        sink = eos.sink(config, pipeline.count_per_key, stores=stores) if args.stateful else eos.sink(config)

        def write(batch_df, batch_id):
            sink(batch_df, batch_id)
            pipeline.append_summary(args.summaries, sink.last)
            rerun_kill(args.events_dir, args.rerun_trigger, batch_id)

        writer = df.writeStream.outputMode(output_mode).foreachBatch(write)
    query = writer.option("checkpointLocation", args.checkpoint).trigger(availableNow=True).start()
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
