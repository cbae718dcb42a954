"""eos.state._partition.PartitionState: wipe or roll forward at task start, after an abort and after a commit,
over real PartitionStores in tmp_path, each test over each backend. The changelog is a Python list per
store: no broker.

`ensure_changelog` is a no-op; `PartitionState._restore` is replaced by a fake that records
(store, start offset) and applies the fake changelog from there, as the real one would; a few tests at
the end run the real `_restore` against a fake consumer."""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError

import eos
from eos._kafka import _changelog, _clients
from eos._names import INPUT_OFFSET_HEADER, OWNER_HEADER, changelog_topic
from eos._scope import PartitionScope
from eos.state import StoreSpec
from eos.state._backends import KINDS, backend
from eos.state._partition import PartitionState
from eos.state._store import PartitionStore
from tests.support.configs import config as base_config
from tests.support.logs import Log
from tests.support.messages import Message
from tests.support.producers import FakeOutputProducer, FakeRecords

IN = "in"
KIND = "sqlite"  # set per test by the `each_backend` fixture


pytestmark = pytest.mark.usefixtures("each_backend")


def new_store(directory: Path, name: str) -> PartitionStore:
    return backend(KIND)(directory, name, transactional=True)


PARTITION = 0
MODES = ["transactional", "wipe"]
#: the changelog's topic id, as the fakes below answer it
TOPIC_ID = "Hv7BGJ4zSHGV1V9WOTkWqg"
DAY_MS = 86_400_000


class FakeChangelogs:
    """Each store's changelog as a list of (key, value) records; offset = list index."""

    def __init__(self) -> None:
        self.records: dict[str, list[tuple[bytes, bytes | None]]] = {}
        self.restores: list[tuple[str, int]] = []
        self.ensured: list[tuple[str, str]] = []

    def restore(self, name: str, store: PartitionStore, start: int) -> int:
        self.restores.append((name, start))
        records = self.records.get(name, [])
        batch = records[start:]
        store.apply_restored(batch, max(start, len(records)))
        return len(batch)


@pytest.fixture
def changelogs(monkeypatch) -> FakeChangelogs:
    fake = FakeChangelogs()

    def ensure(config, input_topic, store, partition=0):
        assert partition == PARTITION, "the changelog must be checked for the task's own partition"
        fake.ensured.append((input_topic, store))
        return _changelog.Changelog(changelog_topic(config.app_id, input_topic, store), 1, DAY_MS)

    monkeypatch.setattr(_changelog, "ensure_changelog", ensure)
    monkeypatch.setattr(_changelog, "topic_id", lambda config, changelog: TOPIC_ID)
    # The changelog's bounds never make the decision here (the restore tests below cover them).
    monkeypatch.setattr(_changelog, "bounds", lambda config, changelog, partition: (0, 1 << 62))
    monkeypatch.setattr(
        _changelog,
        "restore",
        lambda config, log, store, changelog, partition, start, high, skip_from, owner: fake.restore(
            store.name, store, start
        ),
    )
    return fake


def config(tmp_path: Path, mode: str = "transactional", guarantee: str = "exactly_once", **kw) -> eos.Config:
    return base_config(
        bootstrap_servers="127.0.0.1:9",
        processing_guarantee=guarantee,
        state_dir=str(tmp_path),
        state_mode=mode,
        **{"state_store": KIND, **kw},
    )


#: a committed input offset past every record's input in these tests: a restore skips none of them
ALL_COMMITTED = 1_000_000


def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "app" / f"{IN}-{PARTITION}"


def seed(tmp_path: Path, name: str, rows: dict[bytes, bytes], offset: int, checkpoint: bool = True) -> None:
    """Leave a local store behind as an earlier task would: committed rows at `offset`."""
    store = new_store(store_dir(tmp_path), name)
    store.open(lock_timeout_s=1)
    store.changelog_id = TOPIC_ID
    for key, value in rows.items():
        store.put(key, value)
    store.commit(offset)
    if not checkpoint:
        store.delete_checkpoint()
    store.close()


def partition_state(cfg: eos.Config, *names: str, log: Log | None = None) -> PartitionState:
    specs = {name: StoreSpec(key_serde="bytes", value_serde="bytes") for name in names or ("counts",)}
    return PartitionState(PartitionScope(cfg, IN, PARTITION, 0, None, log or Log()), specs)


@pytest.fixture
def opened_states():
    states: list[PartitionState] = []

    def open_(cfg, *names, committed_input=None, log=None, witnesses=None) -> PartitionState:
        state = partition_state(cfg, *names, log=log)
        states.append(state)
        state.open(committed_input, witnesses)
        return state

    yield open_
    for state in states:
        state.close()


def delivered(offset: int) -> FakeRecords:
    """A producer's records after a commit whose changelog records of `counts` ended at `offset`."""
    records = FakeOutputProducer().records
    records.delivered_offsets[("app-in-counts-changelog", PARTITION)] = offset
    return records


# -- naming --------------------------------------------------------------------------------------------


def test_changelog_topic_naming(tmp_path):
    cfg = config(tmp_path)
    assert changelog_topic(cfg.app_id, "orders", "counts") == "app-orders-counts-changelog"
    state = partition_state(cfg, "counts", "seen")
    assert state.changelogs == {"counts": "app-in-counts-changelog", "seen": "app-in-seen-changelog"}


def test_store_files_live_under_state_dir_app_and_partition(tmp_path, changelogs, opened_states):
    state = opened_states(config(tmp_path), "counts")
    store = state.stores["counts"]
    assert store.db_path == tmp_path / "app" / "in-0" / f"counts.{KIND}"
    assert changelogs.ensured == [(IN, "counts")]


