"""Step 4 of docs/protocol.md for one store of one input topic-partition (quixstreams' RecoveryPartition):
its changelog, the decision between rolling forward and restoring whole (4a), the restore (4b) and its
snapshots. `eos.state._partition.PartitionState` holds one per store; the rules are in its docstring."""

from __future__ import annotations

import time
from collections.abc import Mapping

from eos import _names
from eos._kafka import _changelog
from eos._scope import PartitionScope
from eos.state import _snapshot
from eos.state._store import PartitionStore


class StoreRecovery:
    """One store's changelog and recovery for the length of one task."""

    def __init__(self, scope: PartitionScope, name: str, store: PartitionStore) -> None:
        config = scope.config
        self.scope = scope
        self.name = name
        self.store = store
        self.changelog = _names.changelog_topic(config.app_id, scope.topic, name)
        self.owner = _names.changelog_owner(config.app_id, scope.topic, name)
        #: where its snapshots go (None: snapshots off)
        self.location = _snapshot.store_location(config, scope.topic, scope.partition, name)
        #: as read at `open`: the changelog's topic id and delete.retention.ms
        self.topic_id = ""
        self.retention_ms = 0
        #: changelog records applied by restores, and whether a snapshot stood in for the changelog
        self.restored = 0
        self.from_snapshot = 0
        self.snapshots_taken = 0
        self.snapshots_failed = 0

    def open(self) -> None:
        """The changelog checked (or created), the store locked."""
        config, scope = self.scope.config, self.scope
        changelog = _changelog.ensure_changelog(config, scope.topic, self.name, scope.partition)
        self.retention_ms = changelog.delete_retention_ms
        self.topic_id = _changelog.topic_id(config, changelog.name)
        self.store.open(config.transaction_timeout_ms / 1000)

    def recover(self, committed_input: int | None, witnesses: Mapping[tuple[str, int], int]) -> None:
        """4a-4c, to the committed input offset `committed_input` (whose transaction's `witnesses` may
        spare a read of the changelog)."""
        config, log, partition = self.scope.config, self.scope.log, self.scope.partition
        store, name, changelog = self.store, self.name, self.changelog
        # Changelog records of input at or past the committed offset: that input is processed again.
        # at_least_once writes them without a transaction (a crash between its flush and its offset
        # commit), and they stay there after a switch to exactly_once, whose own are never visible
        # without their offset: skipped whatever the guarantee now.
        skip_from = committed_input or 0
        low, high = _changelog.bounds(config, changelog, partition)
        # 4a. Decide.
        checkpoint = store.read_checkpoint()
        start = store.local_offset() if checkpoint is not None else None
        distrust = None
        if start is not None:
            distrust = _distrust(checkpoint, self.topic_id, skip_from, start, high, self.retention_ms)
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
            start = self._rebuild(committed_input, low, high)
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
            start = self._rebuild(committed_input, low, high)
        elif start > high:
            # The changelog lost data (an unclean leader election, say): the store cannot be trusted
            # beyond what the changelog holds.
            log.warning("local store is ahead of its changelog: wiping", store=name, local=start, end=high)
            start = self._rebuild(committed_input, low, high)
        elif high - start > 1 and self.location is not None:
            # A store behind its changelog (its partition ran elsewhere since): a newer snapshot saves
            # reading the records between.
            installed = self._install_snapshot(committed_input, low, high, above=start)
            if installed is not None:
                start = installed
            elif store.local_offset() is None:  # one failed to install and wiped the store
                start = low
        if high - start == 1 and self._only_a_marker(start, witnesses):
            start = high  # 4b has nothing to read
        store.changelog_id = self.topic_id
        # 4b. Restore. The store reflects the changelog up to `start` (nothing of it, after a wipe): its
        # checkpoint says so first, so that a restore cut short resumes from what it applied.
        if store.local_offset() != start:
            store.apply_restored([], start)
        if start < high:
            store.write_checkpoint(start, skip_from)
            with store.restoring():
                self.restored += _changelog.restore(
                    config, log, store, changelog, partition, start, high, skip_from, self.owner
                )
        store.write_checkpoint(store.local_offset())
        # 4c. wipe mode: the store's first write removes the checkpoint (PartitionStore.put_many).

    def _rebuild(self, committed_input: int | None, low: int, high: int) -> int:
        """Wipe the store, then put its newest usable snapshot in place; the changelog offset the
        store now reflects (`low`: none was usable, restore the whole changelog)."""
        self.store.wipe()
        installed = self._install_snapshot(committed_input, low, high)
        return low if installed is None else installed

    def _install_snapshot(
        self, committed_input: int | None, low: int, high: int, above: int | None = None
    ) -> int | None:
        """Put the store's newest usable snapshot (one past offset `above`, where given: a store that
        is behind keeps its data otherwise) in place of its data; the offset it reflects, or None: none
        was, or one failed to install, which leaves the store wiped."""
        if self.location is None:
            return None
        log, name, store = self.scope.log, self.name, self.store
        try:
            snapshots = _snapshot.listed(self.location)
        except OSError as exc:
            log.warning("snapshots not listed: restoring from the changelog", store=name, error=str(exc))
            return None
        for snapshot in snapshots:
            if above is not None and snapshot.offset <= above + 1:
                return None  # the store reads no more from the changelog than from this one
            reason = self._unusable(snapshot, committed_input, low, high)
            if reason is not None:
                log.info("snapshot not used", store=name, snapshot=snapshot.data_path, reason=reason)
                continue
            try:
                _snapshot.install(self.location, snapshot, store)
            except Exception as exc:  # noqa: BLE001 - the changelog is the truth: any failure falls back to it
                log.warning(
                    "snapshot cannot be read: restoring the changelog whole",
                    store=name,
                    snapshot=snapshot.data_path,
                    error=f"{type(exc).__name__}: {exc}",
                )
                store.wipe()
                return None
            # outside the fallback, as a failed write of the store's own files is no bad snapshot
            _snapshot.mark(store, snapshot.offset, snapshot.taken_at)
            log.info(
                "store restored from snapshot",
                store=name,
                snapshot=snapshot.data_path,
                offset=snapshot.offset,
                local=above,
                changelog_end=high,
            )
            self.from_snapshot += 1
            return snapshot.offset
        return None

    def _unusable(
        self, snapshot: _snapshot.Snapshot, committed: int | None, low: int, high: int
    ) -> str | None:
        """Why a snapshot cannot stand in for the changelog up to its offset, or None."""
        if snapshot.changelog_id != self.topic_id or snapshot.changelog != self.changelog:
            return (
                f"it is of changelog {snapshot.changelog} (topic id {snapshot.changelog_id}), and the"
                f" store's is {self.changelog} ({self.topic_id}): deleted and created again, or another"
                " app's"
            )
        if snapshot.backend != self.store.kind:
            return f"a {snapshot.backend} store's, and this one is {self.store.kind}"
        if not low <= snapshot.offset <= high:
            return f"its offset {snapshot.offset} is outside the changelog's {low}-{high}"
        if snapshot.input_offset is not None and (committed is None or snapshot.input_offset > committed):
            return (
                f"it holds the state of input up to offset {snapshot.input_offset}, past the committed"
                f" {committed}: that input is processed again"
            )
        return _tombstones_gone("it was taken", snapshot.taken_at, snapshot.offset, high, self.retention_ms)

    def _only_a_marker(self, start: int, witnesses: Mapping[tuple[str, int], int]) -> bool:
        """Whether offset `start`, the one offset between the store's and the changelog's end, is a
        transaction marker, proven without reading it (a restore consumer's assign, fetch and unassign
        cost ~12 ms a store at every task start). exactly_once writes the changelog only in
        transactions of this partition's transactional id. When the transaction that committed the
        input offset wrote its last record of this changelog partition at `start - 1` (its witness),
        its marker comes next, before anything of a later transaction of the id (whose
        init_transactions waits for the markers), so it is at `start`."""
        if not self.scope.config.exactly_once:
            return False  # at_least_once writes the changelog without transactions: no markers
        return witnesses.get((self.changelog, self.scope.partition)) == start - 1

    def snapshot_if_due(self, input_offset: int | None, interval_s: float) -> None:
        """Snapshot the store where its last snapshot is older than `interval_s` and it changed since.
        `input_offset`: the committed input offset. A snapshot that fails is logged and counted."""
        store, log = self.store, self.scope.log
        offset = store.local_offset()
        if self.location is None or offset is None:
            return
        mark = _snapshot.read_mark(store)
        if mark is not None and (mark[0] >= offset or time.time() - mark[1] < interval_s):
            return
        started = time.monotonic()
        try:
            snapshot = _snapshot.take(
                self.location,
                store,
                offset,
                self.changelog,
                self.topic_id,
                input_offset,
                self.scope.config.state_snapshot_keep,
            )
        except Exception as exc:  # noqa: BLE001 - a snapshot is an optimisation: the changelog has it all
            self.snapshots_failed += 1
            log.warning(
                "snapshot not taken", store=self.name, offset=offset, error=f"{type(exc).__name__}: {exc}"
            )
            return
        _snapshot.mark(store, offset, snapshot.taken_at)  # outside: a failed write of its own files raises
        self.snapshots_taken += 1
        log.info(
            "snapshot taken",
            store=self.name,
            snapshot=snapshot.data_path,
            offset=offset,
            bytes=snapshot.size,
            seconds=round(time.monotonic() - started, 3),
        )


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
