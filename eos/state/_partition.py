"""Where recovery is decided: the state stores of one input topic-partition for one task, step 4 of
docs/protocol.md.

`PartitionState.open()` runs at task start, after init_transactions() and the committed-offset read.
For each store:
    4a. Decide. No checkpoint file means unclean (a crash, an abort in wipe mode, a lost or new state
       directory): wipe the local store and restore from the changelog's beginning. A checkpoint file
       means clean: roll forward from the offset the local store reflects (commits made by another
       incarnation, or a commit whose local apply a crash interrupted, F4) — unless the store is not
       to be trusted: its checkpoint names another changelog topic (the changelog was deleted and
       created again, or the state directory is another cluster's or environment's: a topic id
       differs), it has records to roll forward over and has not read its changelog for half the
       changelog's delete.retention.ms (compaction may have removed tombstones of keys it still
       holds), or it was being restored with input skipped from another offset. Such a
       store is wiped and restored whole. Against the changelog's bounds: one that now begins after the
       store's offset (records deleted) or ends before it (lost data) means wipe and restore what it
       holds.
    4b. Restore (`_changelog.restore`): the checkpoint is written first (the store reflects the
       changelog up to where it starts), then the changelog partition is read with a read_committed
       consumer up to the high watermark, each batch applied with the offset it reaches, so that a
       restore cut short (F6: a crash, or no progress within the deadline) resumes from what it
       applied. Waits while an open transaction holds the last stable offset below the high watermark
       (else the restore would silently stop short). Records whose input offset is at or past the
       group's committed offset are not applied (their input will be processed again): at_least_once
       writes such records, and they are still there when a query switches to exactly_once.
       Nothing is read when the one offset left is proven a marker (`_only_a_marker`).
    4c. wipe mode: the first write after a commit removes the checkpoint file, so a crash with writes
       that are not yet committed leaves the store unclean.

After an aborted transaction (`reopen`): transactional stores drop the open transaction's writes;
wipe-mode stores that were written to are wiped and restored (4a with unclean). After a commit
(`on_commit`, step 7e): each store applies its writes with the changelog offset they reach and writes its
checkpoint file.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol

from eos import _crash, _names
from eos._kafka import _changelog
from eos._scope import PartitionScope
from eos.state import _snapshot
from eos.state._api import State, Store, StoreSpec
from eos.state._backends import backend
from eos.state._store import PartitionStore


class ChangelogRecords(Protocol):
    """What the stores need of the partition producer's records (`eos._kafka._collector.RecordCollector`
    is one): to send a write to its changelog, and the offset each changelog partition's last write
    reached."""

    delivered_offsets: Mapping[tuple[str, int], int]

    def produce_changelog(
        self,
        topic: str,
        partition: int,
        records: Iterable[tuple[bytes, bytes | None, list[tuple[str, bytes]], int]],
        in_topic: str,
        in_partition: int,
    ) -> None: ...


class PartitionState:
    """All stores of one input topic-partition for the length of one task."""

    def __init__(self, scope: PartitionScope, specs: dict[str, StoreSpec]) -> None:
        self.scope = scope
        config = scope.config
        directory = _names.partition_dir(config.state_dir, config.app_id, scope.topic, scope.partition)
        transactional = config.state_mode == "transactional"
        store = backend(config.state_store)
        self.stores = {name: store(directory, name, transactional) for name in specs}
        #: each store's open writes (the same dicts for the task's length: cleared, never replaced)
        self._pending = [s.pending for s in self.stores.values()]
        self.changelogs = {name: _names.changelog_topic(config.app_id, scope.topic, name) for name in specs}
        self.owners = {name: _names.changelog_owner(config.app_id, scope.topic, name) for name in specs}
        self.view = State({name: Store(name, specs[name], self.stores[name]) for name in specs})
        self.restored = 0
        self.committed_input: int | None = None
        #: the committed offset's witnesses (exactly_once): each partition's last record of the
        #: transaction that committed it (`eos._kafka._witness`)
        self.witnesses: Mapping[tuple[str, int], int] = {}
        #: per store, as read at `open`: its changelog's topic id and delete.retention.ms
        self._topic_ids: dict[str, str] = {}
        self._retention_ms: dict[str, int] = {}
        #: per store, where its snapshots go (None: snapshots off)
        self.snapshot_locations = {
            name: _snapshot.store_location(config, scope.topic, scope.partition, name) for name in specs
        }
        #: stores restored from a snapshot (and the changelog's tail since) rather than the whole changelog
        self.from_snapshot = 0
        self.snapshots_taken = 0
        self.snapshots_failed = 0

    # -- task start, and again after an abort -----------------------------------------------------

    def open(
        self, committed_input: int | None, witnesses: Mapping[tuple[str, int], int] | None = None
    ) -> None:
        """At task start: the changelogs checked (or created), each store locked and recovered.
        `witnesses`: the committed offset's, which may spare a read of the changelog (4b)."""
        config, scope = self.scope.config, self.scope
        self.committed_input = committed_input
        self.witnesses = witnesses or {}
        for name, store in self.stores.items():
            changelog = _changelog.ensure_changelog(config, scope.topic, name, scope.partition)
            self._retention_ms[name] = changelog.delete_retention_ms
            self._topic_ids[name] = _changelog.topic_id(config, changelog.name)
            store.open(config.transaction_timeout_ms / 1000)
            self._recover(name, store)

    def reopen(
        self, committed_input: int | None, witnesses: Mapping[tuple[str, int], int] | None = None
    ) -> None:
        """After an abort (or a fenced producer's replacement): drop the open transaction's writes and
        recover again. A wipe-mode store that was written to has lost its checkpoint, so it is wiped
        and restored; a transactional store only rolls forward."""
        self.committed_input = committed_input
        self.witnesses = witnesses or {}
        for name, store in self.stores.items():
            store.rollback()
            self._recover(name, store)

    def _recover(self, name: str, store: PartitionStore) -> None:
        config, log, partition = self.scope.config, self.scope.log, self.scope.partition
        changelog = self.changelogs[name]
        # Changelog records of input at or past the committed offset: that input is processed again.
        # at_least_once writes them without a transaction (a crash between its flush and its offset
        # commit), and they stay there after a switch to exactly_once, whose own are never visible
        # without their offset: skipped whatever the guarantee now.
        skip_from = self.committed_input or 0
        low, high = _changelog.bounds(config, changelog, partition)
        # 4a. Decide.
        checkpoint = store.read_checkpoint()
        start = store.local_offset() if checkpoint is not None else None
        distrust = None
        if start is not None:
            distrust = _distrust(
                checkpoint, self._topic_ids[name], skip_from, start, high, self._retention_ms[name]
            )
        if start is None or distrust is not None:
            if store.corruption is not None:
                log.warning(
                    "local store file damaged: deleted, restoring it from the changelog",
                    store=name,
                    error=store.corruption,
                )
                store.corruption = None
            elif distrust is not None:
                log.warning(
                    "local store not trusted: wiping and restoring it whole", store=name, reason=distrust
                )
            elif store.local_offset() is not None:
                log.info("state unclean: wiping and restoring from the changelog", store=name)
            start = self._rebuild(name, store, low, high)
        elif start < low:
            # The changelog no longer begins where the store left off (DeleteRecords, a retention set
            # on it): rolling forward from `start` is impossible, and a consumer would jump to the end
            # and leave the store stale. Rebuild from what the changelog still holds.
            log.warning(
                "changelog begins after the store's offset: wiping and restoring from its beginning",
                store=name,
                changelog=changelog,
                local=start,
                changelog_start=low,
                end=high,
            )
            start = self._rebuild(name, store, low, high)
        elif start > high:
            # The changelog lost data (an unclean leader election, say): the store cannot be trusted
            # beyond what the changelog holds.
            log.warning("local store is ahead of its changelog: wiping", store=name, local=start, end=high)
            start = self._rebuild(name, store, low, high)
        elif high - start > 1 and self.snapshot_locations[name] is not None:
            # A store behind its changelog (its partition ran elsewhere since): a newer snapshot saves
            # reading the records between.
            installed = self._install_snapshot(name, store, low, high, above=start)
            if installed is not None:
                start = installed
            elif store.local_offset() is None:  # one failed to install and wiped the store
                start = low
        if high - start == 1 and self._only_a_marker(name, start):
            start = high  # 4b has nothing to read
        store.changelog_id = self._topic_ids[name]
        # 4b. Restore. The store reflects the changelog up to `start` (nothing of it, after a wipe): its
        # checkpoint says so first, so that a restore cut short resumes from what it applied.
        if store.local_offset() != start:
            store.apply_restored([], start)
        if start < high:
            store.write_checkpoint(start, skip_from)
            with store.restoring():
                self.restored += _changelog.restore(
                    config, log, store, changelog, partition, start, high, skip_from, self.owners[name]
                )
        store.write_checkpoint(store.local_offset())
        # 4c. wipe mode: the store's first write removes the checkpoint (PartitionStore.put_many).

    def _rebuild(self, name: str, store: PartitionStore, low: int, high: int) -> int:
        """Wipe the store, then put its newest usable snapshot in place; the changelog offset the
        store now reflects (`low`: none was usable, restore the whole changelog)."""
        store.wipe()
        installed = self._install_snapshot(name, store, low, high)
        return low if installed is None else installed

    def _install_snapshot(
        self, name: str, store: PartitionStore, low: int, high: int, above: int | None = None
    ) -> int | None:
        """Put the store's newest usable snapshot (one past offset `above`, where given: a store that
        is behind keeps its data otherwise) in place of its data; the offset it reflects, or None: none
        was, or one failed to install, which leaves the store wiped."""
        location = self.snapshot_locations[name]
        if location is None:
            return None
        log = self.scope.log
        try:
            snapshots = _snapshot.listed(location)
        except OSError as exc:
            log.warning("snapshots not listed: restoring from the changelog", store=name, error=str(exc))
            return None
        for snapshot in snapshots:
            if above is not None and snapshot.offset <= above + 1:
                return None  # the store reads no more from the changelog than from this one
            reason = self._unusable(name, store, snapshot, low, high)
            if reason is not None:
                log.info("snapshot not used", store=name, snapshot=snapshot.data_path, reason=reason)
                continue
            try:
                with tempfile.TemporaryDirectory(dir=store.directory) as work:
                    data = Path(work) / "snapshot"
                    _snapshot.download(location, snapshot, data)
                    _crash.point("during_restore")  # F6 where a snapshot stands in for the changelog
                    store.replace_with(data)
                reflects = store.local_offset()
                if reflects != snapshot.offset:
                    raise ValueError(
                        f"its data reflects changelog offset {reflects}, its manifest says {snapshot.offset}"
                    )
            except Exception as exc:  # noqa: BLE001 - the changelog is the truth: any failure falls back to it
                log.warning(
                    "snapshot cannot be read: restoring the changelog whole",
                    store=name,
                    snapshot=snapshot.data_path,
                    error=f"{type(exc).__name__}: {exc}",
                )
                store.wipe()
                return None
            log.info(
                "store restored from snapshot",
                store=name,
                snapshot=snapshot.data_path,
                offset=snapshot.offset,
                local=above,
                changelog_end=high,
            )
            self.from_snapshot += 1
            _mark(store, snapshot.offset, snapshot.taken_at)
            return snapshot.offset
        return None

    def _unusable(
        self, name: str, store: PartitionStore, snapshot: _snapshot.Snapshot, low: int, high: int
    ) -> str | None:
        """Why a snapshot cannot stand in for the changelog up to its offset, or None."""
        if snapshot.changelog_id != self._topic_ids[name] or snapshot.changelog != self.changelogs[name]:
            return (
                f"it is of changelog {snapshot.changelog} (topic id {snapshot.changelog_id}), and the"
                f" store's is {self.changelogs[name]} ({self._topic_ids[name]}): deleted and created"
                " again, or another app's"
            )
        if snapshot.backend != store.kind:
            return f"a {snapshot.backend} store's, and this one is {store.kind}"
        if not low <= snapshot.offset <= high:
            return f"its offset {snapshot.offset} is outside the changelog's {low}-{high}"
        committed = self.committed_input
        if snapshot.input_offset is not None and (committed is None or snapshot.input_offset > committed):
            return (
                f"it holds the state of input up to offset {snapshot.input_offset}, past the committed"
                f" {committed}: that input is processed again"
            )
        return _tombstones_gone(
            "it was taken", snapshot.taken_at, snapshot.offset, high, self._retention_ms[name]
        )

    def snapshot_if_due(self, input_offset: int | None, force: bool = False) -> None:
        """After the task's last commit: snapshot each store whose last snapshot is older than
        `state_snapshot_interval_ms` and that changed since (`force`: each store not snapshotted at its
        offset yet). `input_offset`: the committed input offset. A snapshot that fails is logged; the
        batch is committed whatever happens here."""
        interval_s = 0 if force else self.scope.config.state_snapshot_interval_ms / 1000
        for name, store in self.stores.items():
            location = self.snapshot_locations[name]
            offset = store.local_offset()
            if location is None or offset is None:
                continue
            mark = _read_mark(store)
            if mark is not None and (mark[0] >= offset or time.time() - mark[1] < interval_s):
                continue
            started = time.monotonic()
            try:
                with tempfile.TemporaryDirectory(dir=store.directory) as work:
                    data = Path(work) / "snapshot"
                    store.export_to(data)
                    snapshot = _snapshot.manifest_of(
                        data, offset, self.changelogs[name], self._topic_ids[name], input_offset, store.kind
                    )
                    snapshot = _snapshot.upload(
                        location, data, snapshot, self.scope.config.state_snapshot_keep
                    )
            except Exception as exc:  # noqa: BLE001 - a snapshot is an optimisation: the changelog has it all
                self.snapshots_failed += 1
                self.scope.log.warning(
                    "snapshot not taken", store=name, offset=offset, error=f"{type(exc).__name__}: {exc}"
                )
                continue
            _mark(store, offset, snapshot.taken_at)
            self.snapshots_taken += 1
            self.scope.log.info(
                "snapshot taken",
                store=name,
                snapshot=snapshot.data_path,
                offset=offset,
                bytes=snapshot.size,
                seconds=round(time.monotonic() - started, 3),
            )

    def _only_a_marker(self, name: str, start: int) -> bool:
        """Whether offset `start`, the one offset between the store's and the changelog's end, is a
        transaction marker, proven without reading it (a restore consumer's assign, fetch and unassign
        cost ~12 ms a store at every task start). exactly_once writes the changelog only in
        transactions of this partition's transactional id. When the transaction that committed the
        input offset wrote its last record of this changelog partition at `start - 1` (its witness),
        its marker comes next, before anything of a later transaction of the id (whose
        init_transactions waits for the markers), so it is at `start`."""
        if not self.scope.config.exactly_once:
            return False  # at_least_once writes the changelog without transactions: no markers
        return self.witnesses.get((self.changelogs[name], self.scope.partition)) == start - 1

    # -- while processing -----------------------------------------------------------------------------

    def set_input_offset(self, offset: int) -> None:
        for store in self.stores.values():
            store.input_offset = offset

    def pending_keys(self) -> int:
        """The most open writes of one store (asked after every `process` row)."""
        return max(map(len, self._pending), default=0)

    def produce_changelog(self, records: ChangelogRecords) -> None:
        """Send the open transaction's writes to the changelogs (inside the transaction in exactly_once)."""
        topic, partition = self.scope.topic, self.scope.partition
        for name, store in self.stores.items():
            owner = (_names.OWNER_HEADER, self.owners[name])
            header = _names.INPUT_OFFSET_HEADER
            writes = (
                (key, value, [(header, str(input_offset).encode()), owner], input_offset)
                for key, value, input_offset in store.changes()
            )
            records.produce_changelog(self.changelogs[name], partition, writes, topic, partition)

    # -- after commit ---------------------------------------------------------------------------------

    def on_commit(self, records: ChangelogRecords) -> None:
        for name, store in self.stores.items():
            offset = store.local_offset() or 0
            if store.pending:  # this transaction wrote to the changelog: the store now reflects its end
                offset = records.delivered_offsets[(self.changelogs[name], self.scope.partition)] + 1
            store.commit(offset)

    def close(self) -> None:
        for store in self.stores.values():
            store.close()