@pytest.mark.parametrize("mode", MODES)
def test_store_mode_follows_config(tmp_path, mode):
    state = partition_state(config(tmp_path, mode), "counts")
    assert state.stores["counts"].transactional is (mode == "transactional")


# -- task start ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_no_checkpoint_wipes_and_restores_from_zero(tmp_path, changelogs, opened_states, mode):
    seed(tmp_path, "counts", {b"stale": b"x", b"a": b"old"}, offset=5, checkpoint=False)
    changelogs.records["counts"] = [(b"a", b"1"), (b"b", b"2"), (b"b", None), (b"c", b"3")]
    log = Log()
    state = opened_states(config(tmp_path, mode), "counts", log=log)
    assert changelogs.restores == [("counts", 0)]
    store = state.view.store("counts")
    assert dict(store.items()) == {b"a": b"1", b"c": b"3"}  # the stale row is gone
    assert state.restored == 4
    assert state.stores["counts"].local_offset() == 4
    assert log.said("state unclean: wiping and restoring from the changelog")


@pytest.mark.parametrize("mode", MODES)
def test_no_checkpoint_and_empty_changelog_leaves_an_empty_store(tmp_path, changelogs, opened_states, mode):
    seed(tmp_path, "counts", {b"stale": b"x"}, offset=5, checkpoint=False)
    state = opened_states(config(tmp_path, mode), "counts")
    assert changelogs.restores == [("counts", 0)]
    assert list(state.view.store("counts").items()) == []
    assert state.restored == 0


@pytest.mark.parametrize("mode", MODES)
def test_new_state_directory_restores_from_zero_without_an_unclean_warning(
    tmp_path, changelogs, opened_states, mode
):
    changelogs.records["counts"] = [(b"a", b"1")]
    log = Log()
    state = opened_states(config(tmp_path, mode), "counts", log=log)
    assert changelogs.restores == [("counts", 0)]
    assert state.view.store("counts").get(b"a") == b"1"
    assert not log.said("state unclean: wiping and restoring from the changelog")


@pytest.mark.parametrize("mode", MODES)
def test_checkpoint_rolls_forward_from_the_local_offset_and_keeps_data(
    tmp_path, changelogs, opened_states, mode
):
    seed(tmp_path, "counts", {b"a": b"1", b"b": b"2"}, offset=2)
    # two commits by another incarnation after ours: b changed, c added
    changelogs.records["counts"] = [(b"a", b"1"), (b"b", b"2"), (b"b", b"20"), (b"c", b"3")]
    log = Log()
    state = opened_states(config(tmp_path, mode), "counts", log=log)
    assert changelogs.restores == [("counts", 2)]
    assert dict(state.view.store("counts").items()) == {b"a": b"1", b"b": b"20", b"c": b"3"}
    assert state.restored == 2
    assert state.stores["counts"].local_offset() == 4
    assert not log.said("state unclean: wiping and restoring from the changelog")


CHANGELOG = ("app-in-counts-changelog", PARTITION)


@pytest.mark.parametrize("mode", MODES)
def test_one_offset_that_the_witness_proves_a_marker_is_not_read(
    tmp_path, changelogs, opened_states, monkeypatch, mode
):
    """exactly_once: the store reflects the changelog up to 5, the changelog ends at 6, and the committed
    offset's transaction wrote its last changelog record at 4: offset 5 is its marker."""
    seed(tmp_path, "counts", {b"a": b"1"}, offset=5)
    monkeypatch.setattr(_changelog, "bounds", lambda config, changelog, partition: (0, 6))
    changelogs.records["counts"] = [(b"x", b"?")] * 5 + [(b"poison", b"read")]
    state = opened_states(config(tmp_path, mode), "counts", witnesses={CHANGELOG: 4})
    assert changelogs.restores == []
    store = state.stores["counts"]
    assert store.local_offset() == 6 and store.read_checkpoint().changelog_offset == 6
    assert dict(state.view.store("counts").items()) == {b"a": b"1"}


@pytest.mark.parametrize(
    ("guarantee", "witnesses", "high"),
    [
        ("exactly_once", {}, 6),  # no witness for this changelog: the last transaction did not write it
        ("exactly_once", {CHANGELOG: 3}, 6),  # offset 4 is not the store's: something else came first
        ("exactly_once", {CHANGELOG: 4}, 7),  # two offsets: another transaction's record and marker
        ("exactly_once", {("app-in-other-changelog", PARTITION): 4}, 6),  # another store's witness
        ("at_least_once", {CHANGELOG: 4}, 6),  # no transactions, no markers: offset 5 is a record
    ],
)
def test_the_one_offset_is_read_unless_the_witness_proves_it_a_marker(
    tmp_path, changelogs, opened_states, monkeypatch, guarantee, witnesses, high
):
    seed(tmp_path, "counts", {b"a": b"1"}, offset=5)
    monkeypatch.setattr(_changelog, "bounds", lambda config, changelog, partition: (0, high))
    changelogs.records["counts"] = [(b"x", b"?")] * 5 + [(b"b", b"2")] * (high - 5)
    state = opened_states(config(tmp_path, guarantee=guarantee), "counts", witnesses=witnesses)
    # rolled forward from the store's offset (at_least_once too: a checkpoint written after a restore or
    # a commit names no input skipped, and is no restore cut short)
    assert changelogs.restores == [("counts", 5)]
    assert state.view.store("counts").get(b"b") == b"2"


