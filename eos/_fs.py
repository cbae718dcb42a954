"""Files eos keeps outside its stores: a location as a pyarrow filesystem (the ledger, the snapshots),
a file written whole there, and the host directories only this user may use (a stamp or a pointer
found there is trusted)."""

from __future__ import annotations

import os
import re
import stat
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: a URI's scheme (two characters or more, so that a Windows drive letter is not one)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")


def is_uri(location: str) -> bool:
    """Whether `location` is a URI (`s3://b/p`, or Hadoop's `file:/p` form, which Spark hands out for a
    checkpoint) rather than a local path."""
    return _SCHEME.match(location) is not None


def filesystem(location: str) -> tuple[Any, str]:
    """`location` (a local path, or any URI pyarrow.fs reads: `file:`, `s3://`, `gs://`, `hdfs://`, ...)
    as (pyarrow filesystem, path in it); a local path made absolute first."""
    from pyarrow import fs

    if not is_uri(location):
        location = os.path.abspath(location)
    return fs.FileSystem.from_uri(location)


def write_whole(files, path: str, write: Callable[[Any], None]) -> None:
    """`write(stream)` into a temporary file beside `path` in pyarrow filesystem `files`, then moved
    over `path`: a reader sees the old file or the new one, never a part."""
    temporary = f"{path.rsplit('/', 1)[0]}/.{uuid.uuid4().hex}.tmp"
    with files.open_output_stream(temporary) as out:
        write(out)
    files.move(temporary, path)


def private_directory(name: str) -> Path | None:
    """`<tmp>/<name>-<uid>`, created for this user alone; None where it exists and is not a directory
    of this user's that no one else can read or write."""
    directory = Path(tempfile.gettempdir()) / f"{name}-{os.getuid()}"
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
        info = directory.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None
    return directory
