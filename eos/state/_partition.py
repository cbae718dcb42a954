"""Where recovery is decided: the state stores of one input topic-partition for one task, step 4 of
docs/protocol.md.

`PartitionState.open()` runs at task start, after init_transactions() and the committed-offset read.
For each store:
    4a. Decide. No checkpoint file means unclean (a crash, an abort in wipe mode, a lost or new state
       directory): wipe the local store and restore from the changelog's beginning. A checkpoint file
       means clean: roll forward from the offset the local store reflects (commits made by another
       incarnation, or a commit whose local apply a crash interrupted, F4). Against the changelog's
       bounds: one that now begins after that offset (records deleted) means wipe and restore from its
       beginning; one that ends before it (lost data) means wipe and restore all it holds.
    4b. Restore (`_changelog.restore`): read the store's changelog partition with a read_committed
       consumer up to the high watermark, waiting while an open transaction holds the last stable
       offset below it (else the restore would silently stop short). at_least_once: records whose
       input offset is at or past the group's committed offset are not applied (their input will be
       processed again). A crash here is F6: no checkpoint was written, so the next attempt decides
       unclean.
    4c. wipe mode: the first write after a commit removes the checkpoint file, so a crash with writes
       that are not yet committed leaves the store unclean.

After an aborted transaction (`reopen`): transactional stores drop the open transaction's writes;
wipe-mode stores that were written to are wiped and restored (4a with unclean). After a commit
(`on_commit`, step 7e): each store applies its writes with the changelog offset they reach and writes its
checkpoint file.
"""

from __future__ import annotations

from eos import _names
from eos._producer import OutputProducer
from eos._scope import PartitionScope
from eos.records import Output
from eos.state import _changelog
from eos.state._api import State, Store, StoreSpec
from eos.state._sqlite import PartitionStore


class PartitionState:
    """All stores of one input topic-partition for the length of one task."""

    def __init__(self, scope: PartitionScope, specs: dict[str, StoreSpec]) -> None:
        self.scope = scope
        config = scope.config
        directory = _names.partition_dir(config.state_dir, config.app_id, scope.topic, scope.partition)
        transactional = config.state_mode == "transactional"
        self.stores = {name: PartitionStore(directory, name, transactional) for name in specs}
        self.changelogs = {name: _names.changelog_topic(config.app_id, scope.topic, name) for name in specs}
        self.view = State({name: Store(name, specs[name], self.stores[name]) for name in specs})
        self.restored = 0
        self.committed_input: int | None = None

    # -- task start, and again after an abort -----------------------------------------------------

    def open(self, committed_input: int | None) -> None:
        """At task start: the changelogs checked (or created), each store locked and recovered."""
        config, scope = self.scope.config, self.scope
        self.committed_input = committed_input
        for name, store in self.stores.items():
            _changelog.ensure_changelog(config, scope.topic, name, scope.partition)
            store.open(config.transaction_timeout_ms / 1000)
            self._recover(name, store)

    def reopen(self, committed_input: int | None) -> None:
        """After an abort (or a fenced producer's replacement): drop the open transaction's writes and
        recover again. A wipe-mode store that was written to has lost its checkpoint, so it is wiped
        and restored; a transactional store only rolls forward."""
        self.committed_input = committed_input
        for name, store in self.stores.items():
            store.rollback()
            self._recover(name, store)

    def _recover(self, name: str, store: PartitionStore) -> None:
        log, partition = self.scope.log, self.scope.partition
        changelog = self.changelogs[name]
        # 4a. Decide.
        clean = store.read_checkpoint() is not None
        start = store.local_offset() if clean else None
        if start is None:
            if clean or store.local_offset() is not None:
                log.info("state unclean: wiping and restoring from the changelog", store=name)
            store.wipe()
            start = 0
        low, high = _changelog.bounds(self.scope.config, changelog, partition)
        if start < low:
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
            if start > 0:
                store.wipe()
            start = low
        if start > high:
            # The changelog lost data (deleted and recreated, unclean election): the store cannot be
            # trusted beyond what the changelog holds.
            log.warning("local store is ahead of its changelog: wiping", store=name, local=start, end=high)
            store.wipe()
            start = 0
        # 4b. Restore; the store then reflects its changelog, so it is clean.
        if start == high:
            if store.local_offset() != high:
                store.apply_restored([], high)
        else:
            skip_from = None if self.scope.config.exactly_once else (self.committed_input or 0)
            self.restored += _changelog.restore(
                self.scope.config, log, store, changelog, partition, start, high, skip_from
            )
        store.write_checkpoint(store.local_offset())
        # 4c. wipe mode: the store's first write removes the checkpoint (PartitionStore.put_many).

    # -- while processing -----------------------------------------------------------------------------

    def set_input_offset(self, offset: int) -> None:
        for store in self.stores.values():
            store.input_offset = offset

    def pending_keys(self) -> int:
        return max((len(s.pending) for s in self.stores.values()), default=0)

    def produce_changelog(self, producer: OutputProducer) -> None:
        """Send the open transaction's writes to the changelogs (inside the transaction in exactly_once)."""
        topic, partition = self.scope.topic, self.scope.partition
        for name, store in self.stores.items():
            changelog = self.changelogs[name]
            for key, value, input_offset in store.changes():
                header = [(_names.INPUT_OFFSET_HEADER, str(input_offset).encode())]
                out = Output(value, key, header, partition=partition)
                producer.produce(out, changelog, topic, partition, input_offset, track=True)

    # -- after commit ---------------------------------------------------------------------------------

    def on_commit(self, producer: OutputProducer) -> None:
        for name, store in self.stores.items():
            offset = store.local_offset() or 0
            if store.pending:  # this transaction wrote to the changelog: the store now reflects its end
                offset = producer.delivered_offsets[(self.changelogs[name], self.scope.partition)] + 1
            store.commit(offset)

    def close(self) -> None:
        for store in self.stores.values():
            store.close()