def test_reopen_after_an_abort_uses_the_witnesses_it_is_given(
    tmp_path, changelogs, opened_states, monkeypatch
):
    seed(tmp_path, "counts", {b"a": b"1"}, offset=5)
    monkeypatch.setattr(_changelog, "bounds", lambda config, changelog, partition: (0, 6))
    changelogs.records["counts"] = [(b"x", b"?")] * 6
    state = opened_states(config(tmp_path), "counts", witnesses={CHANGELOG: 4})
    state.reopen(None, {CHANGELOG: 4})
    assert changelogs.restores == []
    state.reopen(None)  # no witnesses: read
    assert changelogs.restores == []  # the store is at 6 now: nothing left to read either way


@pytest.mark.parametrize("mode", MODES)
def test_a_store_left_by_the_other_backend_is_restored_once_and_its_files_deleted(
    tmp_path, changelogs, opened_states, mode
):
    """`state_store` changed on an existing state directory: the checkpoint file is there, the new
    backend has no data, so the store is restored whole, and the other backend's files go."""
    seed(tmp_path, "counts", {b"a": b"1"}, offset=2)  # this test's backend (KIND)
    other = next(k for k in KINDS if k != KIND)
    changelogs.records["counts"] = [(b"a", b"1"), (b"b", b"2")]
    state = opened_states(config(tmp_path, mode, state_store=other), "counts")
    assert changelogs.restores == [("counts", 0)]
    assert dict(state.view.store("counts").items()) == {b"a": b"1", b"b": b"2"}
    assert not (store_dir(tmp_path) / f"counts.{KIND}").exists()
    assert (store_dir(tmp_path) / f"counts.{other}").exists()


@pytest.mark.parametrize("mode", MODES)
def test_checkpoint_with_nothing_new_keeps_data(tmp_path, changelogs, opened_states, mode):
    seed(tmp_path, "counts", {b"a": b"1"}, offset=3)
    changelogs.records["counts"] = [(b"x", b"?"), (b"y", b"?"), (b"a", b"1")]
    state = opened_states(config(tmp_path, mode), "counts")
    assert changelogs.restores == [("counts", 3)]
    assert dict(state.view.store("counts").items()) == {b"a": b"1"}
    assert state.restored == 0


def test_checkpoint_without_a_local_offset_wipes(tmp_path, changelogs, opened_states):
    """A checkpoint file whose database was lost (or never had an offset) is not clean."""
    seed(tmp_path, "counts", {b"a": b"1"}, offset=3)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store_dir(tmp_path) / 'counts.sqlite'}{suffix}").unlink(missing_ok=True)
    shutil.rmtree(store_dir(tmp_path) / "counts.rocksdb", ignore_errors=True)
    assert (store_dir(tmp_path) / "counts.checkpoint").exists()
    changelogs.records["counts"] = [(b"b", b"2")]
    state = opened_states(config(tmp_path), "counts")
    assert changelogs.restores == [("counts", 0)]
    assert dict(state.view.store("counts").items()) == {b"b": b"2"}


def test_each_store_is_decided_on_its_own(tmp_path, changelogs, opened_states):
    seed(tmp_path, "clean", {b"a": b"1"}, offset=1)
    seed(tmp_path, "unclean", {b"stale": b"x"}, offset=7, checkpoint=False)
    changelogs.records = {"clean": [(b"a", b"1")], "unclean": [(b"b", b"2")]}
    state = opened_states(config(tmp_path), "clean", "unclean")
    assert changelogs.restores == [("clean", 1), ("unclean", 0)]
    assert changelogs.ensured == [(IN, "clean"), (IN, "unclean")]
    assert dict(state.view.store("clean").items()) == {b"a": b"1"}
    assert dict(state.view.store("unclean").items()) == {b"b": b"2"}
    assert state.restored == 1


# -- after an abort: reopen() --------------------------------------------------------------------------


def test_transactional_reopen_drops_pending_writes_and_keeps_committed_data(
    tmp_path, changelogs, opened_states
):
    seed(tmp_path, "counts", {b"a": b"1"}, offset=1)
    changelogs.records["counts"] = [(b"a", b"1")]
    state = opened_states(config(tmp_path, "transactional"), "counts")
    store = state.view.store("counts")
    store.put(b"a", b"aborted")
    store.put(b"b", b"aborted")
    store.delete(b"a")
    state.reopen(committed_input=10)
    assert changelogs.restores == [("counts", 1), ("counts", 1)]  # rolled forward, not from 0
    assert dict(store.items()) == {b"a": b"1"}
    assert state.stores["counts"].pending == {}
    assert state.stores["counts"].read_checkpoint().changelog_offset == 1
    assert state.committed_input == 10


def test_transactional_reopen_rolls_forward_over_what_a_newer_incarnation_committed(
    tmp_path, changelogs, opened_states
):
    seed(tmp_path, "counts", {b"a": b"1"}, offset=1)
    changelogs.records["counts"] = [(b"a", b"1")]
    state = opened_states(config(tmp_path, "transactional"), "counts")
    state.view.store("counts").put(b"mine", b"aborted")
    changelogs.records["counts"] += [(b"theirs", b"2")]  # committed by the incarnation that fenced us
    state.reopen(committed_input=None)
    assert changelogs.restores[-1] == ("counts", 1)
    assert dict(state.view.store("counts").items()) == {b"a": b"1", b"theirs": b"2"}


