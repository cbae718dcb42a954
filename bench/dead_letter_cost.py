"""What bad records cost with on_error="dead_letter", in one partition task (no Spark) on a running broker
(`make broker-up`):

    .venv/bin/python -m bench.dead_letter_cost [--bootstrap 127.0.0.1:9092] [--rows 100000] [--rounds 3]

One transaction of `--rows` rows (in Arrow batches of 10,000), written by `process` (per row) and by
`process_batch`, with 0, 1 and 10 bad records at random offsets; seconds per task, each round on fresh
topics. Each bad record aborts its transaction and writes its kept input again; a `process_batch` that
raised is then called one row at a time for the rest of that transaction. The README ("Bad records")
quotes it.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import uuid

import pyarrow as pa

from eos import testing
from eos._core._arrow import Layout
from eos._core._spec import Functions, TaskSpec
from eos._core._task import PartitionTask
from eos.config import Config


def run(bootstrap: str, rows: int, bad: set[int], batch: bool) -> float:
    """Seconds one task takes over `rows` rows of which `bad` raise."""
    run_id = uuid.uuid4().hex[:6]
    source, output, dead = f"dlc-in-{run_id}", f"dlc-out-{run_id}", f"dlc-dlq-{run_id}"
    for topic in (source, output, dead):
        testing.create_topic(bootstrap, topic, 1)
    data = pa.RecordBatch.from_pydict(
        {
            "topic": pa.array([source] * rows, pa.string()),
            "partition": pa.array([0] * rows, pa.int32()),
            "offset": pa.array(range(rows), pa.int64()),
            "value": pa.array([b"v%d" % i for i in range(rows)], pa.binary()),
        }
    )

    def process(row, state):
        if row.offset in bad:
            raise ValueError("bad record")
        return row.value

    def process_batch(records, state):
        if bad.intersection(records.column("offset").to_pylist()):
            raise ValueError("bad record")
        return pa.RecordBatch.from_arrays([records.column("value")], ["value"])

    config = Config(
        bootstrap_servers=bootstrap,
        app_id=f"dlc-{run_id}",
        output_topic=output,
        processing_guarantee="exactly_once",
        on_error="dead_letter",
        dead_letter_topic=dead,
        commit_every=rows,
    )
    job = (
        TaskSpec(config, 0, Layout(), Functions(process_batch=process_batch))
        if batch
        else TaskSpec(config, 0, Layout(), Functions(process))
    )
    started = time.monotonic()
    stats = PartitionTask(job, source, 0).run(data.slice(i, 10_000) for i in range(0, rows, 10_000))
    seconds = time.monotonic() - started
    assert stats.dead_letters == len(bad) and stats.records_out == rows - len(bad), stats
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(1)
    for batch in (False, True):
        for count in (0, 1, 10):
            bad = set(rng.sample(range(args.rows), count))
            seconds = [run(args.bootstrap, args.rows, bad, batch) for _ in range(args.rounds)]
            print(
                f"{'process_batch' if batch else 'process'}, {count} bad of {args.rows:,}: "
                + " · ".join(f"{s:.2f}" for s in seconds)
                + f" s, median {statistics.median(seconds):.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
