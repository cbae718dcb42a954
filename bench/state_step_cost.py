"""Where a stateful partition's steps 1-4 and its commit go, on a running broker (`make broker-up`):

    .venv/bin/python -m bench.state_step_cost [--bootstrap 127.0.0.1:9092] [--batches 10]
        [--rows 50000] [--keys 1000]

One input partition written exactly once by the executor-side protocol in this process (no Spark), one
task per batch as a worker that keeps its producer runs them, `process_batch` counting per key in one
store. Each call the state makes on the way is timed (ms per batch): the changelog's ensure and topic
id, its bounds, the restore, the store's open, checkpoint reads and writes, the changelog writes and the
store's commit. docs/benchmarks.md quotes it.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable

import pyarrow as pa

import eos
from eos import testing
from eos._core._arrow import Layout
from eos._core._spec import Functions, TaskSpec
from eos._core._task import run_partition
from eos._kafka import _changelog
from eos.state import _partition, _store
from examples.pipeline import count_per_key_batch

#: what is timed: (owner, attribute, label)
TIMED = (
    (_changelog, "ensure_changelog", "ensure changelog"),
    (_changelog, "topic_id", "changelog topic id"),
    (_changelog, "bounds", "changelog bounds"),
    (_changelog, "restore", "restore"),
    (_store.PartitionStore, "open", "store open"),
    (_store.PartitionStore, "read_checkpoint", "checkpoint read"),
    (_store.PartitionStore, "write_checkpoint", "checkpoint write"),
    (_partition.PartitionState, "produce_changelog", "changelog produce"),
    (_partition.PartitionState, "on_commit", "store commit"),
)


def timed(spent: dict[str, float], label: str, fn: Callable) -> Callable:
    def wrapper(*args, **kwargs):
        t0 = time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[label] += 1000 * (time.monotonic() - t0)

    return wrapper


def rows(topic: str, start: int, count: int, keys: int) -> list[pa.RecordBatch]:
    offsets = list(range(start, start + count))
    table = {
        "topic": [topic] * count,
        "partition": [0] * count,
        "offset": offsets,
        "value": [b"v%d" % o for o in offsets],
        "key": [b"k%d" % (o % keys) for o in offsets],
    }
    batch = pa.RecordBatch.from_pydict(table)
    return [batch.slice(i, 10_000) for i in range(0, count, 10_000)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--rows", type=int, default=50_000, help="per batch")
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--store", default="sqlite", choices=("sqlite", "rocksdb"), help="state_store")
    args = parser.parse_args()
    run = uuid.uuid4().hex[:6]
    source, output = f"state-cost-in-{run}", f"state-cost-out-{run}"
    for topic in (source, output):
        testing.create_topic(args.bootstrap, topic, 1)
    testing.produce_sequence(args.bootstrap, source, 1, args.batches * args.rows)  # offsets that exist
    spent: dict[str, float] = defaultdict(float)
    for owner, name, label in TIMED:
        setattr(owner, name, timed(spent, label, getattr(owner, name)))
    per_batch: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as state_dir:
        config = eos.Config(
            bootstrap_servers=args.bootstrap,
            app_id=f"state-cost-{run}",
            output_topic=output,
            processing_guarantee="exactly_once",
            state_dir=state_dir,
            state_store=args.store,
            commit_every=10 * args.rows,
        )
        functions = Functions(process_batch=count_per_key_batch, stores={"counts": eos.StoreSpec()})
        for batch_id in range(args.batches):
            spent.clear()
            t0 = time.monotonic()
            job = TaskSpec(config, batch_id, Layout(), functions)
            (stats,) = [
                s.to_pylist()[0]
                for s in run_partition(job, iter(rows(source, batch_id * args.rows, args.rows, args.keys)))
            ]
            figures = {
                "task": 1000 * (time.monotonic() - t0),
                "steps 1-4": 1000 * stats["start_seconds"],
                "commit": 1000 * stats["commit_seconds_total"],
            }
            per_batch.append({**figures, **spent})
    labels = ["task", "steps 1-4", "commit", *[label for _, _, label in TIMED]]
    print("ms per batch (the first batch creates the changelog and the store; medians leave it out)")
    print("batch  " + "  ".join(f"{label:>18}" for label in labels))
    for i, figures in enumerate(per_batch):
        print(f"{i:5}  " + "  ".join(f"{figures.get(label, 0.0):18.1f}" for label in labels))
    steady = per_batch[1:] or per_batch
    print(
        "median "
        + "  ".join(f"{statistics.median(f.get(label, 0.0) for f in steady):18.1f}" for label in labels)
    )


if __name__ == "__main__":
    main()