def _distrust(
    checkpoint: _names.StoreCheckpoint,
    topic_id: str,
    skip_from: int | None,
    start: int,
    high: int,
    retention_ms: int,
) -> str | None:
    """Why a store with a checkpoint must be restored whole instead of rolled forward (4a), or None."""
    if checkpoint.changelog_id is None:
        return "its checkpoint names no changelog topic id (written by an earlier eos)"
    if checkpoint.changelog_id != topic_id:
        return (
            f"it was built from changelog topic id {checkpoint.changelog_id}, and the changelog is now"
            f" {topic_id}: deleted and created again, or this state directory is another cluster's or"
            " another environment's with the same app_id"
        )
    if checkpoint.skip_from is not None and checkpoint.skip_from != skip_from:
        # Written as a restore began, and still there: that restore was cut short. (A checkpoint written
        # after a restore or a commit has none: the store reflects every record up to its offset.)
        return (
            f"a restore that skipped input from offset {checkpoint.skip_from} was cut short, and this"
            f" one skips from {skip_from}"
        )
    return _tombstones_gone(
        "it last read its changelog", checkpoint.written_at or 0, start, high, retention_ms
    )


def _tombstones_gone(what: str, since: float, start: int, high: int, retention_ms: int) -> str | None:
    """Why rolling a store (or a snapshot) read at time `since` forward from changelog offset `start` to
    `high` may miss deletes, or None: more than a commit marker (the store's own last transaction's) to
    roll over, and older than half delete.retention.ms, so a tombstone among those records may have
    been compacted away. The one place of the rule, for a checkpoint (4a) and a snapshot."""
    age_s = time.time() - since
    if high - start > 1 and age_s * 1000 >= retention_ms / 2:
        return (
            f"{what} {age_s:.0f}s ago, and the changelog keeps a tombstone {retention_ms / 1000:g}s"
            " (delete.retention.ms) after compaction reaches it: keys deleted since may have no tombstone"
            " left to roll forward over"
        )
    return None


def _read_mark(store: PartitionStore) -> tuple[int, float] | None:
    """The offset and time of the newest snapshot this store was taken to or restored from."""
    try:
        fields = json.loads(_names.store_file(store.directory, store.name, _names.SNAPSHOT_MARK).read_text())
        return int(fields["offset"]), float(fields["taken_at"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _mark(store: PartitionStore, offset: int, taken_at: float) -> None:
    path = _names.store_file(store.directory, store.name, _names.SNAPSHOT_MARK)
    path.write_text(json.dumps({"offset": offset, "taken_at": taken_at}))
