"""A Python worker's life without Spark: one process that runs partition tasks one after another, keeping
its producers between them (`eos._kafka._producer`'s cache) as a PySpark worker does, so that a test can give
two such workers the same input partition in turn.

    python worker_app.py BOOTSTRAP APP_ID INPUT OUTPUT OPERATION_TIMEOUT_MS

Reads one task per line on stdin, `{"batch": N, "from": A, "to": B}`: the rows of input partition 0 at
offsets [A, B), handed over as Arrow batches as `mapInArrow` would. Prints one JSON line per task: its
`PartitionStats`, or `{"error": "..."}`. Crash points come from the environment (`EOS_CRASH_AT`).
"""

from __future__ import annotations

import json
import sys

import eos
from eos._core._arrow import Layout
from eos._core._spec import TaskSpec
from eos._core._task import run_partition
from tests.integration.partition_task_app import batches, rows


def main() -> None:
    bootstrap, app_id, source, output, operation_timeout_ms = sys.argv[1:6]
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=app_id,
        output_topic=output,
        processing_guarantee="exactly_once",
        operation_timeout_ms=int(operation_timeout_ms),
    )
    for line in sys.stdin:
        task = json.loads(line)
        wanted = (r for r in rows(bootstrap, source, 0) if task["from"] <= r["offset"] < task["to"])
        try:
            for stats in run_partition(
                TaskSpec(config, task["batch"], Layout(value="value", key="key")), batches(wanted)
            ):
                print(json.dumps(stats.to_pylist()[0]), flush=True)
        except eos.EosError as exc:
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)


if __name__ == "__main__":
    main()
