"""What opening, writing and closing a RocksDB database costs, as a stateful task does once per store
(raw rocksdict, no eos): with the column family eos keeps the changelog offset in, and without one.

    .venv/bin/python -m bench.probes.rocksdb_open [--keys 2500] [--rounds 20]

Each round opens the database, writes `--keys` keys in one write batch (2,500: what one of the bench's
4 partitions writes a batch) and closes it. Prints the median milliseconds of each step.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from rocksdict import Options, Rdict, WriteBatch


def _options() -> Options:
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    options.set_keep_log_file_num(1)
    options.set_skip_stats_update_on_db_open(True)
    options.set_stats_dump_period_sec(0)
    return options


def run(column_family: bool, keys: int, rounds: int) -> dict[str, float]:
    path = tempfile.mkdtemp() + "/db"
    took: dict[str, list[float]] = {"open": [], "write": [], "close": []}
    for i in range(rounds):
        t = time.perf_counter()
        if column_family:
            db = Rdict(path, _options(), column_families={"eos": Options(raw_mode=True)})
            meta, handle = db.get_column_family("eos"), db.get_column_family_handle("eos")
        else:
            db = Rdict(path, _options())
        took["open"].append(time.perf_counter() - t)
        t = time.perf_counter()
        batch = WriteBatch(raw_mode=True)
        for j in range(keys):
            batch.put(b"k%d" % j, b"%d" % i)
        if column_family:
            batch.put(b"changelog_offset", b"%d" % i, handle)
        else:
            batch.put(b"\x00changelog_offset", b"%d" % i)
        db.write(batch)
        took["write"].append(time.perf_counter() - t)
        t = time.perf_counter()
        if column_family:
            meta.close()
            del meta, handle
        db.close()
        took["close"].append(time.perf_counter() - t)
    return {step: round(1000 * statistics.median(v), 2) for step, v in took.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=2_500)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    for column_family in (True, False):
        label = "with the column family" if column_family else "one column family"
        print(f"{label}: ms {run(column_family, args.keys, args.rounds)}")


if __name__ == "__main__":
    main()