def test_wipe_mode_reopen_after_writes_wipes_and_restores_from_zero(tmp_path, changelogs, opened_states):
    seed(tmp_path, "counts", {b"a": b"1"}, offset=1)
    changelogs.records["counts"] = [(b"a", b"1")]
    state = opened_states(config(tmp_path, "wipe"), "counts")
    store = state.view.store("counts")
    store.put(b"a", b"aborted")
    store.put(b"b", b"aborted")
    assert not state.stores["counts"].checkpoint_path.exists()
    state.reopen(committed_input=None)
    assert changelogs.restores == [("counts", 1), ("counts", 0)]
    assert dict(store.items()) == {b"a": b"1"}  # the aborted writes were on disk: wiped, restored


def test_wipe_mode_reopen_without_writes_only_rolls_forward(tmp_path, changelogs, opened_states):
    seed(tmp_path, "counts", {b"a": b"1"}, offset=1)
    changelogs.records["counts"] = [(b"a", b"1")]
    state = opened_states(config(tmp_path, "wipe"), "counts")
    state.view.store("counts").get(b"a")  # reads are not writes
    state.reopen(committed_input=None)
    assert changelogs.restores == [("counts", 1), ("counts", 1)]
    assert dict(state.view.store("counts").items()) == {b"a": b"1"}


def test_wipe_mode_reopen_after_a_commit_only_rolls_forward(tmp_path, changelogs, opened_states):
    seed(tmp_path, "counts", {b"a": b"1"}, offset=1)
    changelogs.records["counts"] = [(b"a", b"1")]
    state = opened_states(config(tmp_path, "wipe"), "counts")
    state.view.store("counts").put(b"b", b"2")
    changelogs.records["counts"] += [(b"b", b"2")]  # the transaction wrote its changelog and committed
    state.on_commit(delivered(1))
    state.reopen(committed_input=None)
    assert changelogs.restores == [("counts", 1), ("counts", 2)]
    assert dict(state.view.store("counts").items()) == {b"a": b"1", b"b": b"2"}


@pytest.mark.parametrize("mode", MODES)
def test_a_completed_restore_leaves_the_store_checkpointed(tmp_path, changelogs, opened_states, mode):
    seed(tmp_path, "counts", {b"stale": b"x"}, offset=5, checkpoint=False)
    changelogs.records["counts"] = [(b"a", b"1"), (b"b", b"2")]
    state = opened_states(config(tmp_path, mode), "counts")
    store = state.stores["counts"]
    assert store.read_checkpoint().changelog_offset == 2
    assert store.local_offset() == 2


def test_transactional_reopen_before_the_first_commit_does_not_wipe(tmp_path, changelogs, opened_states):
    changelogs.records["counts"] = [(b"a", b"1"), (b"b", b"2")]
    state = opened_states(config(tmp_path, "transactional"), "counts")  # new directory: full restore
    assert changelogs.restores == [("counts", 0)]
    state.view.store("counts").put(b"c", b"aborted")
    state.reopen(committed_input=None)
    assert changelogs.restores == [("counts", 0), ("counts", 2)]  # SPEC: rolls back, no full wipe
    assert dict(state.view.store("counts").items()) == {b"a": b"1", b"b": b"2"}


def test_wipe_mode_reopen_before_the_first_commit(tmp_path, changelogs, opened_states):
    changelogs.records["counts"] = [(b"a", b"1"), (b"b", b"2")]
    state = opened_states(config(tmp_path, "wipe"), "counts")
    state.reopen(committed_input=None)  # nothing written yet: still clean
    assert changelogs.restores == [("counts", 0), ("counts", 2)]
    state.view.store("counts").put(b"c", b"aborted")
    state.reopen(committed_input=None)  # written: unclean
    assert changelogs.restores == [("counts", 0), ("counts", 2), ("counts", 0)]
    assert dict(state.view.store("counts").items()) == {b"a": b"1", b"b": b"2"}


# -- after a commit: on_commit() -----------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_on_commit_moves_written_stores_to_the_changelog_end_and_keeps_the_others(
    tmp_path, changelogs, opened_states, mode
):
    seed(tmp_path, "counts", {b"a": b"1"}, offset=5)
    seed(tmp_path, "idle", {b"x": b"9"}, offset=3)
    changelogs.records = {"counts": [(b"?", b"?")] * 5, "idle": [(b"?", b"?")] * 3}
    state = opened_states(config(tmp_path, mode), "counts", "idle")
    state.view.store("counts").put(b"b", b"2")
    state.on_commit(delivered(41))
    counts, idle = state.stores["counts"], state.stores["idle"]
    assert counts.local_offset() == 42
    assert counts.read_checkpoint().changelog_offset == 42
    assert counts.pending == {}
    assert dict(counts.items()) == {b"a": b"1", b"b": b"2"}
    assert idle.local_offset() == 3
    assert idle.read_checkpoint().changelog_offset == 3
    assert dict(idle.items()) == {b"x": b"9"}


def test_on_commit_makes_transactional_writes_durable(tmp_path, changelogs, opened_states):
    seed(tmp_path, "counts", {}, offset=0)
    state = opened_states(config(tmp_path, "transactional"), "counts")
    state.view.store("counts").put(b"a", b"1")
    state.on_commit(delivered(0))
    state.close()
    store = new_store(store_dir(tmp_path), "counts")
    store.open(lock_timeout_s=1)
    try:
        assert store.get(b"a") == b"1"
        assert store.local_offset() == 1
        assert store.read_checkpoint().changelog_offset == 1
    finally:
        store.close()


