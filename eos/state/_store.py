"""The local embedded store of one named store for one input topic-partition, whatever holds its
data: a lock, a checkpoint file, the open transaction's writes, the values this task has read; and
what a commit, an abort, a restore and a wipe do to them. Where the data lives is a backend's
(`_rocksdb.py`, `_sqlite.py`): one atomic write of a batch of keys together with the changelog offset
it reaches, point reads, an ordered scan.

Two modes (`Config.state_mode`):
- "transactional" (KIP-892): writes stay in memory until the Kafka transaction commits, then are
  applied in one atomic write with the changelog offset. An abort just drops them.
- "wipe" (KIP-129): writes go to the store as they happen; the first write after a commit removes the
  checkpoint file, so an abort or crash with uncommitted writes leaves the store unclean and it is
  wiped and restored.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import ClassVar

from eos import _names
from eos.errors import StoreLockedError

_READ_CACHE_MAX_KEYS = 200_000


class PartitionStore:
    """One store of one input partition for the length of a task; a backend subclass holds its data."""

    #: `Config.state_store`'s name for the backend
    kind: ClassVar[str] = ""

    def __init__(self, directory: Path, name: str, transactional: bool) -> None:
        self.directory = directory
        self.name = name
        self.transactional = transactional
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
        #: why the data was found damaged and deleted when the store opened (None: it was not)
        self.corruption: str | None = None

    # -- what a backend provides ------------------------------------------------------------------------

    def _connect(self) -> None:
        raise NotImplementedError

    def _disconnect(self) -> None:
        raise NotImplementedError

    def _read(self, key: bytes) -> bytes | None:
        raise NotImplementedError

    def _read_many(self, keys: list[bytes]) -> dict[bytes, bytes | None]:
        raise NotImplementedError

    def _write(self, ordered: list[tuple[bytes, bytes | None]], changelog_offset: int | None) -> None:
        """Apply the writes (None deletes) and, when given, the changelog offset, all or nothing."""
        raise NotImplementedError

    def _scan(self) -> Iterator[tuple[bytes, bytes]]:
        """Every key and value in key order."""
        raise NotImplementedError

    def _read_local_offset(self) -> int | None:
        raise NotImplementedError

    def _export(self, target: Path) -> None:
        """Write a consistent copy of the committed data (its changelog offset included) into the one
        file `target` (a snapshot, `eos.state._snapshot`)."""
        raise NotImplementedError

    def _import(self, source: Path) -> None:
        """Put the data of a file `_export` wrote where the store's data lives (the store closed)."""
        raise NotImplementedError

    def _damaged(self, exc: Exception) -> bool:
        """Whether `exc` says the data on disk is damaged (not a lock, a full disk, a bug)."""
        raise NotImplementedError

    @classmethod
    @contextlib.contextmanager
    def peek(cls, directory: Path, name: str) -> Iterator[tuple[Iterator[tuple[bytes, bytes]], int | None]]:
        """Read-only, beside a running writer: (the keys and values, the changelog offset); raises
        FileNotFoundError when the store has no data of this backend."""
        raise NotImplementedError
        yield  # pragma: no cover

    # -- life cycle -----------------------------------------------------------------------------------

    def open(self, lock_timeout_s: float) -> None:
        """Take the store's lock (one writer per store on a host), then open the data."""
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
            self.local_offset()  # reads the data: damage says so now, not in the middle of a task
        except Exception as exc:
            if not self._damaged(exc):
                raise
            # The changelog is the store's truth: damaged data is deleted, and recovery restores it.
            self.corruption = f"{type(exc).__name__}: {exc}"
            self.wipe()

    def close(self) -> None:
        self._disconnect()
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    # -- reads and writes while processing ------------------------------------------------------------

    def _unclean_if_damaged(self, exc: Exception) -> None:
        """Damaged data found while a task reads or writes the store: without its checkpoint, the next
        attempt wipes it and restores the changelog (instead of failing on it again)."""
        if self._damaged(exc):
            self.delete_checkpoint()

    def get(self, key: bytes) -> bytes | None:
        if key in self.pending:
            return self.pending[key]
        cache = self._read_cache
        if key in cache:
            # a read of the store per key was most of a stateful row's time (docs/design.md, "Store
            # reads, and the store's backend")
            return cache[key]
        try:
            value = self._read(key)
        except Exception as exc:
            self._unclean_if_damaged(exc)
            raise
        self._remember({key: value})
        return value

    def _remember(self, values: dict[bytes, bytes | None]) -> None:
        if len(self._read_cache) + len(values) > _READ_CACHE_MAX_KEYS:
            self._read_cache.clear()  # rare (a task touching more keys): simpler than an LRU
        self._read_cache.update(values)

    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        """get() for each key, the ones neither written nor cached read from the store together."""
        cache, pending = self._read_cache, self.pending
        unique = dict.fromkeys(keys)
        found = {k: cache[k] for k in unique if k not in pending and k in cache}
        wanted = [k for k in unique if k not in pending and k not in found]
        if wanted:
            try:
                read = self._read_many(wanted)
            except Exception as exc:
                self._unclean_if_damaged(exc)
                raise
            found.update(read)
            self._remember(read)
        return [pending[k] if k in pending else found[k] for k in keys]

    def put(self, key: bytes, value: bytes | None) -> None:
        if self.transactional:  # the per-row path of `process`: no list, no loop
            self.pending[key] = value
            self.pending_offsets[key] = self.input_offset
        else:
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
        for key, value in self._scan():
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
        # The last write of each key is the one that counts; in key order, each write lands next to the
        # one before (a restore of keys in random order, make bench: ~65,000 -> ~85,000 records/s with
        # SQLite; docs/design.md, "Restore").
        ordered = sorted(dict(writes).items())
        try:
            self._write(ordered, changelog_offset)
        except Exception as exc:
            self._unclean_if_damaged(exc)
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
        """Around a restore: what a backend does differently while it takes many writes."""
        yield

    def wipe(self) -> None:
        """Delete the local store and its checkpoint (the lock stays held), then open it empty."""
        self.rollback()
        self._read_cache.clear()
        self.delete_checkpoint()
        self._disconnect()
        _names.remove_store_data(self.directory, self.name)
        self._connect()

    def export_to(self, target: Path) -> None:
        """A snapshot of the committed data into file `target` (the open transaction's writes are not
        in it: transactional stores hold them apart, and wipe-mode ones are snapshotted between
        transactions only)."""
        self._export(target)

    def replace_with(self, source: Path) -> None:
        """Wipe the store and put a snapshot's data (a file `export_to` wrote) in its place; the
        checkpoint stays deleted until recovery has rolled it forward."""
        self.wipe()
        self._disconnect()
        _names.remove_store_data(self.directory, self.name)
        self._import(source)
        self._connect()
        self.local_offset()  # a snapshot that does not open fails here, before anything reads it

    # -- checkpoint file ------------------------------------------------------------------------------

    def read_checkpoint(self) -> _names.StoreCheckpoint | None:
        checkpoint = _names.read_checkpoint(self.checkpoint_path)
        if checkpoint is None:
            return None
        self._checkpointed = True
        return checkpoint

    def write_checkpoint(self, changelog_offset: int, skip_from: int | None = None) -> None:
        """The store is clean: it reflects its changelog (`changelog_id`) up to `changelog_offset`, now.
        `skip_from`: written as a restore begins, which applies no record of input at or
        past it, so that a restore resumed with another one starts over instead."""
        checkpoint = _names.StoreCheckpoint(changelog_offset, self.changelog_id, time.time(), skip_from)
        _names.write_checkpoint(self.checkpoint_path, checkpoint)
        self._checkpointed = True

    def delete_checkpoint(self) -> None:
        self.checkpoint_path.unlink(missing_ok=True)
        self._checkpointed = False

    def local_offset(self) -> int | None:
        """The changelog offset the data reflects (None: a store never written)."""
        try:
            return self._read_local_offset()
        except Exception as exc:
            self._unclean_if_damaged(exc)
            raise
