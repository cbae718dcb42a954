"""Snapshots of a store in durable storage (`Config.state_snapshot_location`), so that a store that is
lost, stale or moved is restored from its newest snapshot and the changelog's tail, not the whole
changelog. The changelog stays the truth: a snapshot only says "the store's data at changelog offset N".

Layout, under any URI `pyarrow.fs` writes:

    <location>/<app_id>/<input topic>-<partition>/<store>/<changelog offset, 20 digits>.snapshot
                                                          /<changelog offset, 20 digits>.json

The data file is the backend's own (`PartitionStore.export_to`: a SQLite database, a tar of a RocksDB
checkpoint), written first and moved into place; the manifest, written after it the same way, is what
makes a snapshot exist. It names the changelog topic and its topic id, the offset, the committed input
offset when it was taken, the backend, the time, and the data's size and SHA-256. Writing one deletes
the oldest beyond `state_snapshot_keep`.

Whether a snapshot may be used is decided with the store's other recovery decisions
(`eos.state._recovery`, 4a); here its data is taken, put in place and marked.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from eos import _crash, _names
from eos._fs import filesystem, write_whole
from eos.config import Config
from eos.state._store import PartitionStore

SUFFIX = ".snapshot"
MANIFEST = ".json"
_CHUNK = 1 << 20


@attrs.frozen
class Snapshot:
    """One snapshot's manifest."""

    #: the changelog offset the data reflects (the next record to apply)
    offset: int
    changelog: str
    changelog_id: str
    #: the input offset committed when it was taken (None: none was)
    input_offset: int | None
    backend: str
    #: seconds since the epoch
    taken_at: float
    size: int
    sha256: str
    #: the manifest's path in its filesystem (not part of the manifest)
    path: str = attrs.field(default="", eq=False)

    @property
    def data_path(self) -> str:
        return self.path[: -len(MANIFEST)] + SUFFIX

    def as_dict(self) -> dict[str, Any]:
        return attrs.asdict(self, filter=lambda a, _: a.name != "path")


def store_location(config: Config, topic: str, partition: int, store: str) -> str | None:
    """Where the snapshots of one store go (None: snapshots are off)."""
    if not config.state_snapshot_location or not config.state_snapshot_interval_ms:
        return None
    return f"{config.state_snapshot_location.rstrip('/')}/{config.app_id}/{topic}-{partition}/{store}"


def app_snapshots(location: str, app_id: str) -> Iterator[tuple[str, int, str, Snapshot]]:
    """Every snapshot of app `app_id` under `location`: (input topic, partition, store, snapshot), by
    topic, partition and store, each store's newest first."""
    from pyarrow import fs

    files, root = filesystem(location)
    base = f"{root.rstrip('/')}/{app_id}"
    if files.get_file_info(base).type != fs.FileType.Directory:
        return
    for tp in sorted(files.get_file_info(fs.FileSelector(base)), key=lambda i: i.base_name):
        topic, dash, partition = tp.base_name.rpartition("-")
        if tp.type != fs.FileType.Directory or not dash or not partition.isdigit():
            continue
        for store in sorted(files.get_file_info(fs.FileSelector(tp.path)), key=lambda i: i.base_name):
            if store.type == fs.FileType.Directory:
                for snapshot in listed(f"{location.rstrip('/')}/{app_id}/{tp.base_name}/{store.base_name}"):
                    yield topic, int(partition), store.base_name, snapshot


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def upload(location: str, data: Path, snapshot: Snapshot, keep: int) -> Snapshot:
    """Store `data` and its manifest under `location`, then delete the snapshots beyond the newest
    `keep`; the snapshot with its path."""
    files, root = filesystem(location)
    files.create_dir(root, recursive=True)
    stem = f"{root}/{snapshot.offset:020d}"
    write_whole(files, stem + SUFFIX, _copy_from(data))
    write_whole(files, stem + MANIFEST, _text(snapshot))
    for old in listed(location)[keep:]:
        for path in (old.path, old.data_path):  # the manifest first: a snapshot without one is gone
            try:
                files.delete_file(path)
            except (FileNotFoundError, OSError):
                pass
    return attrs.evolve(snapshot, path=stem + MANIFEST)


def _copy_from(data: Path):
    def write(out) -> None:
        with open(data, "rb") as f:
            while chunk := f.read(_CHUNK):
                out.write(chunk)

    return write