def test_on_commit_after_a_delete_only_transaction(tmp_path, changelogs, opened_states):
    seed(tmp_path, "counts", {b"a": b"1"}, offset=1)
    changelogs.records["counts"] = [(b"a", b"1")]
    state = opened_states(config(tmp_path), "counts")
    state.view.store("counts").delete(b"a")
    state.on_commit(delivered(2))
    assert state.stores["counts"].local_offset() == 3
    assert list(state.view.store("counts").items()) == []


# -- while processing ----------------------------------------------------------------------------------


def test_set_input_offset_and_pending_keys(tmp_path, changelogs, opened_states):
    state = opened_states(config(tmp_path), "a", "b")
    assert state.pending_keys() == 0
    state.set_input_offset(17)
    assert {s.input_offset for s in state.stores.values()} == {17}
    state.view.store("a").put(b"k1", b"v")
    state.view.store("a").put(b"k2", b"v")
    state.view.store("b").put(b"k1", b"v")
    assert state.pending_keys() == 2


def test_produce_changelog_sends_one_record_per_key_with_its_input_offset_and_owner(
    tmp_path, changelogs, opened_states
):
    state = opened_states(config(tmp_path), "counts", "seen")
    state.set_input_offset(10)
    state.view.store("counts").put(b"a", b"1")
    state.set_input_offset(11)
    state.view.store("counts").put(b"a", b"2")
    state.view.store("counts").delete(b"b")
    state.view.store("seen").put(b"x", b"y")
    producer = FakeOutputProducer()
    state.produce_changelog(producer.records)
    produced = producer.kafka.produced
    assert all(p.changelog for p in produced), "each write went through produce_changelog"
    counts = [(INPUT_OFFSET_HEADER, b"11"), (OWNER_HEADER, b"app/in/counts")]
    seen = [(INPUT_OFFSET_HEADER, b"11"), (OWNER_HEADER, b"app/in/seen")]
    assert sorted(
        [
            (p.topic, p.out.key, p.out.value, p.out.headers, p.out.partition, p.in_topic, p.in_offset)
            for p in produced
        ],
        key=repr,
    ) == sorted(
        [
            ("app-in-counts-changelog", b"a", b"2", counts, PARTITION, IN, 11),
            ("app-in-counts-changelog", b"b", None, counts, PARTITION, IN, 11),
            ("app-in-seen-changelog", b"x", b"y", seen, PARTITION, IN, 11),
        ],
        key=repr,
    )


def test_close_releases_every_store(tmp_path, changelogs):
    state = partition_state(config(tmp_path), "a", "b")
    state.open(None)
    state.close()
    for name in ("a", "b"):
        store = new_store(store_dir(tmp_path), name)
        store.open(lock_timeout_s=0)  # would raise StoreLockedError if still held
        store.close()


# -- the real _restore against a fake consumer ---------------------------------------------------------


class FakeError:
    def __init__(self, code: int) -> None:
        self._code = code

    def code(self) -> int:
        return self._code

    def str(self) -> str:
        return f"error {self._code}"


class FakeConsumer:
    """A read_committed changelog partition: records at their offsets, then commit markers up to `high`."""

    def __init__(self, records: list[tuple[int, bytes, bytes | None, int]], high: int, low: int = 0) -> None:
        self.records = records  # (offset, key, value, input offset)
        self.high = high
        self.low = low
        self.position: int | None = None
        self.assigned: list[tuple[str, int, int]] = []
        self.unassigned = 0
        self.waits: list[float] = []  # each consume()'s timeout

    def get_watermark_offsets(self, tp, timeout=None, cached=False):
        return self.low, self.high

    def assign(self, tps):
        self.assigned += [(tp.topic, tp.partition, tp.offset) for tp in tps]
        self.position = tps[0].offset

    def unassign(self):
        self.unassigned += 1

    def consume(self, num_messages=1, timeout=-1):
        assert self.position is not None, "consume before assign"
        self.waits.append(timeout)
        if self.position < self.low:  # as librdkafka with auto.offset.reset=error
            return [Message(self.position, error=FakeError(KafkaError._AUTO_OFFSET_RESET))]
        batch = [Message(o, k, v, i) for o, k, v, i in self.records if o >= self.position][:num_messages]
        if batch:
            self.position = batch[-1].offset() + 1
            return batch
        self.position = self.high
        return [Message(self.high, error=FakeError(KafkaError._PARTITION_EOF))]


@pytest.fixture
def consumer(monkeypatch):
    holder: dict[str, FakeConsumer] = {}
    monkeypatch.setattr(
        _changelog,
        "ensure_changelog",
        lambda config, topic, store, partition=0: _changelog.Changelog("unused", 1, DAY_MS),
    )
    monkeypatch.setattr(_changelog, "topic_id", lambda config, changelog: TOPIC_ID)
    monkeypatch.setattr(_clients, "restore_consumer", lambda config: holder["consumer"])
    monkeypatch.setattr(_clients, "watermark_consumer", lambda config: holder["consumer"])

    def install(records, high, low=0) -> FakeConsumer:
        holder["consumer"] = FakeConsumer(records, high, low)
        return holder["consumer"]

    return install


def short_timeouts() -> dict:
    return {"commit_interval_ms": 100, "transaction_timeout_ms": 1000, "operation_timeout_ms": 1000}


