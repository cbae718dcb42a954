"""The changelog restore rate, measured after the rounds: a store of `--restore-keys` keys rebuilt from
its changelog into an empty state directory, with each state store in each state mode. No Spark: eos's
own PartitionState, opened in this process."""

from __future__ import annotations

import random
import shutil
import time
import uuid
from typing import TYPE_CHECKING

import attrs

import eos
from bench import bench_report as report
from bench._common import log
from bench._kafka import delete_topic
from eos import testing
from tests.support.changelogs import write_changelog

if TYPE_CHECKING:
    from bench._rows import Bench


def fill_changelog(
    bootstrap: str, changelog: str, keys: list[int], first_input: int = 0, value: bytes = b""
) -> None:
    """`keys` into partition 0 of `changelog` as eos writes a store's records, `value` + the key's number
    the value."""
    write_changelog(bootstrap, changelog, ((b"key%d" % i, value + b"%d" % i) for i in keys), first_input)


def _state(config, source: str):
    from eos._log import get_logger
    from eos._scope import PartitionScope
    from eos.state._partition import PartitionState

    scope = PartitionScope(config, source, 0, 0, None, get_logger(bench="restore"))
    return PartitionState(scope, {"big": eos.StoreSpec()})


def snapshot_rebuilds(base, source: str, changelog: str, bootstrap: str, keys: int, work, runs: int) -> dict:
    """Per state store: the store rebuilt whole from the changelog, then from a snapshot (on a local
    file system) plus a tail of 1% of `keys` written after it; seconds each, the snapshot's size and
    the seconds to take it. Appends the tail to `changelog` once per store."""
    from eos.state import _snapshot

    tail = max(keys // 100, 1)
    out: dict[str, dict] = {}
    committed = keys
    for store in ("rocksdb", "sqlite"):
        location = work / f"snapshots-{store}-{uuid.uuid4().hex[:6]}"
        config = attrs.evolve(
            base,
            state_store=store,
            state_dir=str(work / f"snap-{store}-{uuid.uuid4().hex[:6]}"),
            state_snapshot_location=str(location),
            state_snapshot_interval_ms=1,
        )
        state, t = _state(config, source), time.perf_counter()
        state.open(committed)
        full = time.perf_counter() - t
        t = time.perf_counter()
        state.snapshot_if_due(committed)
        taken = time.perf_counter() - t
        state.close()
        (snapshot,) = _snapshot.listed(_snapshot.store_location(config, source, 0, "big"))
        fill_changelog(bootstrap, changelog, list(range(tail)), committed, b"t")
        committed += tail
        rebuilds = []
        for _ in range(runs):
            shutil.rmtree(config.state_dir, ignore_errors=True)
            state, t = _state(config, source), time.perf_counter()
            state.open(committed)
            seconds = time.perf_counter() - t
            restored, used = state.restored, state.from_snapshot
            state.close()
            if used != 1 or restored > tail + 1:
                raise RuntimeError(
                    f"snapshot rebuild ({store}) used {used} snapshots, read {restored} records"
                )
            rebuilds.append(seconds)
        shutil.rmtree(config.state_dir, ignore_errors=True)
        shutil.rmtree(location, ignore_errors=True)
        out[store] = {
            "full_seconds": full,
            "snapshot_seconds": taken,
            "snapshot_bytes": snapshot.size,
            "tail": tail,
            "rebuild_seconds": rebuilds,
            "median_rebuild_seconds": report.median(rebuilds),
        }
        log(
            f"restore {store}: whole changelog {full:.1f}s; snapshot taken in {taken:.1f}s"
            f" ({snapshot.size / 2**20:.0f} MiB); snapshot + {tail:,}-record tail"
            f" {report.median(rebuilds):.1f}s"
        )
    return out


def restore(bench: Bench) -> dict:
    """A store of `restore_keys` keys rebuilt from its changelog into an empty state directory,
    per state store and state mode, interleaved."""
    from eos._kafka._changelog import ensure_changelog
    from eos._log import get_logger
    from eos._scope import PartitionScope
    from eos.state._partition import PartitionState

    keys = bench.args.restore_keys
    order = list(range(keys))
    if bench.args.restore_order == "random":  # keys as a hash spreads them, not in their B-tree order
        random.Random(7).shuffle(order)
    source = f"bench-restore-in-{uuid.uuid4().hex[:6]}"
    testing.create_topic(bench.bootstrap, source, 1)
    base = bench.config("restore", "exactly_once", output_topic=source)
    changelog = ensure_changelog(base, source, "big").name
    t0 = time.perf_counter()
    fill_changelog(bench.bootstrap, changelog, order)
    log(f"restore: changelog of {keys:,} keys written in {time.perf_counter() - t0:.1f}s")
    # per state_store and state_mode, interleaved
    modes: dict[str, list[float]] = {
        f"{store} {mode}": [] for store in ("rocksdb", "sqlite") for mode in ("wipe", "transactional")
    }
    for _ in range(bench.args.runs):
        for mode in modes:
            store, state_mode = mode.split()
            state_dir = bench.work / f"restore-{store}-{state_mode}-{uuid.uuid4().hex[:6]}"
            config = attrs.evolve(base, state_mode=state_mode, state_store=store, state_dir=str(state_dir))
            state = PartitionState(
                PartitionScope(config, source, 0, 0, None, get_logger(bench="restore")),
                {"big": eos.StoreSpec()},
            )
            t = time.perf_counter()
            state.open(keys)  # every record of committed input
            seconds = time.perf_counter() - t
            restored = state.restored
            state.close()
            shutil.rmtree(state_dir, ignore_errors=True)
            if restored != keys:
                raise RuntimeError(f"restore ({mode}) read {restored} records, expected {keys}")
            modes[mode].append(keys / seconds)
            log(f"restore {mode}: {keys / seconds:,.0f} records/s")
    snapshots = snapshot_rebuilds(base, source, changelog, bench.bootstrap, keys, bench.work, bench.args.runs)
    delete_topic(bench.bootstrap, changelog)
    delete_topic(bench.bootstrap, source)
    return {
        "keys": keys,
        "modes": {
            m: {"records_per_s": v, "median_records_per_s": report.median(v)} for m, v in modes.items()
        },
        "snapshots": snapshots,
    }
