"""What a store read costs per key (`eos.state._sqlite.SqliteStore`): `get()` that asks SQLite (the
key not yet read in this task), `get()` answered from the task's cache of committed values, and
`get_many()` in chunks of 10,000 keys (what `process_batch` reads through). No broker.

    .venv/bin/python -m bench.probes.sqlite_get [--keys 10000] [--rounds 5]

The store holds `--keys` committed keys (`make bench`'s stateful rows count 10,000 keys) in a temporary
directory; each round opens it afresh (an empty cache) and reads every key in a shuffled order, first
by `get()`, then by `get()` again, then, opened afresh once more, by `get_many()`. Prints microseconds
per key, wall and process CPU, medians over rounds (on a busy machine the CPU time is the steadier).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from bench._common import KEYS
from eos.state._sqlite import SqliteStore as PartitionStore

CHUNK = 10_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=KEYS)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    keys = [b"key%d" % i for i in range(args.keys)]
    random.Random(7).shuffle(keys)
    us: dict[str, list[tuple[float, float]]] = {
        "get, from SQLite": [],
        "get, cached": [],
        "get_many, from SQLite": [],
    }
    with tempfile.TemporaryDirectory() as tmp:

        def opened() -> PartitionStore:
            store = PartitionStore(Path(tmp), "probe", transactional=True)
            store.open(lock_timeout_s=5)
            return store

        store = opened()
        store.put_many([(k, b"%d" % i) for i, k in enumerate(keys)])
        store.commit(0)
        store.close()

        def per_key(read) -> tuple[float, float]:
            wall, cpu = time.perf_counter(), time.process_time()
            read()
            n = len(keys)
            return (time.perf_counter() - wall) / n * 1e6, (time.process_time() - cpu) / n * 1e6

        for _ in range(args.rounds):
            store = opened()
            get = store.get
            us["get, from SQLite"].append(per_key(lambda: [get(k) for k in keys]))  # noqa: B023
            us["get, cached"].append(per_key(lambda: [get(k) for k in keys]))  # noqa: B023
            store.close()
            store = opened()
            many = store.get_many
            us["get_many, from SQLite"].append(
                per_key(lambda: [many(keys[i : i + CHUNK]) for i in range(0, len(keys), CHUNK)])  # noqa: B023
            )
            store.close()
    print(f"{args.keys:,} keys, {args.rounds} rounds, medians")
    for what, values in us.items():
        wall = statistics.median(w for w, _ in values)
        cpu = statistics.median(c for _, c in values)
        print(f"{what:<22} {wall:6.2f} us per key ({cpu:.2f} us CPU)")


if __name__ == "__main__":
    main()