def test_restore_applies_the_changelog_up_to_the_high_watermark(tmp_path, consumer):
    fake = consumer([(0, b"a", b"1", 0), (1, b"b", b"2", 1), (3, b"a", None, 5), (4, b"c", b"3", 6)], high=6)
    state = partition_state(config(tmp_path, **short_timeouts()), "counts")
    try:
        state.open(committed_input=7)
        assert fake.assigned == [("app-in-counts-changelog", PARTITION, 0)]
        assert fake.unassigned == 1
        assert dict(state.view.store("counts").items()) == {b"b": b"2", b"c": b"3"}
        assert state.stores["counts"].local_offset() == 6
        assert state.restored == 4
    finally:
        state.close()


def test_restore_rolls_forward_from_the_local_offset(tmp_path, consumer):
    seed(tmp_path, "counts", {b"a": b"1"}, offset=2)
    fake = consumer([(0, b"a", b"1", 0), (2, b"b", b"2", 3)], high=4)
    state = partition_state(config(tmp_path, **short_timeouts()), "counts")
    try:
        state.open(committed_input=4)
        assert fake.assigned == [("app-in-counts-changelog", PARTITION, 2)]
        assert dict(state.view.store("counts").items()) == {b"a": b"1", b"b": b"2"}
        assert state.stores["counts"].local_offset() == 4
        assert state.restored == 1
    finally:
        state.close()


def test_a_roll_forward_over_a_commit_marker_waits_briefly(tmp_path, consumer):
    """The changelog's last offset is the commit marker of the transaction that wrote the local offset:
    the roll-forward at most task starts. librdkafka's consume() returns when it has the batch or when
    its timeout runs out, even if it holds the partition-end event already, so its timeout is what
    such a restore costs (0.5 s of every stateful task in `make bench`, before)."""
    seed(tmp_path, "counts", {b"a": b"1"}, offset=4)
    fake = consumer([(0, b"a", b"1", 0)], high=5)
    state = partition_state(config(tmp_path, **short_timeouts()), "counts")
    try:
        state.open(committed_input=ALL_COMMITTED)
        assert fake.assigned == [("app-in-counts-changelog", PARTITION, 4)]
        assert state.stores["counts"].local_offset() == 5 and state.restored == 0
        assert fake.waits and max(fake.waits) <= 0.05, fake.waits
    finally:
        state.close()


def test_restore_at_the_end_reads_nothing(tmp_path, consumer):
    seed(tmp_path, "counts", {b"a": b"1"}, offset=4)
    fake = consumer([(0, b"a", b"1", 0)], high=4)
    state = partition_state(config(tmp_path, **short_timeouts()), "counts")
    try:
        state.open(committed_input=ALL_COMMITTED)
        assert fake.assigned == []
        assert dict(state.view.store("counts").items()) == {b"a": b"1"}
        assert state.stores["counts"].local_offset() == 4
        assert state.restored == 0
    finally:
        state.close()


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_a_restore_skips_records_of_uncommitted_input_whatever_the_guarantee(tmp_path, consumer, guarantee):
    """Visible changelog records of input at or past the committed offset: at_least_once writes them
    without a transaction (a crash between its flush and its offset commit), and after a switch to
    exactly_once they are still there; their input is processed again, so they are not applied."""
    consumer([(0, b"a", b"1", 3), (1, b"b", b"2", 5), (2, b"a", b"changed", 7)], high=3)
    cfg = config(tmp_path, guarantee=guarantee, **short_timeouts())
    state = partition_state(cfg, "counts")
    try:
        state.open(committed_input=5)  # input 5 and 7 will be processed again
        assert dict(state.view.store("counts").items()) == {b"a": b"1"}
        assert state.restored == 1
        assert state.stores["counts"].local_offset() == 3
    finally:
        state.close()


def test_exactly_once_restore_applies_every_record_of_committed_input(tmp_path, consumer):
    consumer([(0, b"a", b"1", 3), (1, b"b", b"2", 5), (2, b"a", b"changed", 7)], high=3)
    state = partition_state(config(tmp_path, **short_timeouts()), "counts")
    try:
        state.open(committed_input=8)
        assert dict(state.view.store("counts").items()) == {b"a": b"changed", b"b": b"2"}
    finally:
        state.close()


def test_local_store_ahead_of_its_changelog_is_not_trusted(tmp_path, consumer):
    seed(tmp_path, "counts", {b"stale": b"x"}, offset=9)
    consumer([(0, b"a", b"1", 0)], high=2)  # the changelog now ends before the local offset
    state = partition_state(config(tmp_path, **short_timeouts()), "counts")
    try:
        state.open(committed_input=ALL_COMMITTED)
        assert dict(state.view.store("counts").items()) == {b"a": b"1"}
    finally:
        state.close()


def test_a_changelog_that_now_begins_after_the_local_offset_is_restored_from_its_beginning(
    tmp_path, consumer
):
    """DeleteRecords (or a retention) moved the changelog's start past the store's checkpoint: rolling
    forward is impossible, and a consumer would jump to the end and leave stale state marked clean."""
    seed(tmp_path, "counts", {b"a": b"1", b"stale": b"x"}, offset=2)
    fake = consumer([(5, b"a", b"7", 9), (6, b"b", b"8", 10)], high=8, low=5)
    state = partition_state(config(tmp_path, **short_timeouts()), "counts")
    try:
        state.open(committed_input=11)
        assert fake.assigned == [("app-in-counts-changelog", PARTITION, 5)]
        assert dict(state.view.store("counts").items()) == {b"a": b"7", b"b": b"8"}, "wiped, then rebuilt"
        assert state.stores["counts"].local_offset() == 8
    finally:
        state.close()


