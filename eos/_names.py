"""Every name eos leaves behind, on the broker and on disk, in one place.

Runtime and `eos` CLI both read them from here, so an operator's tool never guesses what the sink
wrote. (The commit metadata stamped on offsets is `eos._kafka._offsets`'s: it is a format, not a name.)

On the broker, for an app id `app` and input topic-partition `t`/`p`:
    transactional.id    app:t:p                       one per input partition (exactly_once)
    consumer group      app                           the input offsets (never has members)
    consumer group      app-restore, app-watermarks   changelog readers (never commit)
    client.id           eos-app, eos-app-admin
    changelog topic     app-t-<store>-changelog       one partition per input partition

and for part `i` of a batch without Kafka input coordinates (input_mode "any"):
    transactional.id    app:#part:i                   one per part (exactly_once)
    progress topic      app-eos-parts                 holds no records: its partition i carries part
                                                      i's progress as a committed offset of group app

On disk, under `state_dir`:
    <state_dir>/<app>/<t>-<p>/<store>.rocksdb/                the local store (state_store "rocksdb")
    <state_dir>/<app>/<t>-<p>/<store>.sqlite (+ -wal, -shm)   the local store (state_store "sqlite")
    <state_dir>/<app>/<t>-<p>/<store>.checkpoint               {"changelog_offset": N, "changelog_id":
                                                                topic id, "written_at": epoch s}: the store
                                                                is clean and reflects that changelog up to N
    <state_dir>/<app>/<t>-<p>/<store>.lock                     flock: one writer per store on a host
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import attrs

# -- on the broker ----------------------------------------------------------------------------------


def transactional_id(app_id: str, topic: str, partition: int) -> str:
    """A pure function of (app_id, topic, partition): every attempt at a partition fences the others.
    ':' is legal in neither app_id nor topic names, so distinct inputs never collide."""
    return f"{app_id}:{topic}:{partition}"


def part_transactional_id(app_id: str, part: int) -> str:
    """Part `part`'s transactional.id: '#' is legal in no topic name, so it never equals an input
    partition's."""
    return f"{app_id}:#part:{part}"


def job_app_id(app_id: str, job_id: str) -> str:
    """The app id a batch job `job_id` of app `app_id` runs under (`eos.write`): its own progress topic,
    group and transactional ids, so that each job's record of what it committed is its own."""
    return f"{app_id}.job.{job_id}"


def parts_topic(app_id: str) -> str:
    return f"{app_id}-eos-parts"


def input_group(app_id: str) -> str:
    return app_id


def restore_group(app_id: str) -> str:
    return f"{app_id}-restore"


def watermark_group(app_id: str) -> str:
    return f"{app_id}-watermarks"


def client_id(app_id: str, role: str | None = None) -> str:
    return f"eos-{app_id}" if role is None else f"eos-{app_id}-{role}"


def changelog_topic(app_id: str, input_topic: str, store: str) -> str:
    return f"{app_id}-{input_topic}-{store}-changelog"


#: the header of a changelog record naming the input offset that wrote it (at_least_once restores skip
#: records of input at or past the committed offset)
INPUT_OFFSET_HEADER = "eos.input.offset"
#: the header of a changelog record naming the store it belongs to (`changelog_owner`): names of two
#: apps' changelogs can collide (app `a` reading `b-c` and app `a-b` reading `c`), and a restore refuses
#: records of another owner
OWNER_HEADER = "eos.owner"


def changelog_owner(app_id: str, input_topic: str, store: str) -> bytes:
    """`app/topic/store`: '/' occurs in none of the three (store names are checked like topic names)."""
    return f"{app_id}/{input_topic}/{store}".encode()


# -- on disk ----------------------------------------------------------------------------------------

SQLITE = ".sqlite"
ROCKSDB = ".rocksdb"
CHECKPOINT = ".checkpoint"
LOCK = ".lock"
#: the newest snapshot this store was taken to or restored from (`eos.state._snapshot`): its offset, time
SNAPSHOT_MARK = ".snapshot-mark"
#: the files of a store's data, either backend's (SQLite's with its WAL files; RocksDB's directory)
_DATA_SUFFIXES = (SQLITE, SQLITE + "-wal", SQLITE + "-shm", ROCKSDB)


def app_dir(state_dir: str | Path, app_id: str) -> Path:
    return Path(state_dir) / app_id


def partition_dir(state_dir: str | Path, app_id: str, topic: str, partition: int) -> Path:
    return app_dir(state_dir, app_id) / f"{topic}-{partition}"


def partition_dirs(state_dir: str | Path, app_id: str) -> list[tuple[str, int, Path]]:
    """(topic, partition, directory) of every partition directory of the app, sorted."""
    root = app_dir(state_dir, app_id)
    if not root.is_dir():
        return []
    out = []
    for entry in root.iterdir():
        topic, _, partition = entry.name.rpartition("-")
        if entry.is_dir() and topic and partition.isdigit():
            out.append((topic, int(partition), entry))
    return sorted(out)


def store_file(directory: Path, store: str, suffix: str) -> Path:
    return directory / f"{store}{suffix}"


def remove_store_data(directory: Path, store: str) -> None:
    """Delete a store's checkpoint first (from then on the store is unclean whatever happens next),
    then its data, whichever backend wrote it."""
    for suffix in (CHECKPOINT, CHECKPOINT + ".tmp"):
        store_file(directory, store, suffix).unlink(missing_ok=True)
    for suffix in _DATA_SUFFIXES:
        path = store_file(directory, store, suffix)
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def store_names(directory: Path) -> list[str]:
    """The stores that have a file in a partition directory."""
    names = set()
    for entry in directory.iterdir():
        for suffix in (SQLITE, ROCKSDB, CHECKPOINT, LOCK):
            if entry.name.endswith(suffix) and len(entry.name) > len(suffix):
                names.add(entry.name[: -len(suffix)])
    return sorted(names)


# -- the checkpoint file ----------------------------------------------------------------------------


@attrs.frozen
class StoreCheckpoint:
    """A store's checkpoint file: the store is clean and reflects the changelog whose topic id is
    `changelog_id` up to `changelog_offset` (the data holds the offset it reflects, written with it),
    as of `written_at` (epoch seconds)."""

    changelog_offset: int
    #: None in files written before eos recorded it: such a store is restored again once
    changelog_id: str | None = None
    written_at: float | None = None
    #: at_least_once, during a restore: changelog records of input at or past this offset are not applied
    skip_from: int | None = None


def read_checkpoint(path: Path) -> StoreCheckpoint | None:
    """A store's checkpoint file; a missing or unreadable file is no checkpoint."""
    try:
        fields = json.loads(path.read_text())
        return StoreCheckpoint(
            int(fields["changelog_offset"]),
            fields.get("changelog_id"),
            fields.get("written_at"),
            fields.get("skip_from"),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_checkpoint(path: Path, checkpoint: StoreCheckpoint) -> None:
    """Atomically (write a temporary file, rename it over)."""
    tmp = path.with_suffix(CHECKPOINT + ".tmp")
    tmp.write_text(json.dumps({k: v for k, v in attrs.asdict(checkpoint).items() if v is not None}))
    os.replace(tmp, path)
