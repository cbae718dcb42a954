"""The ledger of `format("eos")`: per micro-batch, which input partitions committed which offsets under
which transactional id, kept beside the Spark checkpoint (`<checkpointLocation>/eos-ledger/`).

Written by the data source's `commit(messages, batch_id)` on the driver, once every task of the batch
has succeeded: one JSON file per batch, `<batch_id>.json`, holding a list of attempts. A batch that
Spark runs again (after a driver crash) appends an attempt; its partitions show what the re-run found
committed and skipped. Files are written whole and moved into place, through `pyarrow.fs`, so the
location may be any URI pyarrow writes (a local path, `file://`, `s3://`, `gs://`, `hdfs://`).
The ledger keeps the last `retain` batches: writing batch N deletes batch N - retain.

Read by `eos ledger show` (`read_batches`).
"""

from __future__ import annotations

import datetime
import json
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eos._fs import filesystem, is_uri, private_directory, write_whole

LEDGER_DIR = "eos-ledger"
#: Batches a ledger keeps by default (Spark keeps 100 batches of its own checkpoint metadata).
RETAIN = 10_000


def location_of(checkpoint_location: str) -> str:
    """The ledger directory of a Spark checkpoint location."""
    return checkpoint_location.rstrip("/") + "/" + LEDGER_DIR


def _read(files, path: str) -> dict[str, Any] | None:
    from pyarrow import fs

    if files.get_file_info(path).type != fs.FileType.File:
        return None
    with files.open_input_stream(path) as f:
        return json.loads(f.read().decode())


def append(location: str, batch_id: int, attempt: dict[str, Any], retain: int = RETAIN) -> None:
    """Add `attempt` to batch `batch_id`'s file, and drop the file `retain` batches older."""
    files, root = filesystem(location)
    files.create_dir(root, recursive=True)
    path = f"{root}/{batch_id}.json"
    entry = _read(files, path) or {"batch_id": batch_id, "attempts": []}
    entry["attempts"].append(attempt)
    write_whole(files, path, lambda out: out.write(json.dumps(entry, sort_keys=True).encode()))
    old = f"{root}/{batch_id - retain}.json"
    if batch_id >= retain:
        try:
            files.delete_file(old)
        except (FileNotFoundError, OSError):
            pass


def record(
    location: str | None,
    retain: int,
    batch_id: int,
    config: Any,
    outcome: str,
    query: str | None,
    partitions: list[dict[str, Any]],
    tasks_failed: int | None,
    data_path: str,
) -> None:
    """Append an attempt at batch `batch_id` (its per-partition figures, each with its `task`) to the
    ledger at `location`, and tell `eos.MetricsListener` where it is; `location` None: the query keeps
    no ledger, which the listener is told instead."""
    if location is None:
        if query:
            announce(query, "")  # the listener says why it shows nothing of this query
        return
    attempt = {
        "outcome": outcome,
        "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds"),
        "app_id": config.app_id,
        "guarantee": config.processing_guarantee,
        "driver_pid": os.getpid(),
        "query": query,
        "tasks_failed": tasks_failed,
        "data_path": data_path,
        "partitions": sorted(partitions, key=lambda p: (p["topic"], p["partition"], p["task"] or 0)),
    }
    append(location, batch_id, attempt, retain)
    if query:
        announce(query, location)


def batch_ids(location: str) -> list[int]:
    """The batches a ledger holds, in order."""
    from pyarrow import fs

    files, root = filesystem(location)
    if files.get_file_info(root).type != fs.FileType.Directory:
        raise FileNotFoundError(f"no eos ledger at {location}")
    ids = []
    for info in files.get_file_info(fs.FileSelector(root)):
        stem, dot, suffix = info.base_name.partition(".")
        if dot and suffix == "json" and stem.isdigit():
            ids.append(int(stem))
    return sorted(ids)


def read_batches(location: str, ids: list[int]) -> Iterator[dict[str, Any]]:
    """The ledger entries of `ids`, one at a time (a ledger may hold thousands)."""
    files, root = filesystem(location)
    for batch_id in ids:
        entry = _read(files, f"{root}/{batch_id}.json")
        if entry is not None:
            yield entry


def _pointer(query_id: str) -> Path | None:
    directory = private_directory("eos-queries")
    if directory is None or not re.fullmatch(r"[0-9A-Za-z-]{1,64}", query_id):
        return None
    return directory / query_id


def announce(query_id: str, location: str) -> None:
    """Tell `eos.MetricsListener` (on this host: the driver, or a Spark Connect client beside the
    server) where query `query_id`'s ledger is ("": it keeps none): the commit that writes it runs in a
    Python worker the listener cannot ask. A file per query, written when its content changes (the
    listener removes it when the query ends). Never fails: a pointer that cannot be written leaves the
    query without metrics, not without its batch."""
    if location and not is_uri(location):
        location = os.path.abspath(location)  # the listener's working directory may be another
    path = _pointer(query_id)
    if path is None:
        return
    try:
        try:
            if path.read_text() == location:
                return
        except FileNotFoundError:
            _sweep(path.parent)
        except (OSError, UnicodeDecodeError):
            pass
        temporary = path.with_name(f".{query_id}.{uuid.uuid4().hex}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(location)
        os.replace(temporary, path)
    except OSError:
        pass


def announced(query_id: str) -> str | None:
    """The ledger location of query `query_id`, where a commit of it on this host announced one ("":
    the query keeps no ledger)."""
    path = _pointer(query_id)
    if path is None:
        return None
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def forget(query_id: str) -> None:
    path = _pointer(query_id)
    if path is not None:
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass


#: a pointer no listener removed (no listener ran, or its process died) goes after this long; a query
#: still running writes its own again at its next commit
POINTER_AGE_S = 7 * 24 * 3600


def _sweep(directory: Path) -> None:
    """Remove the pointers older than POINTER_AGE_S (when a new one is written)."""
    import time

    cutoff = time.time() - POINTER_AGE_S
    for entry in directory.iterdir():
        try:
            if entry.stat().st_mtime < cutoff:
                entry.unlink()
        except OSError:
            pass


def read_batch(location: str, batch_id: int) -> dict[str, Any] | None:
    """The ledger entry of batch `batch_id`, or None where the ledger has none."""
    files, root = filesystem(location)
    return _read(files, f"{root}/{batch_id}.json")
