"""The local embedded store of one named store for one input topic-partition: a SQLite file, a lock,
a checkpoint file, and the open transaction's writes.

SQLite rather than RocksDB: `bench/store_compare.py` measured RocksDB (rocksdict) about 4-5x faster on
raw operations, but SQLite's ~300k writes/s is well above both the per-record Python processing rate
and the changelog restore target, it is in the standard library (no new dependency), and its
transactions apply a batch of writes together with the changelog offset atomically, which is what
the transactional store needs (docs/design.md, "Store reads, and SQLite rather than RocksDB").

Two modes (`Config.state_mode`):
- "transactional" (KIP-892): writes stay in memory until the Kafka transaction commits, then are
  applied in one SQLite transaction with the changelog offset. An abort just drops them.
- "wipe" (KIP-129): writes go to SQLite as they happen; the first write after a commit removes the
  checkpoint file, so an abort or crash with uncommitted writes leaves the store unclean and it is
  wiped and restored.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from eos import _names
from eos.errors import StoreLockedError

_READ_CACHE_MAX_KEYS = 200_000
#: SQLite's automatic checkpoint while a store restores: every 10,000 pages of 4 KiB, not 1,000 (its
#: default): a write-ahead log of up to ~40 MiB; each copy into the database rewrites the pages it touched
_RESTORE_CHECKPOINT_PAGES = 10_000


class PartitionStore:
    def __init__(self, directory: Path, name: str, transactional: bool) -> None:
        self.directory = directory
        self.name = name
        self.transactional = transactional
        self.db_path = _names.store_file(directory, name, _names.DATABASE)
        self.checkpoint_path = _names.store_file(directory, name, _names.CHECKPOINT)
        self.pending: dict[bytes, bytes | None] = {}  # the open transaction's writes, last one wins
        #: committed values read or written in this task (None: known absent); only this process
        #: writes the store while it holds the lock, so they stay true until a wipe or a restore
        self._read_cache: dict[bytes, bytes | None] = {}
        self.pending_offsets: dict[bytes, int] = {}  # input offset of each pending key's last write
        self.input_offset = -1  # the input record being processed
        self._lock_fd: int | None = None
        self._checkpointed = False
        #: the topic id of the changelog the store reflects, recorded in every checkpoint it writes
        self.changelog_id: str | None = None
        #: why the file was found damaged and deleted when the store opened (None: it was not)
        self.corruption: str | None = None
        self._db: sqlite3.Connection | None = None
        self._max_variables = 999

    # -- life cycle -----------------------------------------------------------------------------------

    def open(self, lock_timeout_s: float) -> None:
        """Take the store's lock (one writer per store on a host), then open the database."""
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(_names.store_file(self.directory, self.name, _names.LOCK), os.O_CREAT | os.O_RDWR, 0o644)
        deadline = time.monotonic() + lock_timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise StoreLockedError(
                        f"store {self.name!r} in {self.directory} is locked by another process"
                        f" for more than {lock_timeout_s:g}s"
                    ) from None
                time.sleep(0.05)
        self._lock_fd = fd
        try:
            self._connect()
            self.local_offset()  # reads a page: a damaged file says so now, not in the middle of a task
        except sqlite3.DatabaseError as exc:
            if not _corrupt(exc):
                raise
            # The changelog is the store's truth: a damaged cache is deleted, and recovery restores it.
            self.corruption = f"{type(exc).__name__}: {exc}"
            self.wipe()

    def _connect(self) -> None:
        self._db = sqlite3.connect(self.db_path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        for statement in _names.SCHEMA:
            self._db.execute(statement)
        try:
            self._max_variables = self._db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        except AttributeError:  # Python < 3.11: SQLite's smallest default limit
            self._max_variables = 999

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    # -- reads and writes while processing ------------------------------------------------------------

    def _unclean_if_damaged(self, exc: sqlite3.DatabaseError) -> None:
        """A damaged file found while a task reads or writes the store: without its checkpoint, the
        next attempt wipes it and restores the changelog (instead of failing on it again)."""
        if _corrupt(exc):
            self.delete_checkpoint()

    def get(self, key: bytes) -> bytes | None:
        if key in self.pending:
            return self.pending[key]
        cache = self._read_cache
        if key in cache:
            # a SQLite query per key was most of a stateful row's time (docs/design.md, "Store reads, and
            # SQLite rather than RocksDB")
            return cache[key]
        try:
            row = self._db.execute("SELECT v FROM kv WHERE k = ?", (key,)).fetchone()
        except sqlite3.DatabaseError as exc:
            self._unclean_if_damaged(exc)
            raise
        value = row[0] if row else None
        self._remember({key: value})
        return value

    def _remember(self, values: dict[bytes, bytes | None]) -> None:
        if len(self._read_cache) + len(values) > _READ_CACHE_MAX_KEYS:
            self._read_cache.clear()  # rare (a task touching more keys): simpler than an LRU
        self._read_cache.update(values)

    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        """get() for each key, reading the store in as few SQLite queries as its variable limit allows."""
        cache, pending = self._read_cache, self.pending
        found = {k: cache[k] for k in dict.fromkeys(keys) if k not in pending and k in cache}
        wanted = [k for k in dict.fromkeys(keys) if k not in pending and k not in found]
        step = self._max_variables
        for i in range(0, len(wanted), step):
            part = wanted[i : i + step]
            marks = ",".join("?" * len(part))
            read = dict.fromkeys(part)
            try:
                read.update(self._db.execute(f"SELECT k, v FROM kv WHERE k IN ({marks})", part).fetchall())
            except sqlite3.DatabaseError as exc:
                self._unclean_if_damaged(exc)
                raise
            found.update(read)
        self._remember({k: found[k] for k in wanted})
        return [pending[k] if k in pending else found[k] for k in keys]

    def put(self, key: bytes, value: bytes | None) -> None:
        self.put_many([(key, value)])

    def put_many(self, writes: list[tuple[bytes, bytes | None]]) -> None:
        offset = self.input_offset
        for key, value in writes:
            self.pending[key] = value
            self.pending_offsets[key] = offset
        if not self.transactional and writes:
            if self._checkpointed:
                self.delete_checkpoint()  # the store is about to hold writes not yet committed
            self._apply(writes)

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        pending = dict(self.pending)
        for key, value in self._db.execute("SELECT k, v FROM kv ORDER BY k"):
            if key in pending:
                value = pending.pop(key)
                if value is None:
                    continue
            yield key, value
        for key, value in sorted(pending.items()):
            if value is not None:
                yield key, value

    def keys(self) -> Iterator[bytes]:
        return (k for k, _ in self.items())

    def changes(self) -> Iterator[tuple[bytes, bytes | None, int]]:
        """The open transaction's writes, one per key, with the input offset that made each."""
        for key, value in self.pending.items():
            yield key, value, self.pending_offsets[key]

    # -- commit, abort, restore -----------------------------------------------------------------------

    def _apply(
        self, writes: Iterable[tuple[bytes, bytes | None]], changelog_offset: int | None = None
    ) -> None:
        db = self._db
        last = dict(writes)  # the last write of each key is the one that counts
        # In key order: each write then lands next to the one before in the table's B-tree (a restore
        # of keys in random order, make bench: ~65,000 -> ~85,000 records/s; docs/design.md, "Restore").
        ordered = sorted(last.items())
        db.execute("BEGIN")
        try:
            db.executemany("DELETE FROM kv WHERE k = ?", ((k,) for k, v in ordered if v is None))
            db.executemany(
                "INSERT OR REPLACE INTO kv VALUES (?, ?)", ((k, v) for k, v in ordered if v is not None)
            )
            if changelog_offset is not None:
                db.execute(_names.WRITE_LOCAL_OFFSET, (changelog_offset,))
            db.execute("COMMIT")
        except BaseException as exc:
            if isinstance(exc, sqlite3.DatabaseError):
                self._unclean_if_damaged(exc)
            db.execute("ROLLBACK")
            raise

    def commit(self, changelog_offset: int) -> None:
        """After the Kafka transaction committed: apply the writes (transactional mode) together with
        the changelog offset they reach, then write the checkpoint file."""
        self._apply(self.pending.items() if self.transactional else (), changelog_offset)
        self._remember(self.pending)
        self.pending.clear()
        self.pending_offsets.clear()
        self.write_checkpoint(changelog_offset)

    def rollback(self) -> None:
        """Drop the open transaction's writes (they never reached the store in transactional mode)."""
        self.pending.clear()
        self.pending_offsets.clear()

    def apply_restored(self, writes: list[tuple[bytes, bytes | None]], changelog_offset: int) -> None:
        self._read_cache.clear()
        self._apply(writes, changelog_offset)

    @contextlib.contextmanager
    def restoring(self) -> Iterator[None]:
        """Around a restore: SQLite copies its write-ahead log into the database every
        `_RESTORE_CHECKPOINT_PAGES` pages, then as often as before (the next commit after the restore
        copies the rest)."""
        (before,) = self._db.execute("PRAGMA wal_autocheckpoint").fetchone()
        self._db.execute(f"PRAGMA wal_autocheckpoint={_RESTORE_CHECKPOINT_PAGES}")
        try:
            yield
        finally:
            if self._db is not None:
                self._db.execute(f"PRAGMA wal_autocheckpoint={before}")

    def wipe(self) -> None:
        """Delete the local store and its checkpoint (the lock stays held)."""
        self.rollback()
        self._read_cache.clear()
        self.delete_checkpoint()
        if self._db is not None:
            self._db.close()
            self._db = None
        for suffix in _names.WIPED_SUFFIXES:
            _names.store_file(self.directory, self.name, suffix).unlink(missing_ok=True)
        self._connect()

    # -- checkpoint file ------------------------------------------------------------------------------

    def read_checkpoint(self) -> _names.StoreCheckpoint | None:
        checkpoint = _names.read_checkpoint(self.checkpoint_path)
        if checkpoint is None:
            return None
        self._checkpointed = True
        return checkpoint

    def write_checkpoint(self, changelog_offset: int, skip_from: int | None = None) -> None:
        """The store is clean: it reflects its changelog (`changelog_id`) up to `changelog_offset`, now.
        `skip_from`: written as a restore begins (at_least_once), which applies no record of input at or
        past it, so that a restore resumed with another one starts over instead."""
        checkpoint = _names.StoreCheckpoint(changelog_offset, self.changelog_id, time.time(), skip_from)
        _names.write_checkpoint(self.checkpoint_path, checkpoint)
        self._checkpointed = True

    def delete_checkpoint(self) -> None:
        self.checkpoint_path.unlink(missing_ok=True)
        self._checkpointed = False

    def local_offset(self) -> int | None:
        try:
            return _names.local_offset(self._db)
        except sqlite3.DatabaseError as exc:
            self._unclean_if_damaged(exc)
            raise


def _corrupt(exc: sqlite3.DatabaseError) -> bool:
    """A damaged database file ("file is not a database", "database disk image is malformed"): SQLite
    raises DatabaseError itself for those, its subclasses for a lock, a constraint, a bad statement."""
    return type(exc) is sqlite3.DatabaseError
