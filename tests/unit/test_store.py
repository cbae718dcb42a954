"""eos.state's PartitionStore over each backend (RocksDB, SQLite): the data, the checkpoint file, the
open transaction's writes and the per-store file lock, in both state modes. A read-only view of the
data (`peek`, what `eos state show` uses) shows what is really on disk. No broker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from eos.errors import EosError, StoreLockedError
from eos.state._backends import backend
from eos.state._store import PartitionStore

REPO = Path(__file__).resolve().parents[2]
KIND = "sqlite"  # set per test by the `each_backend` fixture


pytestmark = pytest.mark.usefixtures("each_backend")


def on_disk(store: PartitionStore) -> tuple[dict[bytes, bytes], int | None]:
    """The keys and changelog offset a read-only view of the store's data sees."""
    with type(store).peek(store.directory, store.name) as (items, local):
        return dict(items), local


def checkpoint_file(store: PartitionStore) -> int | None:
    if not store.checkpoint_path.exists():
        return None
    return json.loads(store.checkpoint_path.read_text())["changelog_offset"]


def opened(directory: Path, transactional: bool, name: str = "counts") -> PartitionStore:
    store = backend(KIND)(directory, name, transactional)
    store.open(lock_timeout_s=1)
    return store


@pytest.fixture
def tx(tmp_path):
    store = opened(tmp_path / "in-0", transactional=True)
    yield store
    store.close()


@pytest.fixture
def wipe_store(tmp_path):
    store = opened(tmp_path / "in-0", transactional=False)
    yield store
    store.close()


@pytest.fixture(params=[True, False], ids=["transactional", "wipe"])
def any_store(request, tmp_path):
    store = opened(tmp_path / "in-0", transactional=request.param)
    yield store
    store.close()


# -- layout and a fresh store --------------------------------------------------------------------------


def test_open_creates_the_directory_and_files(tmp_path):
    directory = tmp_path / "app" / "in-3"
    store = opened(directory, transactional=True)
    try:
        assert store.db_path == directory / f"counts.{KIND}"
        assert store.checkpoint_path == directory / "counts.checkpoint"
        assert store.db_path.exists()
        assert (directory / "counts.lock").exists()
        assert not store.checkpoint_path.exists()
    finally:
        store.close()


def test_fresh_store_is_empty_with_no_offsets(any_store):
    assert any_store.get(b"a") is None
    assert list(any_store.items()) == []
    assert list(any_store.keys()) == []
    assert list(any_store.changes()) == []
    assert any_store.local_offset() is None
    assert any_store.read_checkpoint() is None
    assert on_disk(any_store) == ({}, None)


# -- transactional mode --------------------------------------------------------------------------------


def test_transactional_writes_are_invisible_on_disk_until_commit(tx):
    tx.put(b"a", b"1")
    tx.put(b"b", b"2")
    assert tx.get(b"a") == b"1"  # this store sees its own open writes
    assert on_disk(tx) == ({}, None)
    assert not tx.checkpoint_path.exists()
    tx.commit(7)
    assert on_disk(tx) == ({b"a": b"1", b"b": b"2"}, 7)
    assert checkpoint_file(tx) == 7
    assert tx.pending == {}
    assert tx.pending_offsets == {}
    assert list(tx.changes()) == []


def test_transactional_delete_reaches_disk_at_commit(tx):
    tx.put(b"a", b"1")
    tx.put(b"b", b"2")
    tx.commit(2)
    tx.put(b"a", None)
    assert tx.get(b"a") is None
    assert on_disk(tx)[0] == {b"a": b"1", b"b": b"2"}
    tx.commit(3)
    assert on_disk(tx) == ({b"b": b"2"}, 3)


def test_transactional_commit_offsets(tx):
    tx.commit(4)  # nothing written: the offset and checkpoint still move
    assert tx.local_offset() == 4
    assert tx.read_checkpoint().changelog_offset == 4
    assert on_disk(tx) == ({}, 4)
    tx.put(b"a", b"1")
    tx.commit(9)
    assert tx.local_offset() == 9
    assert tx.read_checkpoint().changelog_offset == 9
    assert checkpoint_file(tx) == 9


def test_transactional_rollback_drops_pending_writes(tx):
    tx.put(b"a", b"1")
    tx.commit(1)
    tx.put(b"a", b"changed")
    tx.put(b"b", b"2")
    tx.put(b"a", None)
    tx.rollback()
    assert tx.get(b"a") == b"1"
    assert tx.get(b"b") is None
    assert list(tx.items()) == [(b"a", b"1")]
    assert list(tx.changes()) == []
    tx.commit(2)
    assert on_disk(tx) == ({b"a": b"1"}, 2)