def test_an_offset_that_leaves_the_changelog_during_the_restore_is_an_error_not_a_jump(tmp_path, consumer):
    fake = consumer([(5, b"a", b"7", 9)], high=8, low=0)

    def moved(tps):  # DeleteRecords runs between the watermark query and the fetch
        fake.assigned += [(tp.topic, tp.partition, tp.offset) for tp in tps]
        fake.position, fake.low = tps[0].offset, 5

    fake.assign = moved
    state = partition_state(config(tmp_path, **short_timeouts()), "counts")
    try:
        with pytest.raises(eos.RetriableError, match="no longer in the changelog"):
            state.open(committed_input=ALL_COMMITTED)
    finally:
        state.close()


# -- a store is restored whole when it cannot be trusted; a restore resumes; its deadline is progress ----


def _rewrite_checkpoint(tmp_path, name="counts", **changes) -> None:
    path = store_dir(tmp_path) / f"{name}.checkpoint"
    fields = json.loads(path.read_text())
    fields.update(changes)
    for key in [k for k, v in fields.items() if v is None]:
        del fields[key]
    path.write_text(json.dumps(fields))


def test_a_store_built_from_another_changelog_topic_is_restored_whole(tmp_path, consumer, monkeypatch):
    """The changelog was deleted and created again (or the state directory is another environment's):
    the store's checkpoint names another topic id, even though the new changelog has grown past it."""
    seed(tmp_path, "counts", {b"stale": b"x"}, offset=2)
    fake = consumer([(0, b"a", b"1", 0), (1, b"b", b"2", 1), (2, b"c", b"3", 2)], high=4)
    monkeypatch.setattr(_changelog, "topic_id", lambda config, changelog: "another-topic-id")
    log = Log()
    state = partition_state(config(tmp_path, **short_timeouts()), "counts", log=log)
    try:
        state.open(committed_input=ALL_COMMITTED)
        assert fake.assigned == [("app-in-counts-changelog", PARTITION, 0)]
        assert dict(state.view.store("counts").items()) == {b"a": b"1", b"b": b"2", b"c": b"3"}
        assert log.said("local store not trusted: wiping and restoring it whole")
        assert state.stores["counts"].read_checkpoint().changelog_id == "another-topic-id"
    finally:
        state.close()


def test_a_checkpoint_that_names_no_changelog_is_restored_whole(tmp_path, consumer):
    seed(tmp_path, "counts", {b"stale": b"x"}, offset=2)
    _rewrite_checkpoint(tmp_path, changelog_id=None)
    fake = consumer([(0, b"a", b"1", 0)], high=3)
    state = partition_state(config(tmp_path, **short_timeouts()), "counts")
    try:
        state.open(committed_input=ALL_COMMITTED)
        assert fake.assigned == [("app-in-counts-changelog", PARTITION, 0)]
        assert dict(state.view.store("counts").items()) == {b"a": b"1"}
    finally:
        state.close()


@pytest.mark.parametrize(
    ("high", "age_s", "whole"),
    [
        (4, 50_000, True),  # records to roll forward over, older than half of delete.retention.ms
        (4, 40_000, False),  # the same, younger
        (3, 50_000, False),  # old, but only its own transaction's commit marker to roll over
    ],
)
def test_a_store_too_old_for_its_tombstones_is_restored_whole(tmp_path, consumer, high, age_s, whole):
    """delete.retention.ms is a day here. The store holds `deleted`; since its checkpoint (offset 2) the
    key was deleted and compaction removed both its record and the tombstone, so the changelog no
    longer says anything of it. Rolled forward, the store would keep it; restored whole, it does not.
    Only a store that has not read its changelog for half of delete.retention.ms is restored whole, and
    only when more than its own commit marker follows its offset."""
    seed(tmp_path, "counts", {b"deleted": b"1", b"kept": b"1"}, offset=2)
    _rewrite_checkpoint(tmp_path, written_at=time.time() - age_s)
    records = [(1, b"kept", b"1", 1)] + ([(3, b"new", b"1", 5)] if high == 4 else [])
    fake = consumer(records, high=high)
    state = partition_state(config(tmp_path, **short_timeouts()), "counts")
    try:
        state.open(committed_input=ALL_COMMITTED)
        assert fake.assigned == [("app-in-counts-changelog", PARTITION, 0 if whole else 2)]
        expected = {b"kept": b"1"} if whole else {b"deleted": b"1", b"kept": b"1"}
        if high == 4:
            expected[b"new"] = b"1"
        assert dict(state.view.store("counts").items()) == expected
    finally:
        state.close()


def test_an_at_least_once_restore_cut_short_starts_over_when_the_committed_offset_moved(tmp_path, consumer):
    seed(tmp_path, "counts", {b"a": b"1"}, offset=1)
    _rewrite_checkpoint(tmp_path, skip_from=3)  # a restore that skipped input from 3 was cut short
    fake = consumer([(0, b"a", b"1", 0), (1, b"b", b"2", 4)], high=2)
    cfg = config(tmp_path, guarantee="at_least_once", **short_timeouts())
    state = partition_state(cfg, "counts")
    try:
        state.open(committed_input=5)  # now input below 5 is committed: record 1 (input 4) applies
        assert fake.assigned == [("app-in-counts-changelog", PARTITION, 0)]
        assert dict(state.view.store("counts").items()) == {b"a": b"1", b"b": b"2"}
        assert state.stores["counts"].read_checkpoint().skip_from is None
    finally:
        state.close()


