"""A lost store rebuilt from its whole changelog against from a snapshot and the changelog's tail (1% of
the keys written after the snapshot), per state store, on a running broker (`make broker-up`): the
seconds of each, the seconds to take the snapshot and its size. The snapshot location is a local
directory: a remote one adds its download time.

    .venv/bin/python -m bench.probes.snapshot_restore [--bootstrap 127.0.0.1:9092] [--keys 1000000]
        [--runs 2]

`make bench` measures the same at its --restore-keys (the restore section of its report).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
import uuid
from pathlib import Path

import eos
from bench._restore import fill_changelog, snapshot_rebuilds
from eos import testing
from eos._kafka._changelog import ensure_changelog


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    source = f"probe-snap-in-{uuid.uuid4().hex[:6]}"
    testing.create_topic(args.bootstrap, source, 1)
    work = Path(tempfile.mkdtemp(prefix="eos-snapshot-probe-"))
    base = eos.Config(
        bootstrap_servers=args.bootstrap,
        app_id=f"probe-snap-{uuid.uuid4().hex[:6]}",
        output_topic=source,
        processing_guarantee="exactly_once",
        transaction_timeout_ms=120_000,
    )
    changelog = ensure_changelog(base, source, "big").name
    t = time.perf_counter()
    fill_changelog(args.bootstrap, changelog, list(range(args.keys)))
    print(f"changelog of {args.keys:,} keys written in {time.perf_counter() - t:.1f}s", flush=True)
    try:
        result = snapshot_rebuilds(base, source, changelog, args.bootstrap, args.keys, work, args.runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"keys": args.keys, "snapshots": result}, indent=2))


if __name__ == "__main__":
    main()