def test_transactional_commit_is_all_or_nothing(tx):
    tx.put(b"a", b"1")
    tx.commit(5)
    tx.put(b"b", b"2")
    tx.put(b"c", object())  # no backend can store this: the apply fails halfway
    with pytest.raises((TypeError, Exception)):
        tx.commit(6)
    assert on_disk(tx) == ({b"a": b"1"}, 5)  # neither b nor the new offset
    assert checkpoint_file(tx) == 5
    assert tx.local_offset() == 5
    assert tx.get(b"b") == b"2"  # the writes are still pending, not lost
    assert set(tx.pending) == {b"b", b"c"}


def test_transactional_pending_writes_do_not_survive_close(tmp_path):
    store = opened(tmp_path, transactional=True)
    store.put(b"a", b"1")
    store.commit(1)
    store.put(b"b", b"2")
    store.close()
    again = opened(tmp_path, transactional=True)
    try:
        assert list(again.items()) == [(b"a", b"1")]
        assert again.local_offset() == 1
        assert again.read_checkpoint().changelog_offset == 1
    finally:
        again.close()


# -- wipe mode -----------------------------------------------------------------------------------------


def test_wipe_mode_writes_go_straight_to_disk(wipe_store):
    wipe_store.put(b"a", b"1")
    assert on_disk(wipe_store) == ({b"a": b"1"}, None)
    wipe_store.put(b"a", b"2")
    wipe_store.put(b"b", b"3")
    wipe_store.put(b"b", None)
    assert on_disk(wipe_store)[0] == {b"a": b"2"}
    wipe_store.commit(4)
    assert on_disk(wipe_store) == ({b"a": b"2"}, 4)
    assert checkpoint_file(wipe_store) == 4


def test_wipe_mode_first_write_after_a_commit_removes_the_checkpoint(wipe_store):
    wipe_store.commit(1)
    assert checkpoint_file(wipe_store) == 1
    wipe_store.put(b"a", b"1")
    assert not wipe_store.checkpoint_path.exists()  # a crash now leaves the store unclean
    wipe_store.put(b"b", b"2")
    assert not wipe_store.checkpoint_path.exists()
    wipe_store.commit(3)
    assert checkpoint_file(wipe_store) == 3
    assert wipe_store.read_checkpoint().changelog_offset == 3
    wipe_store.put(b"a", None)  # a delete is a write too
    assert not wipe_store.checkpoint_path.exists()
    assert wipe_store.read_checkpoint() is None
    wipe_store.commit(4)
    assert checkpoint_file(wipe_store) == 4


def test_wipe_mode_first_write_after_reopening_a_clean_store_removes_the_checkpoint(tmp_path):
    store = opened(tmp_path, transactional=False)
    store.put(b"a", b"1")
    store.commit(2)
    store.close()
    again = opened(tmp_path, transactional=False)
    try:
        assert again.read_checkpoint().changelog_offset == 2
        assert again.checkpoint_path.exists()
        assert again.get(b"a") == b"1"  # reads do not touch the checkpoint
        again.put(b"b", b"2")
        assert not again.checkpoint_path.exists()
    finally:
        again.close()


def test_wipe_mode_rollback_leaves_the_written_rows_on_disk(wipe_store):
    """Why wipe mode wipes after an abort: the rows are already in SQLite."""
    wipe_store.put(b"a", b"1")
    wipe_store.commit(1)
    wipe_store.put(b"a", b"aborted")
    wipe_store.rollback()
    assert wipe_store.pending == {}
    assert on_disk(wipe_store)[0] == {b"a": b"aborted"}
    assert not wipe_store.checkpoint_path.exists()


# -- both modes: wipe, restore, changes, checkpoint file -----------------------------------------------


def test_wipe_removes_data_checkpoint_and_pending(any_store):
    any_store.put(b"a", b"1")
    any_store.commit(3)
    any_store.put(b"b", b"2")
    any_store.wipe()
    assert any_store.pending == {}
    assert list(any_store.changes()) == []
    assert list(any_store.items()) == []
    assert any_store.local_offset() is None
    assert not any_store.checkpoint_path.exists()
    assert any_store.read_checkpoint() is None
    assert on_disk(any_store) == ({}, None)
    # still open and usable afterwards
    any_store.put(b"c", b"3")
    any_store.commit(1)
    assert on_disk(any_store) == ({b"c": b"3"}, 1)
    assert checkpoint_file(any_store) == 1


