"""Where recovery is decided: the state stores of one input topic-partition for one task, step 4 of
docs/protocol.md, each store's by its `StoreRecovery` (`eos.state._recovery`).

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

from collections.abc import Iterable, Mapping
from typing import Protocol

from eos import _names
from eos._scope import PartitionScope
from eos.state._api import State, Store, StoreSpec
from eos.state._backends import backend
from eos.state._recovery import StoreRecovery


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
        self.recoveries = {name: StoreRecovery(scope, name, s) for name, s in self.stores.items()}
        #: each store's open writes (the same dicts for the task's length: cleared, never replaced)
        self._pending = [s.pending for s in self.stores.values()]
        self.changelogs = {name: r.changelog for name, r in self.recoveries.items()}
        self.view = State({name: Store(name, specs[name], self.stores[name]) for name in specs})
        self.committed_input: int | None = None
        #: the committed offset's witnesses (exactly_once): each partition's last record of the
        #: transaction that committed it (`eos._kafka._witness`)
        self.witnesses: Mapping[tuple[str, int], int] = {}

    @property
    def restored(self) -> int:
        """Changelog records applied by this task's restores."""
        return sum(r.restored for r in self.recoveries.values())

    @property
    def from_snapshot(self) -> int:
        """Stores restored from a snapshot and the changelog's tail since, not the whole changelog."""
        return sum(r.from_snapshot for r in self.recoveries.values())

    @property
    def snapshots_taken(self) -> int:
        return sum(r.snapshots_taken for r in self.recoveries.values())

    @property
    def snapshots_failed(self) -> int:
        return sum(r.snapshots_failed for r in self.recoveries.values())

    # -- task start, and again after an abort -----------------------------------------------------

    def open(
        self, committed_input: int | None, witnesses: Mapping[tuple[str, int], int] | None = None
    ) -> None:
        """At task start: the changelogs checked (or created), each store locked and recovered.
        `witnesses`: the committed offset's, which may spare a read of the changelog (4b)."""
        self.committed_input = committed_input
        self.witnesses = witnesses or {}
        for recovery in self.recoveries.values():
            recovery.open()
            recovery.recover(self.committed_input, self.witnesses)

    def reopen(
        self, committed_input: int | None, witnesses: Mapping[tuple[str, int], int] | None = None
    ) -> None:
        """After an abort (or a fenced producer's replacement): drop the open transaction's writes and
        recover again. A wipe-mode store that was written to has lost its checkpoint, so it is wiped
        and restored; a transactional store only rolls forward."""
        self.committed_input = committed_input
        self.witnesses = witnesses or {}
        for recovery in self.recoveries.values():
            recovery.store.rollback()
            recovery.recover(self.committed_input, self.witnesses)

    def snapshot_if_due(self, input_offset: int | None, force: bool = False) -> None:
        """After the task's last commit: snapshot each store whose last snapshot is older than
        `state_snapshot_interval_ms` and that changed since (`force`: each store not snapshotted at its
        offset yet). `input_offset`: the committed input offset. A snapshot that fails is logged; the
        batch is committed whatever happens here."""
        interval_s = 0 if force else self.scope.config.state_snapshot_interval_ms / 1000
        for recovery in self.recoveries.values():
            recovery.snapshot_if_due(input_offset, interval_s)

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
            owner = (_names.OWNER_HEADER, self.recoveries[name].owner)
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