def _text(snapshot: Snapshot):
    return lambda out: out.write(json.dumps(snapshot.as_dict(), sort_keys=True).encode())


def listed(location: str) -> list[Snapshot]:
    """The snapshots under `location`, newest (highest offset) first; a manifest that cannot be read
    is left out."""
    from pyarrow import fs

    files, root = filesystem(location)
    if files.get_file_info(root).type != fs.FileType.Directory:
        return []
    found = []
    for info in files.get_file_info(fs.FileSelector(root)):
        if not (info.base_name.endswith(MANIFEST) and info.base_name[: -len(MANIFEST)].isdigit()):
            continue
        try:
            with files.open_input_stream(info.path) as f:
                fields = json.loads(f.read().decode())
            found.append(Snapshot(**fields, path=info.path))
        except (OSError, ValueError, TypeError):
            continue
    return sorted(found, key=lambda s: s.offset, reverse=True)


def download(location: str, snapshot: Snapshot, target: Path) -> None:
    """The snapshot's data into file `target`, checked against its manifest's size and SHA-256
    (ValueError where it differs)."""
    files, _ = filesystem(location)
    digest = hashlib.sha256()
    size = 0
    with files.open_input_stream(snapshot.data_path) as f, open(target, "wb") as out:
        for chunk in _chunks(f):
            digest.update(chunk)
            size += len(chunk)
            out.write(chunk)
    if size != snapshot.size or digest.hexdigest() != snapshot.sha256:
        raise ValueError(
            f"{snapshot.data_path} holds {size} bytes of SHA-256 {digest.hexdigest()[:12]}..., its manifest"
            f" says {snapshot.size} bytes of {snapshot.sha256[:12]}..."
        )


def _chunks(stream) -> Iterator[bytes]:
    while chunk := stream.read(_CHUNK):
        yield chunk


def manifest_of(
    data: Path, offset: int, changelog: str, changelog_id: str, input_offset: int | None, backend: str
) -> Snapshot:
    return Snapshot(
        offset=offset,
        changelog=changelog,
        changelog_id=changelog_id,
        input_offset=input_offset,
        backend=backend,
        taken_at=time.time(),
        size=data.stat().st_size,
        sha256=_sha256(data),
    )


def install(location: str, snapshot: Snapshot, store: PartitionStore) -> None:
    """Put `snapshot`'s data in place of `store`'s (downloaded beside it first), checked to reflect the
    offset its manifest says. Raises whatever went wrong; the caller then wipes the store and reads the
    changelog instead, or marks the store as restored from it (`mark`)."""
    with tempfile.TemporaryDirectory(dir=store.directory) as work:
        data = Path(work) / "snapshot"
        download(location, snapshot, data)
        _crash.point("during_restore")  # F6 where a snapshot stands in for the changelog
        store.replace_with(data)
    reflects = store.local_offset()
    if reflects != snapshot.offset:
        raise ValueError(
            f"its data reflects changelog offset {reflects}, its manifest says {snapshot.offset}"
        )


def take(
    location: str,
    store: PartitionStore,
    offset: int,
    changelog: str,
    changelog_id: str,
    input_offset: int | None,
    keep: int,
) -> Snapshot:
    """A snapshot of `store` at changelog `offset` (of committed input `input_offset`) uploaded and the
    oldest beyond `keep` deleted; the caller marks the store as snapshotted at it (`mark`)."""
    with tempfile.TemporaryDirectory(dir=store.directory) as work:
        data = Path(work) / "snapshot"
        store.export_to(data)
        snapshot = manifest_of(data, offset, changelog, changelog_id, input_offset, store.kind)
        snapshot = upload(location, data, snapshot, keep)
    return snapshot


def read_mark(store: PartitionStore) -> tuple[int, float] | None:
    """The offset and time of the newest snapshot this store was taken to or restored from."""
    try:
        fields = json.loads(_names.store_file(store.directory, store.name, _names.SNAPSHOT_MARK).read_text())
        return int(fields["offset"]), float(fields["taken_at"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def mark(store: PartitionStore, offset: int, taken_at: float) -> None:
    path = _names.store_file(store.directory, store.name, _names.SNAPSHOT_MARK)
    path.write_text(json.dumps({"offset": offset, "taken_at": taken_at}))