def test_apply_restored_applies_puts_and_deletes_and_sets_the_offset(any_store):
    any_store.put(b"old", b"x")
    any_store.commit(1)
    any_store.apply_restored([(b"a", b"1"), (b"b", b"2"), (b"a", None), (b"old", None), (b"b", b"3")], 12)
    assert on_disk(any_store) == ({b"b": b"3"}, 12)
    assert any_store.local_offset() == 12
    assert list(any_store.items()) == [(b"b", b"3")]
    any_store.apply_restored([], 15)
    assert any_store.local_offset() == 15
    assert on_disk(any_store) == ({b"b": b"3"}, 15)


def test_changes_has_one_entry_per_key_with_the_input_offset_of_its_last_write(any_store):
    any_store.input_offset = 3
    any_store.put(b"a", b"a1")
    any_store.input_offset = 4
    any_store.put(b"b", b"b1")
    any_store.put(b"c", b"c1")
    any_store.input_offset = 7
    any_store.put(b"a", b"a2")
    any_store.input_offset = 8
    any_store.put(b"b", None)
    changes = list(any_store.changes())
    assert len(changes) == 3
    assert sorted(changes, key=lambda c: c[0]) == [(b"a", b"a2", 7), (b"b", None, 8), (b"c", b"c1", 4)]


def test_changes_are_cleared_by_commit_and_rollback(any_store):
    any_store.input_offset = 0
    any_store.put(b"a", b"1")
    any_store.commit(1)
    assert list(any_store.changes()) == []
    any_store.input_offset = 1
    any_store.put(b"b", b"2")
    assert list(any_store.changes()) == [(b"b", b"2", 1)]
    any_store.rollback()
    assert list(any_store.changes()) == []


def test_items_merge_disk_rows_with_pending_writes(any_store):
    any_store.apply_restored([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], 3)
    any_store.put(b"b", b"20")
    any_store.put(b"c", None)
    any_store.put(b"d", b"4")
    items = list(any_store.items())
    assert dict(items) == {b"a": b"1", b"b": b"20", b"d": b"4"}
    assert len(items) == 3
    assert sorted(any_store.keys()) == [b"a", b"b", b"d"]


def test_committed_data_survives_close_and_reopen(tmp_path, any_store):
    mode = any_store.transactional
    any_store.put(b"a", b"1")
    any_store.commit(5)
    any_store.close()
    again = opened(any_store.directory, transactional=mode)
    try:
        assert again.get(b"a") == b"1"
        assert again.local_offset() == 5
        assert again.read_checkpoint().changelog_offset == 5
    finally:
        again.close()


@pytest.mark.parametrize("content", ["", "not json", "{}", '{"changelog_offset": "x"}', "[1]", "null"])
def test_unreadable_checkpoint_reads_as_none(any_store, content):
    any_store.checkpoint_path.write_text(content)
    assert any_store.read_checkpoint() is None


def test_write_checkpoint_replaces_the_file_and_leaves_no_temporary(any_store):
    any_store.write_checkpoint(3)
    any_store.write_checkpoint(4)
    assert checkpoint_file(any_store) == 4
    assert sorted(p.name for p in any_store.directory.glob("*checkpoint*")) == ["counts.checkpoint"]
    any_store.delete_checkpoint()
    any_store.delete_checkpoint()  # idempotent
    assert any_store.read_checkpoint() is None


def test_stores_of_one_partition_are_independent(tmp_path):
    a = opened(tmp_path, transactional=True, name="a")
    b = opened(tmp_path, transactional=True, name="b")
    try:
        a.put(b"k", b"from a")
        a.commit(1)
        assert b.get(b"k") is None
        assert b.local_offset() is None
        assert b.read_checkpoint() is None
        b.wipe()
        assert a.get(b"k") == b"from a"
        assert a.read_checkpoint().changelog_offset == 1
    finally:
        a.close()
        b.close()


# -- the lock ------------------------------------------------------------------------------------------

HOLDER = """
import sys
from pathlib import Path
from eos.state._backends import backend

store = backend(sys.argv[3])(Path(sys.argv[1]), sys.argv[2], True)
store.open(lock_timeout_s=5)
print("locked", flush=True)
sys.stdin.readline()
store.close()
print("closed", flush=True)
sys.stdin.readline()
"""

TRY_OPEN = """
import sys
from pathlib import Path
from eos.errors import StoreLockedError
from eos.state._backends import backend

store = backend(sys.argv[3])(Path(sys.argv[1]), sys.argv[2], True)
try:
    store.open(lock_timeout_s=0.3)
except StoreLockedError:
    print("locked")
else:
    store.close()
    print("opened")
"""


