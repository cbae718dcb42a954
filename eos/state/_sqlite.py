"""A store's data in a SQLite file (WAL mode): the default `state_store`.

A table of keys and values and a meta table holding the changelog offset, written in one SQLite
transaction; standard library only, and it opens in well under a millisecond, which every task does
(docs/design.md, "Store reads, and the store's backend").
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from eos import _names
from eos.state._store import PartitionStore

#: SQLite's automatic checkpoint while a store restores: every 10,000 pages of 4 KiB, not 1,000 (its
#: default): a write-ahead log of up to ~40 MiB; each copy into the database rewrites the pages it touched
_RESTORE_CHECKPOINT_PAGES = 10_000
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER)",
)
_READ_LOCAL_OFFSET = "SELECT value FROM meta WHERE name = 'changelog_offset'"
_WRITE_LOCAL_OFFSET = "INSERT OR REPLACE INTO meta VALUES ('changelog_offset', ?)"


class SqliteStore(PartitionStore):
    kind = "sqlite"

    def __init__(self, directory: Path, name: str, transactional: bool) -> None:
        super().__init__(directory, name, transactional)
        self.db_path = _names.store_file(directory, name, _names.SQLITE)
        self._db: sqlite3.Connection | None = None
        self._max_variables = 999

    def _connect(self) -> None:
        self._db = sqlite3.connect(self.db_path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        for statement in _SCHEMA:
            self._db.execute(statement)
        try:
            self._max_variables = self._db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        except AttributeError:  # Python < 3.11: SQLite's smallest default limit
            self._max_variables = 999

    def _disconnect(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _read(self, key: bytes) -> bytes | None:
        row = self._db.execute("SELECT v FROM kv WHERE k = ?", (key,)).fetchone()
        return row[0] if row else None

    def _read_many(self, keys: list[bytes]) -> dict[bytes, bytes | None]:
        """In as few queries as SQLite's variable limit allows."""
        read: dict[bytes, bytes | None] = dict.fromkeys(keys)
        step = self._max_variables
        for i in range(0, len(keys), step):
            part = keys[i : i + step]
            marks = ",".join("?" * len(part))
            read.update(self._db.execute(f"SELECT k, v FROM kv WHERE k IN ({marks})", part).fetchall())
        return read

    def _write(self, ordered: list[tuple[bytes, bytes | None]], changelog_offset: int | None) -> None:
        db = self._db
        db.execute("BEGIN")
        try:
            db.executemany("DELETE FROM kv WHERE k = ?", ((k,) for k, v in ordered if v is None))
            db.executemany(
                "INSERT OR REPLACE INTO kv VALUES (?, ?)", ((k, v) for k, v in ordered if v is not None)
            )
            if changelog_offset is not None:
                db.execute(_WRITE_LOCAL_OFFSET, (changelog_offset,))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _scan(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(self._db.execute("SELECT k, v FROM kv ORDER BY k"))

    def _read_local_offset(self) -> int | None:
        row = self._db.execute(_READ_LOCAL_OFFSET).fetchone()
        return row[0] if row else None

    def _export(self, target: Path) -> None:
        copy = sqlite3.connect(target)
        try:
            self._db.backup(copy)  # SQLite's online backup: a consistent copy, the WAL's pages included
        finally:
            copy.close()

    def _import(self, source: Path) -> None:
        shutil.copyfile(source, self.db_path)

    def _damaged(self, exc: Exception) -> bool:
        # A damaged file ("file is not a database", "database disk image is malformed"): SQLite raises
        # DatabaseError itself for those, its subclasses for a lock, a constraint, a bad statement.
        return type(exc) is sqlite3.DatabaseError

    @contextlib.contextmanager
    def restoring(self) -> Iterator[None]:
        """SQLite copies its write-ahead log into the database every `_RESTORE_CHECKPOINT_PAGES` pages,
        then as often as before (the next commit after the restore copies the rest)."""
        (before,) = self._db.execute("PRAGMA wal_autocheckpoint").fetchone()
        self._db.execute(f"PRAGMA wal_autocheckpoint={_RESTORE_CHECKPOINT_PAGES}")
        try:
            yield
        finally:
            if self._db is not None:
                self._db.execute(f"PRAGMA wal_autocheckpoint={before}")

    @classmethod
    @contextlib.contextmanager
    def peek(cls, directory: Path, name: str) -> Iterator[tuple[Iterator[tuple[bytes, bytes]], int | None]]:
        path = _names.store_file(directory, name, _names.SQLITE)
        if not path.exists():
            raise FileNotFoundError(path)
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            row = db.execute(_READ_LOCAL_OFFSET).fetchone()
            yield iter(db.execute("SELECT k, v FROM kv ORDER BY k")), (row[0] if row else None)
        finally:
            db.close()
