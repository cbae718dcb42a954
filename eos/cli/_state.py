"""`eos state show` and `eos state wipe`, and their local side: the stores under
<state_dir>/<app_id>/<topic>-<partition>/ (`eos._names` names the files), read without disturbing a
running writer, and wiped only while nobody holds a store's lock."""

from __future__ import annotations

import fcntl
import os
from contextlib import ExitStack
from pathlib import Path

import attrs

from eos import _names
from eos.cli._args import Leaf, non_negative_int, subcommands
from eos.cli._base import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNKNOWN_APP,
    CliError,
    format_table,
    print_json,
)
from eos.cli._broker import Broker
from eos.config import Config, redact_url
from eos.state import _backends, _snapshot


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


def read_database(directory: Path, name: str) -> tuple[int | None, int | None]:
    """(number of keys, local changelog offset) of a store's data, read-only (either backend)."""
    found = _backends.peek(directory, name)
    return (None, None) if found is None else found[1:]


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
            keys, local = read_database(directory, name)
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
    """Delete the checkpoint file and the data of the store (all stores of the partition if
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
            _names.remove_store_data(directory, name)
    return names


def add_commands(commands, leaf: Leaf) -> None:
    """eos state show / wipe."""
    state = commands.add_parser("state", help="the local state stores")
    state_cmd = subcommands(state)
    sshow = leaf(state_cmd, "show", "keys, checkpoint, local and changelog offsets per store and partition")
    sshow.add_argument("--app", required=True, help="the app id (Config.app_id)")
    sshow.add_argument("--state-dir", help="default: $EOS_STATE_DIR, else eos' default")
    sshow.add_argument("--json", action="store_true", help="JSON instead of a table")
    sshow.set_defaults(func=cmd_state_show)
    swipe = leaf(state_cmd, "wipe", "mark a partition's stores unclean: the next run restores them")
    swipe.add_argument("--app", required=True, help="the app id (Config.app_id)")
    swipe.add_argument("--topic", required=True, help="input topic")
    swipe.add_argument("--partition", type=non_negative_int, required=True, help="input partition")
    swipe.add_argument("--store", help="only this store (default: every store of the partition)")
    swipe.add_argument("--state-dir", help="default: $EOS_STATE_DIR, else eos' default")
    swipe.set_defaults(func=cmd_state_wipe)
    location_help = "where the snapshots are (state_snapshot_location; default: $EOS_STATE_SNAPSHOT_LOCATION)"
    sshow.add_argument("--snapshot-location", help=location_help)
    slist = leaf(state_cmd, "snapshots", "every snapshot of an app's stores in durable storage")
    slist.add_argument("--app", required=True, help="the app id (Config.app_id)")
    slist.add_argument("--snapshot-location", help=location_help)
    slist.add_argument("--json", action="store_true", help="JSON instead of a table")
    slist.set_defaults(func=cmd_state_snapshots)
    for name, func, what in (
        (
            "snapshot",
            cmd_state_snapshot,
            "bring a partition's local stores up to their changelogs and snapshot them now",
        ),
        (
            "restore",
            cmd_state_restore,
            "rebuild a partition's local stores (from their newest snapshots and the changelogs' tails)"
            " before a query runs here",
        ),
    ):
        sub = leaf(state_cmd, name, what)
        sub.add_argument("--app", required=True, help="the app id (Config.app_id)")
        sub.add_argument("--topic", required=True, help="input topic")
        sub.add_argument("--partition", type=non_negative_int, required=True, help="input partition")
        sub.add_argument(
            "--store", action="append", help="only this store (repeatable; default: every store)"
        )
        sub.add_argument("--state-dir", help="default: $EOS_STATE_DIR, else eos' default")
        sub.add_argument("--snapshot-location", help=location_help)
        sub.set_defaults(func=func)


def _with_snapshots(args, config: Config, required: bool) -> Config:
    """`config` with the snapshot location of --snapshot-location or $EOS_STATE_SNAPSHOT_LOCATION."""
    location = getattr(args, "snapshot_location", None) or os.environ.get("EOS_STATE_SNAPSHOT_LOCATION")
    if not location:
        if required:
            raise CliError(
                EXIT_ERROR,
                "no snapshot location: give --snapshot-location or set EOS_STATE_SNAPSHOT_LOCATION",
            )
        return config
    return attrs.evolve(config, state_snapshot_location=location, state_snapshot_interval_ms=1)


def cmd_state_snapshots(args, config: Config, broker: Broker) -> int:
    config = _with_snapshots(args, config, True)
    found = list(_snapshot.app_snapshots(config.state_snapshot_location, config.app_id))
    if args.json:
        print_json(
            {
                "app": config.app_id,
                "snapshots": [
                    {"topic": t, "partition": p, "store": store, "path": s.data_path, **s.as_dict()}
                    for t, p, store, s in found
                ],
            }
        )
        return EXIT_OK
    if not found:
        print(f"no snapshots of app {config.app_id!r} under {redact_url(config.state_snapshot_location)}")
        return EXIT_OK
    rows = [
        (t, p, store, s.offset, s.input_offset, s.backend, s.size, _when(s.taken_at), s.changelog_id)
        for t, p, store, s in found
    ]
    headers = [
        "TOPIC",
        "PARTITION",
        "STORE",
        "OFFSET",
        "INPUT_OFFSET",
        "BACKEND",
        "BYTES",
        "TAKEN",
        "TOPIC_ID",
    ]
    print(format_table(headers, rows))
    return EXIT_OK


def _shown(snapshot: _snapshot.Snapshot | None) -> dict | None:
    return None if snapshot is None else {"path": snapshot.data_path, **snapshot.as_dict()}


def _described(snapshot: _snapshot.Snapshot | None) -> str:
    return "none" if snapshot is None else f"{snapshot.offset} at {_when(snapshot.taken_at)}"


def _when(epoch: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).isoformat(timespec="seconds")


def _partition_state(args, config: Config, broker: Broker):
    """The stores of --topic/--partition, opened (locked) and recovered as a task would, and what it
    took; the caller closes them."""
    from eos._log import get_logger
    from eos._scope import PartitionScope
    from eos.state._api import StoreSpec
    from eos.state._partition import PartitionState

    directory = _names.partition_dir(config.state_dir, config.app_id, args.topic, args.partition)
    names = set(_names.store_names(directory)) if directory.is_dir() else set()
    if config.state_snapshot_location:
        names |= {
            store
            for topic, partition, store, _ in _snapshot.app_snapshots(
                config.state_snapshot_location, config.app_id
            )
            if (topic, partition) == (args.topic, args.partition)
        }
    if args.store:
        names = set(args.store)
    if not names:
        raise CliError(
            EXIT_ERROR,
            f"no stores of {args.topic}/{args.partition} for app {config.app_id!r} under {directory} or in"
            " the snapshots: name them with --store",
        )
    committed = broker.committed(config.app_id).get((args.topic, args.partition))
    log = get_logger("eos.task", app_id=config.app_id, topic=args.topic, partition=args.partition)
    scope = PartitionScope(config, args.topic, args.partition, -1, None, log)
    state = PartitionState(scope, {name: StoreSpec() for name in sorted(names)})
    try:
        state.open(committed)
    except BaseException:
        state.close()
        raise
    return state, committed


def cmd_state_snapshot(args, config: Config, broker: Broker) -> int:
    config = _with_snapshots(args, config, True)
    state, committed = _partition_state(args, config, broker)
    try:
        before = state.snapshots_taken
        state.snapshot_if_due(committed, force=True)
        taken = state.snapshots_taken - before
        for name, store in state.stores.items():
            print(
                f"store {name!r} of {args.topic}/{args.partition}: at changelog offset {store.local_offset()}"
            )
    finally:
        state.close()
    print(f"{taken} snapshot(s) written under {redact_url(config.state_snapshot_location)}")
    if state.snapshots_failed:
        raise CliError(
            EXIT_ERROR, f"{state.snapshots_failed} snapshot(s) could not be written (logged above)"
        )
    return EXIT_OK


def cmd_state_restore(args, config: Config, broker: Broker) -> int:
    config = _with_snapshots(args, config, False)
    state, _ = _partition_state(args, config, broker)
    try:
        for name, store in state.stores.items():
            print(
                f"store {name!r} of {args.topic}/{args.partition}: at changelog offset {store.local_offset()}"
            )
    finally:
        state.close()
    print(
        f"{state.from_snapshot} store(s) from a snapshot, {state.restored} changelog record(s) read;"
        " the next task here rolls forward from there"
    )
    return EXIT_OK


def cmd_state_show(args, config: Config, broker: Broker) -> int:
    app = config.app_id
    stores = scan(config.state_dir, app)
    where = _names.app_dir(config.state_dir, app)
    broker.partitions()
    if not stores:
        if not broker.committed(app):
            raise CliError(
                EXIT_UNKNOWN_APP,
                f"unknown app {app!r}: the group has no committed offsets"
                f" and there is no state under {where}",
            )
        if args.json:
            print_json({"app": app, "state_dir": str(config.state_dir), "stores": []})
        else:
            print(f"no local state for app {app!r} under {where}")
        return EXIT_OK
    config = _with_snapshots(args, config, False)
    newest: dict[tuple[str, int, str], _snapshot.Snapshot] = {}
    if config.state_snapshot_location:
        for topic, partition, store, snapshot in _snapshot.app_snapshots(config.state_snapshot_location, app):
            newest.setdefault((topic, partition, store), snapshot)
    changelogs = {(s.topic, s.store): _names.changelog_topic(config.app_id, s.topic, s.store) for s in stores}
    ends = broker.log_offsets({(changelogs[(s.topic, s.store)], s.partition) for s in stores}, "latest")
    records = []
    for s in stores:
        changelog = changelogs[(s.topic, s.store)]
        records.append((s, changelog, ends.get((changelog, s.partition))))
    if args.json:
        print_json(
            {
                "app": app,
                "state_dir": str(config.state_dir),
                "stores": [
                    {
                        "topic": s.topic,
                        "partition": s.partition,
                        "store": s.store,
                        "keys": s.keys,
                        "checkpoint": s.checkpoint,
                        "clean": s.checkpoint is not None,
                        "local": s.local,
                        "changelog": changelog,
                        "changelog_end": end,
                        "locked": s.locked,
                        "snapshot": _shown(newest.get((s.topic, s.partition, s.store))),
                    }
                    for s, changelog, end in records
                ],
            }
        )
        return EXIT_OK
    rows = [
        (
            s.topic,
            s.partition,
            s.store,
            s.keys,
            "none (unclean)" if s.checkpoint is None else s.checkpoint,
            s.local,
            "missing" if end is None else end,
            "yes" if s.locked else "no",
        )
        for s, _, end in records
    ]
    headers = ["TOPIC", "PARTITION", "STORE", "KEYS", "CHECKPOINT", "LOCAL", "CHANGELOG_END", "LOCKED"]
    if config.state_snapshot_location:
        headers.append("SNAPSHOT")
        rows = [
            (*row, _described(newest.get((s.topic, s.partition, s.store))))
            for row, (s, _, _) in zip(rows, records, strict=True)
        ]
    print(format_table(headers, rows))
    return EXIT_OK


def cmd_state_wipe(args, config: Config, broker: Broker) -> int:
    wiped = wipe(config.state_dir, config.app_id, args.topic, args.partition, args.store)
    for name in wiped:
        print(
            f"wiped store {name!r} of {args.topic}/{args.partition}: checkpoint and local database deleted;"
            f" the next run restores it from {_names.changelog_topic(config.app_id, args.topic, name)}"
        )
    return EXIT_OK
