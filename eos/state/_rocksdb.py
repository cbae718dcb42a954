"""A store's data in RocksDB (rocksdict): `state_store="rocksdb"`, the `rocksdb` extra.

Keys and values as raw bytes in the default column family; the changelog offset under one key of a
column family of its own (`eos`), so that no key of the user's can meet it. A commit is one
WriteBatch, atomic across both. Its commits are ~5x SQLite's speed, its open and close at every task
~7 ms against SQLite's <1 ms (docs/design.md, "Store reads, and the store's backend").
"""

from __future__ import annotations

import contextlib
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

from rocksdict import AccessType, Checkpoint, Options, Rdict, WriteBatch

from eos import _names
from eos.state._store import PartitionStore

_META = "eos"
_LOCAL_OFFSET = b"changelog_offset"
#: what RocksDB's Status says of damaged files ("Corruption: ..."); a missing file of a database that
#: exists is damage too ("IO error: No such file or directory ... .sst")
_DAMAGE = ("Corruption:", "No such file or directory")


def _options(create: bool) -> Options:
    options = Options(raw_mode=True)
    options.create_if_missing(create)
    options.create_missing_column_families(create)
    # A store is opened by every task: RocksDB's own info log would keep an old file per open (1,000 by
    # default) and read statistics from every table file at each open.
    options.set_keep_log_file_num(1)
    options.set_max_log_file_size(1 << 20)
    options.set_skip_stats_update_on_db_open(True)
    options.set_stats_dump_period_sec(0)
    return options


class RocksStore(PartitionStore):
    kind = "rocksdb"

    def __init__(self, directory: Path, name: str, transactional: bool) -> None:
        super().__init__(directory, name, transactional)
        self.db_path = _names.store_file(directory, name, _names.ROCKSDB)
        self._db: Rdict | None = None
        self._meta: Rdict | None = None
        self._meta_handle = None

    def _connect(self) -> None:
        db = Rdict(str(self.db_path), _options(True), column_families={_META: Options(raw_mode=True)})
        self._db = db
        self._meta = db.get_column_family(_META)
        self._meta_handle = db.get_column_family_handle(_META)

    def _disconnect(self) -> None:
        # Every handle on the database goes, or RocksDB keeps its own lock on the directory.
        if self._meta is not None:
            self._meta.close()
        self._meta = self._meta_handle = None
        if self._db is not None:
            self._db.close()
            self._db = None

    def _read(self, key: bytes) -> bytes | None:
        return self._db.get(key)

    def _read_many(self, keys: list[bytes]) -> dict[bytes, bytes | None]:
        return dict(zip(keys, self._db.get(keys), strict=True))

    def _write(self, ordered: list[tuple[bytes, bytes | None]], changelog_offset: int | None) -> None:
        batch = WriteBatch(raw_mode=True)
        for key, value in ordered:
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        if changelog_offset is not None:
            batch.put(_LOCAL_OFFSET, str(changelog_offset).encode(), self._meta_handle)
        self._db.write(batch)

    def _scan(self) -> Iterator[tuple[bytes, bytes]]:
        return self._db.items()

    def _read_local_offset(self) -> int | None:
        value = self._meta.get(_LOCAL_OFFSET)
        return None if value is None else int(value)

    def _export(self, target: Path) -> None:
        """A RocksDB checkpoint (hard links of its table files, a copy of the rest), as one tar file."""
        with tempfile.TemporaryDirectory(dir=self.directory) as work:
            checkpoint = Path(work) / "checkpoint"
            Checkpoint(self._db).create_checkpoint(str(checkpoint))
            with tarfile.open(target, "w") as tar:
                tar.add(checkpoint, arcname=".")

    def _import(self, source: Path) -> None:
        self.db_path.mkdir(parents=True)
        with tarfile.open(source) as tar:
            try:
                tar.extractall(self.db_path, filter="data")
            except TypeError:  # a Python before tarfile's extraction filters (3.10.11 and older)
                tar.extractall(self.db_path)  # noqa: S202 - a snapshot eos wrote and checksummed

    def _damaged(self, exc: Exception) -> bool:
        # rocksdict raises a plain Exception carrying RocksDB's Status text
        return type(exc) is Exception and any(mark in str(exc) for mark in _DAMAGE)

    @classmethod
    @contextlib.contextmanager
    def peek(cls, directory: Path, name: str) -> Iterator[tuple[Iterator[tuple[bytes, bytes]], int | None]]:
        path = _names.store_file(directory, name, _names.ROCKSDB)
        if not path.is_dir():
            raise FileNotFoundError(path)
        db = Rdict(
            str(path),
            _options(False),
            access_type=AccessType.read_only(),
            column_families={_META: Options(raw_mode=True)},
        )
        meta = db.get_column_family(_META)
        try:
            value = meta.get(_LOCAL_OFFSET)
            yield db.items(), (None if value is None else int(value))
        finally:
            meta.close()
            db.close()
