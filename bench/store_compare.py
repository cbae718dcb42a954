"""Side-by-side comparison of the two embedded stores eos's state can use (SQLite, RocksDB via
rocksdict), raw, in one run: running-count updates committed every N keys, point reads, and a bulk
restore load. Prints ops/s and the SQLite/RocksDB ratio of each. eos's own stores over them:
`bench.state_step_cost --store`, and `make bench`'s rows 4s/4bs and restore rows.

    python bench/store_compare.py [--keys 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path


def sqlite_run(path: Path, keys: int, commit_every: int) -> dict[str, float]:
    db = sqlite3.connect(path / "s.sqlite", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID")
    out = {}
    t = time.perf_counter()
    for start in range(0, keys, commit_every):
        db.execute("BEGIN")
        db.executemany(
            "INSERT OR REPLACE INTO kv VALUES (?, ?)",
            ((f"k{i}".encode(), str(i).encode()) for i in range(start, min(keys, start + commit_every))),
        )
        db.execute("COMMIT")
    out["batched_writes"] = keys / (time.perf_counter() - t)
    t = time.perf_counter()
    for i in range(keys):
        db.execute("SELECT v FROM kv WHERE k = ?", (f"k{i}".encode(),)).fetchone()
    out["point_reads"] = keys / (time.perf_counter() - t)
    db.execute("DELETE FROM kv")
    t = time.perf_counter()
    db.execute("BEGIN")
    db.executemany(
        "INSERT OR REPLACE INTO kv VALUES (?, ?)", ((f"k{i}".encode(), b"x" * 16) for i in range(keys))
    )
    db.execute("COMMIT")
    out["bulk_restore"] = keys / (time.perf_counter() - t)
    db.close()
    return out


def rocks_run(path: Path, keys: int, commit_every: int) -> dict[str, float]:
    from rocksdict import Rdict, WriteBatch

    db = Rdict(str(path / "r"))
    out = {}
    t = time.perf_counter()
    for start in range(0, keys, commit_every):
        wb = WriteBatch()
        for i in range(start, min(keys, start + commit_every)):
            wb.put(f"k{i}".encode(), str(i).encode())
        db.write(wb)
    out["batched_writes"] = keys / (time.perf_counter() - t)
    t = time.perf_counter()
    for i in range(keys):
        db.get(f"k{i}".encode())
    out["point_reads"] = keys / (time.perf_counter() - t)
    t = time.perf_counter()
    wb = WriteBatch()
    for i in range(keys):
        wb.put(f"r{i}".encode(), b"x" * 16)
    db.write(wb)
    out["bulk_restore"] = keys / (time.perf_counter() - t)
    db.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {"sqlite": [], "rocksdb": []}
    for _ in range(args.rounds):  # interleaved, so machine noise hits both alike
        for name, fn in (("sqlite", sqlite_run), ("rocksdb", rocks_run)):
            tmp = Path(tempfile.mkdtemp())
            try:
                results[name].append(fn(tmp, args.keys, 1_000))
            finally:
                shutil.rmtree(tmp)
    summary = {}
    for metric in results["sqlite"][0]:
        s = statistics.median(r[metric] for r in results["sqlite"])
        r = statistics.median(r[metric] for r in results["rocksdb"])
        summary[metric] = {
            "sqlite_ops_s": round(s),
            "rocksdb_ops_s": round(r),
            "sqlite_over_rocksdb": round(s / r, 2),
        }
        print(f"{metric:<16} sqlite {s:>12,.0f}/s   rocksdb {r:>12,.0f}/s   ratio {s / r:5.2f}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