def test_a_restore_cut_short_resumes_from_what_it_applied(tmp_path, consumer):
    """F6 in a unit: the first restore dies after its first batch (the integration test kills the
    worker for real); the store's checkpoint says where it got to, and the next restore starts there."""
    records = [(o, b"k%d" % o, b"%d" % o, o) for o in range(30)]
    fake = consumer(records, high=30)
    consume = fake.consume
    calls = []

    def dying(num_messages=1, timeout=-1):
        calls.append(num_messages)
        if len(calls) == 2:
            raise KeyboardInterrupt("killed")
        return consume(10, timeout)

    fake.consume = dying
    cfg = config(tmp_path, mode="wipe", **short_timeouts())
    state = partition_state(cfg, "counts")
    with pytest.raises(KeyboardInterrupt):
        state.open(committed_input=ALL_COMMITTED)
    state.close()
    again = consumer(records, high=30)
    state = partition_state(cfg, "counts")
    try:
        state.open(committed_input=ALL_COMMITTED)
        assert again.assigned == [("app-in-counts-changelog", PARTITION, 10)]
        assert state.restored == 20
        assert len(dict(state.view.store("counts").items())) == 30
    finally:
        state.close()


def test_a_restore_that_progresses_outlasts_its_deadline_and_one_that_stalls_does_not(tmp_path, consumer):
    """The deadline (transaction_timeout_ms + operation_timeout_ms, 0.5 s here) counts from the last
    progress: 10 records one per 0.1 s take 1 s and finish; a read that returns nothing fails."""
    timeouts = {"commit_interval_ms": 100, "transaction_timeout_ms": 300, "operation_timeout_ms": 200}
    fake = consumer([(o, b"k%d" % o, b"1", o) for o in range(10)], high=10)
    consume = fake.consume

    def slow(num_messages=1, timeout=-1):
        time.sleep(0.1)
        return consume(1, timeout)

    fake.consume = slow
    state = partition_state(config(tmp_path, **timeouts), "counts")
    try:
        started = time.monotonic()
        state.open(committed_input=ALL_COMMITTED)
        assert time.monotonic() - started > 0.5 and state.restored == 10
    finally:
        state.close()

    stuck = consumer([(0, b"k", b"1", 0)], high=10)  # records 1-9 never come (a transaction stays open)
    stuck.consume = lambda num_messages=1, timeout=-1: (time.sleep(0.05), [])[1]
    state = partition_state(config(tmp_path / "other", **timeouts), "counts")
    try:
        with pytest.raises(eos.RetriableError, match=r"no progress for 0.5s at offset 0 of 10"):
            state.open(committed_input=ALL_COMMITTED)
    finally:
        state.close()


def test_records_of_another_owner_are_refused(tmp_path, consumer, monkeypatch):
    """Two apps' changelog names collide (app `a` reading `b-c`, app `a-b` reading `c`)."""
    fake = consumer([], high=3)
    fake.records = [(0, b"k", b"1", 0)]

    def consume(num_messages=1, timeout=-1):
        fake.position = 3
        return [
            Message(0, b"k", b"1", 0, owner=b"app/in/counts"),
            Message(1, b"k", b"9", 0, owner=b"app-x/y/counts"),
        ]

    fake.consume = consume
    state = partition_state(config(tmp_path, **short_timeouts()), "counts")
    try:
        with pytest.raises(eos.ChangelogError, match=r"offset 1 belongs to store 'app-x/y/counts'"):
            state.open(committed_input=ALL_COMMITTED)
    finally:
        state.close()


@pytest.mark.parametrize("mode", MODES)
def test_a_damaged_store_file_is_deleted_restored_and_said_so(tmp_path, changelogs, opened_states, mode):
    seed(tmp_path, "counts", {b"a": b"1"}, offset=1)
    if KIND == "sqlite":
        with open(store_dir(tmp_path) / "counts.sqlite", "r+b") as f:
            f.write(b"\xde\xad" * 2048)  # "file is not a database"
    else:
        (manifest,) = (store_dir(tmp_path) / "counts.rocksdb").glob("MANIFEST-*")
        manifest.write_bytes(b"\xde\xad" * 2048)  # "Corruption: ... MANIFEST may be corrupted"
    changelogs.records["counts"] = [(b"a", b"1"), (b"b", b"2")]
    log = Log()
    state = opened_states(config(tmp_path, mode), "counts", log=log)
    assert changelogs.restores == [("counts", 0)]
    assert dict(state.view.store("counts").items()) == {b"a": b"1", b"b": b"2"}
    assert log.said("local store file damaged: deleted, restoring it from the changelog")


def test_a_store_damaged_while_a_task_reads_it_loses_its_checkpoint(tmp_path):
    """Damage found in the middle of a task fails the task, and the retry must not meet it again: the
    checkpoint is deleted, so the next attempt restores from the changelog."""
    if KIND != "sqlite":
        pytest.skip("damage inside SQLite's pages; RocksDB reads what it replayed at open")
    seed(tmp_path, "counts", {b"k%d" % i: b"x" * 2000 for i in range(200)}, offset=1)
    store = new_store(store_dir(tmp_path), "counts")
    store.open(lock_timeout_s=1)
    try:
        with open(store.db_path, "r+b") as f:  # past the header, into the pages of the rows
            f.seek(8192)
            f.write(b"\xde\xad" * 100_000)
        with pytest.raises(sqlite3.DatabaseError):
            [store.get(b"k%d" % i) for i in range(200)]
        assert store.read_checkpoint() is None
    finally:
        store.close()
