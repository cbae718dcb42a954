"""What a stateful `process` costs per row in eos's own task code, on a running broker (`make
broker-up`), no Spark: one input partition, batches of 50,000 rows over 2,500 keys through
`run_partition` with `examples.pipeline.count_per_key` (a store read and write and an output per row).

    .venv/bin/python -m bench.probes.process_rows [--bootstrap 127.0.0.1:9092] [--batches 8]

Prints the median wall and CPU milliseconds of a batch, the first batch (which creates the changelog
and the store) left out.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid

import eos
from bench.state_step_cost import rows
from eos import testing
from eos._core._arrow import Layout
from eos._core._spec import Functions, TaskSpec
from eos._core._task import run_partition
from examples.pipeline import count_per_key

ROWS = 50_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--batches", type=int, default=8)
    args = parser.parse_args()
    run = uuid.uuid4().hex[:6]
    source, output = f"probe-rows-in-{run}", f"probe-rows-out-{run}"
    for topic in (source, output):
        testing.create_topic(args.bootstrap, topic, 1)
    testing.produce_sequence(args.bootstrap, source, 1, ROWS * args.batches)
    functions = Functions(process=count_per_key, stores={"counts": eos.StoreSpec(value_serde="json")})
    wall: list[float] = []
    cpu: list[float] = []
    with tempfile.TemporaryDirectory() as state_dir:
        config = eos.Config(
            bootstrap_servers=args.bootstrap,
            app_id=f"probe-rows-{run}",
            output_topic=output,
            processing_guarantee="exactly_once",
            state_dir=state_dir,
            commit_every=10 * ROWS,
        )
        for batch_id in range(args.batches):
            t, c = time.perf_counter(), time.process_time()
            job = TaskSpec(config, batch_id, Layout(), functions)
            list(run_partition(job, iter(rows(source, batch_id * ROWS, ROWS, 2_500))))
            wall.append(1000 * (time.perf_counter() - t))
            cpu.append(1000 * (time.process_time() - c))
    print(
        f"a batch of {ROWS:,} rows: median {statistics.median(wall[1:]):.0f} ms wall,"
        f" {statistics.median(cpu[1:]):.0f} ms CPU"
    )


if __name__ == "__main__":
    main()
