"""The driver of test_store_placement: a stateful count (`process` with one store) on a Spark standalone
cluster, running until the test leaves a `stop` file in WORK.

    python -m tests.integration.placement_app MASTER BOOTSTRAP APP_ID INPUT OUTPUT WORK [FLAG ...]

FLAG: --no-snapshots (no state snapshots), --no-affinity (`task_affinity=False`: Spark places the tasks).

Writes, in WORK: `batches.jsonl` (per batch and input partition: records in, records restored, stores
rebuilt from a snapshot; written by the driver), `where.jsonl` (per committed batch and partition: the
worker and executor its task ran on; written by the executors). When the test leaves an `arm` file, the
first task on worker-1 to process a row writes `hit` (its partition, offset and executor) and then waits,
inside its open transaction, for the test to SIGKILL the worker.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import eos


def _worker() -> tuple[str, str]:
    """(worker, executor) of this executor's Python worker: its directory is <worker>/<app>/<executor>."""
    here = Path.cwd()
    return here.parent.parent.name, here.name


class Counter:
    """The per-row function: each key's count so far, out as the record's value."""

    def __init__(self, work: str) -> None:
        self.work = work
        self.looked = 0.0

    def __call__(self, row, state):
        counts = state.store("counts")
        n = counts.get(row.key, 0) + 1
        counts.put(row.key, n)
        if time.monotonic() - self.looked > 0.2:  # a stat per 0.2 s, not per row
            self.looked = time.monotonic()
            worker, executor = _worker()
            if worker == "worker-1" and os.path.exists(os.path.join(self.work, "arm")):
                hit = {"partition": row.partition, "offset": row.offset, "executor": executor}
                with open(os.path.join(self.work, "hit"), "w") as f:
                    f.write(json.dumps(hit))
                time.sleep(300)  # the test kills this worker now, mid-transaction
        return eos.Output(value=b"%d" % n, key=row.key)


def main() -> None:
    master, bootstrap, app_id, source, output, work = sys.argv[1:7]
    snapshots = "--no-snapshots" not in sys.argv[7:]
    affinity = "--no-affinity" not in sys.argv[7:]
    from pyspark import cloudpickle

    import tests.integration.placement_app as me

    cloudpickle.register_pickle_by_value(me)  # the executors cannot import tests/
    home = Path(work)

    def on_commit(commit: eos.Commit) -> None:  # on the executor
        worker, executor = _worker()
        line = {"batch": commit.batch_id, "partition": commit.partition, "worker": worker}
        with open(home / "where.jsonl", "a") as f:
            f.write(json.dumps(line | {"executor": executor}) + "\n")

    def on_batch(summary: eos.BatchSummary) -> None:  # on the driver
        with open(home / "batches.jsonl", "a") as f:
            for p in summary.per_partition:
                line = {"batch": summary.batch_id, "partition": p["partition"], "in": p["records_in"]}
                line |= {"restored": p["restored"], "from_snapshot": p["snapshots_restored"]}
                f.write(json.dumps(line) + "\n")

    spark = eos.spark_session("store-placement", master=master, conf={"spark.executor.memory": "1g"})
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=app_id,
        output_topic=output,
        processing_guarantee="exactly_once",
        state_dir="eos-state",  # relative: each executor's own work directory, as a host's own disk
        state_snapshot_location=str(home / "snapshots") if snapshots else None,
        state_snapshot_interval_ms=1,  # after every batch
        task_affinity=affinity,
    )
    sink = eos.sink(
        config, process=Counter(work), stores={"counts": "json"}, on_commit=on_commit, on_batch=on_batch
    )
    df = eos.read_stream(spark, config, [source], maxOffsetsPerTrigger=8_000)
    query = (
        df.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(home / "ckpt"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    while not (home / "stop").exists():
        query.awaitTermination(1)  # raises the query's error, if it failed
    query.stop()
    spark.stop()


if __name__ == "__main__":
    main()
