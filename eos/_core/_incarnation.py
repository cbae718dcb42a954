"""Steps 1-4 of docs/protocol.md for one input topic-partition: a producer that has fenced every older
incarnation (the worker's kept one, or a fresh one), the committed input offset, and the state recovered
to it. Run at task start and again whenever a kept producer turns out displaced."""

from __future__ import annotations

from typing import Any

from eos._core import _input, _proof
from eos._core._fence import Fence
from eos._core._spec import TaskSpec
from eos._core._stats import PartitionStats
from eos._core._transaction import Transaction
from eos._kafka import _offsets, _producer, _witness
from eos._scope import PartitionScope
from eos.errors import CommitLostError
from eos.state import State
from eos.state._partition import PartitionState

DISPLACED = "kept producer was fenced by a newer incarnation; starting a fresh one"


class Incarnation:
    """The producer, committed offset and state a partition task writes with (Kafka Streams' task
    initialization); `start` again replaces them all."""

    def __init__(self, job: TaskSpec, scope: PartitionScope, stats: PartitionStats) -> None:
        self.job = job
        self.scope = scope
        self.config = job.config
        self.stats = stats
        self.log = scope.log
        tp = (scope.topic, scope.partition)
        self.fence = Fence(self.config, scope.transactional_id, tp, stats, self.log, trusts_own_commit=True)
        #: the committed offset a kept producer has yet to prove itself current with (step 2)
        self.unchecked: _offsets.Committed | None = None
        self.committed: int | None = None
        #: the offset `eos offsets reset` replaced with the committed one (-1: not known), None: not reset
        self.reset_from: int | None = None
        #: the committed offset's witnesses (exactly_once; `_witnesses`)
        self.witnesses: dict[tuple[str, int], int] = {}
        self.state: PartitionState | None = None
        self.view: Any = State({})

    @property
    def producer(self) -> _producer.OutputProducer | None:
        return self.fence.producer

    @property
    def reused(self) -> bool:
        """The producer was kept from an earlier task of this worker."""
        return self.fence.kept

    def first_row(self, scope: PartitionScope) -> None:
        """The task's scope now names its first row (the checks of `check_input` read it)."""
        self.scope = scope

    def advance(self, offset: int) -> None:
        """A transaction of this incarnation committed `offset` (the next to process)."""
        self.committed = offset

    def start(self, reuse: bool) -> None:
        """Steps 1-4 with the worker's kept producer (`reuse`) or a fresh one."""
        self._started(self.fence.start(reuse))

    def replace_kept(self, why: str, exc: Exception | None = None) -> None:
        """Steps 1-4 again with a fresh producer, whose init_transactions fences the others."""
        self._started(self.fence.replace(why, exc))

    def _started(self, entry: _offsets.Committed | None) -> None:
        """Steps 3-4 once the fence has read the committed offset `entry`: what this partition's policy
        makes of it, and the state recovered to it."""
        tp = (self.scope.topic, self.scope.partition)
        self.committed = _offsets.check_stamps(self.config, {tp: entry}).get(tp)
        reset, was = _offsets.operator_reset(entry.metadata if entry else None)
        self.reset_from = (-1 if was is None else was) if reset else None
        self.witnesses = _witnesses(entry) if self.config.exactly_once else {}
        if self.config.exactly_once:
            self._prove(entry, self.witnesses)
        if self.job.check_input:
            _input.require_unshared(self.scope, entry)
        # Step 2 for a kept producer, done by the first transaction (`begin`): not before the task's
        # own checks, which may fail it, and a producer thrown away with a transaction open on the
        # partition's offset would hold every stable read of it until transaction_timeout_ms. Without
        # a committed offset there is nothing to send unchanged: a displaced producer is refused at its
        # first write instead (8d).
        self.unchecked = entry if self.fence.unchecked else None
        self.stats.committed_before = self.committed
        if self.job.functions.stores:  # step 4
            if self.state is None:
                self.state = PartitionState(self.scope, self.job.functions.stores)
                self.state.open(self.committed, self.witnesses)
                self.view = self.state.view
            else:
                self.state.reopen(self.committed, self.witnesses)
            self.stats.restored = self.state.restored
            self.stats.snapshots_restored = self.state.from_snapshot

    def _prove(self, entry: _offsets.Committed | None, witnesses: dict[tuple[str, int], int]) -> None:
        """Step 3b: the transaction that committed `entry` (its `witnesses`) is visible on every
        partition it wrote to (`eos._core._proof`); else nothing below it is skipped."""
        if not witnesses:
            return
        found = _offsets.fields(entry.metadata)
        lost = _proof.aborted(self.config, self.scope.transactional_id, entry.metadata, witnesses, self.log)
        if lost:
            raise commit_lost(self.scope, entry, found, len(witnesses), lost)

    def begin(self) -> Transaction:
        """A new transaction; a kept producer's first one begins with step 2's check (`Fence`)."""
        if self.unchecked is not None:
            entry, self.unchecked = self.unchecked, None
            self.fence.check_current((self.scope.topic, self.scope.partition, entry.offset, entry.metadata))
        return Transaction(self.scope, self.producer, self.state, since=self.committed)

    def rolled_back(self) -> None:
        """After an abort: the state's open writes must not survive."""
        if self.state is not None:
            self.state.reopen(self.committed, self.witnesses)

    def release(self) -> None:
        """The task is done: its stores snapshotted where due, the state closed, the producer handed
        back to the worker's pool."""
        if self.state is not None:
            last = self.stats.last_offset
            self.state.snapshot_if_due(last + 1 if last is not None else self.committed)
        self.close_state()
        self.fence.release()

    def discard(self) -> None:
        """After an error: the producer is thrown away (its transaction dies with it), the state closed."""
        self.fence.discard()
        self.close_state()

    def close_state(self) -> None:
        if self.state is not None:
            self.stats.restored = self.state.restored
            self.stats.snapshots_restored = self.state.from_snapshot
            self.stats.snapshots_taken = self.state.snapshots_taken
            self.state.close()
            self.state = None


def commit_lost(scope: PartitionScope, entry, found, written: int, lost) -> CommitLostError:
    """The error of a committed offset whose transaction the broker aborted on some partitions."""
    app, where = scope.config.app_id, scope.where
    since = found.get("since")
    batch = f" (batch {found['batch']})" if "batch" in found else ""
    rewrite = (
        f"To write input {where} from offset {since} again (its outputs on the other partitions are then"
        f" written twice): `eos offsets reset --app {app}"
        f' --to \'{{"{scope.topic}": {{"{scope.partition}": {since}}}}}\' --execute`. '
        if since is not None
        else ""
    )
    message = (
        f"input partition {where}: the transaction that committed offset {entry.offset}"
        f"{batch}"
        f" is not visible on {len(lost)} of the {written}"
        f" partitions it wrote: {_proof.listed(lost)}. {_proof.CAUSE} eos stops rather than skip input"
        f" whose outputs no read_committed reader will see; nothing of {where} was written or skipped."
        f" {_proof.REPAIR.format(app=app)}{rewrite}To accept the loss: `eos offsets reset --app {app}"
        f" --topic {scope.topic} --shift 0 --execute`."
    )
    return CommitLostError(
        message, topic=scope.topic, partition=scope.partition, offset=entry.offset, lost=tuple(lost)
    )


def _witnesses(entry: _offsets.Committed | None) -> dict[tuple[str, int], int]:
    """The witnesses a committed offset's stamp carries (none: no stamp, or a stamp without them)."""
    found = _offsets.fields(entry.metadata) if entry is not None else None
    return _witness.decode(found.get(_witness.FIELD)) if found else {}
