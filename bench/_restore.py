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
from confluent_kafka import Producer

import eos
from bench import bench_report as report
from bench._common import log
from bench._kafka import delete_topic
from eos import testing

if TYPE_CHECKING:
    from bench._rows import Bench


def restore(bench: Bench) -> dict:
    """A store of `restore_keys` keys rebuilt from its changelog into an empty state directory,
    per state store and state mode, interleaved."""
    from eos._core._scope import PartitionScope
    from eos._kafka._changelog import ensure_changelog
    from eos._log import get_logger
    from eos._names import INPUT_OFFSET_HEADER
    from eos.state._partition import PartitionState

    keys = bench.args.restore_keys
    order = list(range(keys))
    if bench.args.restore_order == "random":  # keys as a hash spreads them, not in their B-tree order
        random.Random(7).shuffle(order)
    source = f"bench-restore-in-{uuid.uuid4().hex[:6]}"
    testing.create_topic(bench.bootstrap, source, 1)
    base = bench.config("restore", "exactly_once", output_topic=source)
    changelog = ensure_changelog(base, source, "big").name
    producer = Producer(
        {"bootstrap.servers": bench.bootstrap, "transactional.id": f"{changelog}-filler", "linger.ms": 20}
    )
    producer.init_transactions(30)
    t0 = time.perf_counter()
    for start in range(0, keys, 50_000):
        producer.begin_transaction()
        for i in order[start : start + 50_000]:
            while True:
                try:
                    producer.produce(
                        changelog, b"%d" % i, b"key%d" % i, partition=0,
                        headers=[(INPUT_OFFSET_HEADER, b"%d" % i)],
                    )  # fmt: skip
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.commit_transaction(60)
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
            state.open(None)
            seconds = time.perf_counter() - t
            restored = state.restored
            state.close()
            shutil.rmtree(state_dir, ignore_errors=True)
            if restored != keys:
                raise RuntimeError(f"restore ({mode}) read {restored} records, expected {keys}")
            modes[mode].append(keys / seconds)
            log(f"restore {mode}: {keys / seconds:,.0f} records/s")
    delete_topic(bench.bootstrap, changelog)
    delete_topic(bench.bootstrap, source)
    return {
        "keys": keys,
        "modes": {
            m: {"records_per_s": v, "median_records_per_s": report.median(v)} for m, v in modes.items()
        },
    }
