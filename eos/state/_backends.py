"""The store backends by their `Config.state_store` name, and a read of whichever one holds a store's
data (for `eos state show`, which is not told the query's config). RocksDB is an extra
(`eos-spark[rocksdb]`): its module is imported only when a store uses it."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

from eos.state._store import PartitionStore

#: name -> (module, class)
_BACKENDS = {"sqlite": ("eos.state._sqlite", "SqliteStore"), "rocksdb": ("eos.state._rocksdb", "RocksStore")}
KINDS = tuple(_BACKENDS)


def backend(kind: str) -> type[PartitionStore]:
    module, name = _BACKENDS[kind]
    return getattr(importlib.import_module(module), name)


def available() -> list[str]:
    """The backends this Python can open (rocksdict may be missing)."""
    return [kind for kind in KINDS if kind != "rocksdb" or importlib.util.find_spec("rocksdict") is not None]


def peek(directory: Path, name: str) -> tuple[str, int, int | None] | None:
    """(backend, number of keys, changelog offset) of a store's data, read-only beside a running
    writer; None when no backend has data for it or it cannot be read. Counts by streaming the keys."""
    for kind in available():
        try:
            with backend(kind).peek(directory, name) as (items, local):
                return kind, sum(1 for _ in items), local
        except FileNotFoundError:
            continue
        except Exception:  # damaged or half-written: shown as unreadable
            return None
    return None
