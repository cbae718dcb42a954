"""The local side of the `eos state` commands: the stores under <state_dir>/<app_id>/<topic>-<partition>/
(see eos._store for the files: <store>.sqlite, <store>.checkpoint, <store>.lock), read without
disturbing a running writer, and wiped only while nobody holds a store's lock."""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
from contextlib import ExitStack
from pathlib import Path

import attrs

from eos._cli_base import EXIT_ERROR, EXIT_REFUSED, EXIT_UNKNOWN_APP, CliError

_SUFFIXES = (".sqlite", ".checkpoint", ".lock")


@attrs.frozen
class StoreInfo:
    topic: str
    partition: int
    store: str
    directory: Path
    keys: int | None  # None: the database is missing or unreadable
    checkpoint: int | None  # None: no checkpoint file (unclean: the next run restores from the changelog)
    local: int | None  # changelog offset the local database reflects (its meta table)
    locked: bool  # a process holds the store's lock: a task of the query is running on this host


def app_dir(state_dir: str | Path, app: str) -> Path:
    return Path(state_dir) / app


def partition_dirs(state_dir: str | Path, app: str) -> list[tuple[str, int, Path]]:
    """(topic, partition, directory) of every <topic>-<partition> directory of the app."""
    root = app_dir(state_dir, app)
    if not root.is_dir():
        return []
    out = []
    for entry in root.iterdir():
        topic, _, partition = entry.name.rpartition("-")
        if entry.is_dir() and topic and partition.isdigit():
            out.append((topic, int(partition), entry))
    return sorted(out)


def store_names(directory: Path) -> list[str]:
    names = set()
    for entry in directory.iterdir():
        for suffix in _SUFFIXES:
            if entry.name.endswith(suffix) and len(entry.name) > len(suffix):
                names.add(entry.name[: -len(suffix)])
    return sorted(names)


def read_checkpoint(path: Path) -> int | None:
    """As eos._store reads it: a file that is missing or unreadable is no checkpoint."""
    try:
        return int(json.loads(path.read_text())["changelog_offset"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_database(path: Path) -> tuple[int | None, int | None]:
    """(number of keys, local changelog offset) of a store's SQLite file, opened read-only."""
    if not path.exists():
        return None, None
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return None, None
    try:
        keys = db.execute("SELECT count(*) FROM kv").fetchone()[0]
        row = db.execute("SELECT value FROM meta WHERE name = 'changelog_offset'").fetchone()
        return keys, (row[0] if row else None)
    except sqlite3.Error:
        return None, None
    finally:
        db.close()


def is_locked(lock_path: Path) -> bool:
    """Whether a process holds the store's lock (a shared probe: it never blocks a writer for long)."""
    try:
        fd = os.open(lock_path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def scan(state_dir: str | Path, app: str) -> list[StoreInfo]:
    out = []
    for topic, partition, directory in partition_dirs(state_dir, app):
        for name in store_names(directory):
            keys, local = read_database(directory / f"{name}.sqlite")
            out.append(
                StoreInfo(
                    topic=topic,
                    partition=partition,
                    store=name,
                    directory=directory,
                    keys=keys,
                    checkpoint=read_checkpoint(directory / f"{name}.checkpoint"),
                    local=local,
                    locked=is_locked(directory / f"{name}.lock"),
                )
            )
    return out


def wipe(state_dir: str | Path, app: str, topic: str, partition: int, store: str | None) -> list[str]:
    """Delete the checkpoint file and the SQLite files of the store (all stores of the partition if
    `store` is None), holding each store's lock meanwhile; the next run finds no checkpoint, so it
    restores the store from its changelog. Returns the wiped stores' names."""
    if not app_dir(state_dir, app).is_dir():
        raise CliError(EXIT_UNKNOWN_APP, f"unknown app {app!r}: no state under {app_dir(state_dir, app)}")
    directory = app_dir(state_dir, app) / f"{topic}-{partition}"
    names = store_names(directory) if directory.is_dir() else []
    if not names:
        raise CliError(EXIT_ERROR, f"no state for {topic}/{partition} of app {app!r} under {directory}")
    if store is not None:
        if store not in names:
            raise CliError(
                EXIT_ERROR,
                f"no store {store!r} for {topic}/{partition} under {directory} (stores: {', '.join(names)})",
            )
        names = [store]
    with ExitStack() as locks:
        for name in names:
            fd = os.open(directory / f"{name}.lock", os.O_CREAT | os.O_RDWR, 0o644)
            locks.callback(os.close, fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise CliError(
                    EXIT_REFUSED,
                    f"store {name!r} of {topic}/{partition} is locked by a running process"
                    " (the query is running on this host): stop it first",
                ) from None
        for name in names:
            # The checkpoint first: from then on the store is unclean whatever happens next.
            for suffix in (".checkpoint", ".checkpoint.tmp", ".sqlite", ".sqlite-wal", ".sqlite-shm"):
                (directory / f"{name}{suffix}").unlink(missing_ok=True)
    return names
