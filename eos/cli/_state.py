"""The local side of the `eos state` commands: the stores under <state_dir>/<app_id>/<topic>-<partition>/
(`eos._names` names the files), read without disturbing a running writer, and wiped only while nobody
holds a store's lock."""

from __future__ import annotations

import fcntl
import os
import sqlite3
from contextlib import ExitStack
from pathlib import Path

import attrs

from eos import _names
from eos.cli._base import EXIT_ERROR, EXIT_REFUSED, EXIT_UNKNOWN_APP, CliError


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


def read_database(path: Path) -> tuple[int | None, int | None]:
    """(number of keys, local changelog offset) of a store's SQLite file, opened read-only."""
    if not path.exists():
        return None, None
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return None, None
    try:
        return db.execute(_names.COUNT_KEYS).fetchone()[0], _names.local_offset(db)
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
    for topic, partition, directory in _names.partition_dirs(state_dir, app):
        for name in _names.store_names(directory):
            keys, local = read_database(_names.store_file(directory, name, _names.DATABASE))
            checkpoint = _names.read_checkpoint(_names.store_file(directory, name, _names.CHECKPOINT))
            out.append(
                StoreInfo(
                    topic=topic,
                    partition=partition,
                    store=name,
                    directory=directory,
                    keys=keys,
                    checkpoint=checkpoint.changelog_offset if checkpoint is not None else None,
                    local=local,
                    locked=is_locked(_names.store_file(directory, name, _names.LOCK)),
                )
            )
    return out


def wipe(state_dir: str | Path, app: str, topic: str, partition: int, store: str | None) -> list[str]:
    """Delete the checkpoint file and the SQLite files of the store (all stores of the partition if
    `store` is None), holding each store's lock meanwhile; the next run finds no checkpoint, so it
    restores the store from its changelog. Returns the wiped stores' names."""
    root = _names.app_dir(state_dir, app)
    if not root.is_dir():
        raise CliError(EXIT_UNKNOWN_APP, f"unknown app {app!r}: no state under {root}")
    directory = _names.partition_dir(state_dir, app, topic, partition)
    names = _names.store_names(directory) if directory.is_dir() else []
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
            fd = os.open(_names.store_file(directory, name, _names.LOCK), os.O_CREAT | os.O_RDWR, 0o644)
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
            for suffix in _names.WIPED_SUFFIXES:  # the checkpoint first: the store is unclean from then on
                _names.store_file(directory, name, suffix).unlink(missing_ok=True)
    return names
