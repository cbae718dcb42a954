"""A store of 100,000 keys rebuilt from its changelog, and what an abort costs in each store mode."""

from __future__ import annotations

import json
import sqlite3
import threading
import time

import attrs
from confluent_kafka import Producer

import eos
from eos import testing
from eos._kafka._changelog import ensure_changelog
from eos._log import get_logger
from eos._scope import PartitionScope
from eos.state._partition import PartitionState
from tests.support.changelogs import write_changelog

KEYS = 100_000


def _fill_changelog(bootstrap: str, changelog: str) -> None:
    write_changelog(bootstrap, changelog, ((f"key{i}".encode(), json.dumps(i).encode()) for i in range(KEYS)))


def _open(config, source) -> tuple[PartitionState, float]:
    scope = PartitionScope(config, source, 0, 0, None, get_logger(test="restore"))
    state = PartitionState(scope, {"big": eos.StoreSpec()})
    started = time.perf_counter()
    state.open(KEYS)  # every record of committed input
    return state, time.perf_counter() - started


def test_restore_100k_keys_and_abort_cost_per_mode(bootstrap, names, tmp_path):
    source = names("in")
    testing.create_topic(bootstrap, source, 1)
    base = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=source,
        processing_guarantee="exactly_once",
        state_dir=str(tmp_path / "full"),
    )
    changelog = ensure_changelog(base, source, "big").name
    _fill_changelog(bootstrap, changelog)

    state, seconds = _open(base, source)
    try:
        assert state.restored == KEYS
        store = state.view.store("big")
        assert store.get("key0") == 0 and store.get(f"key{KEYS - 1}") == KEYS - 1
    finally:
        state.close()
    db = tmp_path / "full" / base.app_id / f"{source}-0" / "big.sqlite"
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM kv").fetchone()[0] == KEYS
    print(f"\nrestored {KEYS} records in {seconds:.2f}s: {KEYS / seconds:,.0f} records/s")

    abort_cost = {}
    for mode in ("transactional", "wipe"):
        config = attrs.evolve(base, state_mode=mode, state_dir=str(tmp_path / mode))
        state, _ = _open(config, source)
        try:
            store = state.view.store("big")
            store.put("key7", -1)  # an uncommitted write, then the transaction aborts
            started = time.perf_counter()
            state.reopen(KEYS)
            abort_cost[mode] = time.perf_counter() - started
            assert store.get("key7") == 7, f"{mode}: the aborted write must be gone"
            assert sum(1 for _ in store.keys()) == KEYS
        finally:
            state.close()
    print(
        f"abort with {KEYS} keys in the store: transactional {abort_cost['transactional'] * 1000:.1f} ms, "
        f"wipe-and-restore {abort_cost['wipe'] * 1000:.1f} ms "
        f"({abort_cost['wipe'] / abort_cost['transactional']:.0f}x)"
    )


def test_restore_waits_for_an_open_transaction_instead_of_stopping_short(bootstrap, names, tmp_path):
    """A read_committed reader stops at the last stable offset: a restore that took that for the end
    would return partial state. It must wait until the transaction ends, then read everything."""
    source = names("in")
    testing.create_topic(bootstrap, source, 1)
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=source,
        processing_guarantee="exactly_once",
        state_dir=str(tmp_path),
    )
    changelog = ensure_changelog(config, source, "big").name
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{changelog}-open"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(changelog, json.dumps(i).encode(), f"key{i}".encode(), partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(10, 15):
        producer.produce(changelog, json.dumps(i).encode(), f"key{i}".encode(), partition=0)
    producer.flush(30)  # in the log, uncommitted: the last stable offset stays before them

    done = threading.Event()
    result = {}

    def restore():
        state, _ = _open(config, source)
        result["restored"] = state.restored
        result["keys"] = sorted(state.view.store("big").keys())
        state.close()
        done.set()

    worker = threading.Thread(target=restore, daemon=True)
    worker.start()
    assert not done.wait(3), "the restore returned while a transaction on the changelog was open"
    producer.commit_transaction(30)
    assert done.wait(60), "the restore did not finish after the transaction ended"
    assert result["restored"] == 15
    assert result["keys"] == sorted(f"key{i}" for i in range(15))