def python(code: str, *args: str, **kwargs) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], env=env, text=True, stdout=subprocess.PIPE, **kwargs
    )


@pytest.fixture
def holder(tmp_path):
    """Another process holding the lock of store 'counts' in tmp_path."""
    proc = python(HOLDER, str(tmp_path), "counts", KIND, stdin=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


def test_a_store_locked_by_another_process_cannot_be_opened_until_it_closes(tmp_path, holder):
    store = backend(KIND)(tmp_path, "counts", transactional=True)
    with pytest.raises(StoreLockedError, match="'counts'.*locked by another process") as err:
        store.open(lock_timeout_s=0.3)
    assert isinstance(err.value, EosError)
    assert store._db is None  # nothing opened, no lock kept
    # the holder closes the store but stays alive: close() itself released the lock
    holder.stdin.write("\n")
    holder.stdin.flush()
    assert holder.stdout.readline().strip() == "closed"
    assert holder.poll() is None
    store.open(lock_timeout_s=5)
    writes_and_closes(store)


def writes_and_closes(store: PartitionStore) -> None:
    """An opened store takes a write, commits it and reads it back; then it is closed."""
    try:
        store.put(b"a", b"1")
        store.commit(1)
        assert store.get(b"a") == b"1"
    finally:
        store.close()


def test_the_lock_is_per_store(tmp_path, holder):
    """Another store of the directory, and a store of the same name in another directory, open and
    write while the holder keeps 'counts' locked."""
    writes_and_closes(opened(tmp_path, transactional=True, name="other"))
    writes_and_closes(opened(tmp_path / "in-1", transactional=True))
    with pytest.raises(StoreLockedError):
        backend(KIND)(tmp_path, "counts", transactional=True).open(lock_timeout_s=0.3)


def test_a_killed_holder_releases_the_lock(tmp_path, holder):
    holder.kill()
    holder.wait(10)
    store = opened(tmp_path, transactional=True)
    store.close()


def test_open_waits_for_the_lock_until_the_deadline(tmp_path, holder):
    store = backend(KIND)(tmp_path, "counts", transactional=True)
    outcome: list[BaseException | None] = []

    def take() -> None:
        try:
            store.open(lock_timeout_s=30)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - reported to the test thread
            outcome.append(exc)

    waiter = threading.Thread(target=take)
    waiter.start()
    time.sleep(0.2)  # let it find the lock taken (the test passes either way if it does not)
    assert outcome == []  # still waiting, not failed
    holder.stdin.write("\n")
    holder.stdin.flush()
    waiter.join(30)
    try:
        assert outcome == [None]
    finally:
        store.close()


def test_this_process_holding_the_lock_keeps_another_process_out(tmp_path):
    store = opened(tmp_path, transactional=False)
    try:
        out, _ = python(TRY_OPEN, str(tmp_path), "counts", KIND).communicate(timeout=30)
        assert out.strip() == "locked"
    finally:
        store.close()
    out, _ = python(TRY_OPEN, str(tmp_path), "counts", KIND).communicate(timeout=30)
    assert out.strip() == "opened"


def test_wipe_keeps_the_lock(tmp_path):
    store = opened(tmp_path, transactional=False)
    try:
        store.put(b"a", b"1")
        store.wipe()
        out, _ = python(TRY_OPEN, str(tmp_path), "counts", KIND).communicate(timeout=30)
        assert out.strip() == "locked"
    finally:
        store.close()


def test_a_restore_checkpoints_the_write_ahead_log_less_often_and_writes_the_same(tmp_path):
    """Restored writes applied out of key order, a key twice and a delete: the last write of each key
    counts; while restoring, SQLite's automatic checkpoint waits for 10x its default pages."""
    if KIND != "sqlite":
        pytest.skip("SQLite's write-ahead log")
    store = opened(tmp_path, transactional=False)

    def autocheckpoint():
        return store._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0]

    assert autocheckpoint() == 1_000
    with store.restoring():
        assert autocheckpoint() == 10_000
        store.apply_restored([(b"k3", b"1"), (b"k1", b"1"), (b"k3", b"2"), (b"k2", b"1")], 4)
        store.apply_restored([(b"k1", None), (b"k0", b"1")], 6)
    assert autocheckpoint() == 1_000
    assert on_disk(store)[0] == {b"k0": b"1", b"k2": b"1", b"k3": b"2"}
    assert store.local_offset() == 6
