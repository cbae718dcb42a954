"""Where the commit happens: one `Transaction` per transaction of one input topic-partition (named for
what it is, not Spark's checkpointLocation nor a store's `.checkpoint` file). Its steps are 7a-7e of
docs/protocol.md.

`Transaction.commit()`, exactly_once:
    7a. Produce the state stores' open writes to their changelog topics, inside the transaction.
    7b. Flush the producer and check every delivery report. A failed output raises, naming its input
       record; the caller aborts the transaction.
    7c. Send the input offset (last processed + 1), stamped as this app's (`_offsets.stamp`) with the
       transaction's witnesses (`eos._kafka._witness`: one delivered offset per partition it wrote), to
       the transaction, with the group metadata of `app_id`, so the offset commits atomically with the
       outputs.
    7d. Commit the transaction: outputs, changelog records and offset become visible together.
    7e. Apply the state writes to the local stores with the changelog offset they reach, and write
       each store's checkpoint file.

`Transaction.commit()`, at_least_once (idempotent producer, no transaction):
    7a. Produce the state stores' open writes to their changelog topics.
    7b. Flush the producer and check every delivery report.
    7c. (nothing: there is no transaction to carry the offset)
    7d. Commit the input offset to the group synchronously. A crash between 7b and 7d re-sends the
       outputs (and recovery skips changelog records of input at or past the committed offset).
    7e. As above.

The crash points between the steps (`eos._crash`) are the faults F2, F3 and F4.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from eos import _crash
from eos._core._spec import Commit
from eos._core._stats import PartitionStats
from eos._kafka import _offsets, _pool
from eos._kafka._producer import OutputProducer
from eos._scope import PartitionScope
from eos.errors import EosError, PartTooLargeError, TransactionTimeoutError
from eos.state._partition import PartitionState


class Transaction:
    """One transaction of one input topic-partition (exactly_once), or one offset commit (at_least_once)."""

    def __init__(
        self,
        scope: PartitionScope,
        producer: OutputProducer,
        state: PartitionState | None = None,
        since: int | None = None,
    ) -> None:
        self.scope = scope
        #: the committed offset this transaction's input begins at (None: the partition had none)
        self.since = since
        self.config = scope.config
        self.state = state
        self.producer = producer
        self.log = scope.log
        self.started = time.monotonic()
        self.last_offset: int | None = None
        self.records = 0
        self.outputs = 0
        #: of `records`, how many were written as dead letters (on_error="dead_letter")
        self.dead_letters = 0
        #: bytes of the input this transaction holds for a redo (Arrow)
        self.input_bytes = 0
        #: seconds of the commit's steps, by PartitionStats field (7b-7d)
        self.steps: dict[str, float] = {}
        #: the offset the commit committed (the next to process), once it has
        self.offset: int | None = None

    def mark(self, last_offset: int, records: int, outputs: int, dead_letters: int = 0) -> None:
        """`records` more input records, up to the one at `last_offset`, have been processed and their
        `outputs` produced (`dead_letters` of them written as dead letters instead)."""
        self.last_offset = last_offset
        self.records += records
        self.outputs += outputs
        self.dead_letters += dead_letters

    def age(self) -> float:
        """Seconds since this transaction began."""
        return time.monotonic() - self.started

    def due(self) -> bool:
        return (
            self.records >= self.config.commit_every
            or self.input_bytes >= self.config.commit_max_bytes
            or (time.monotonic() - self.started) * 1000 >= self.config.commit_interval_ms
            or (self.state is not None and self.state.pending_keys() >= self.config.state_buffer_max_keys)
        )

    def send_state(self) -> None:
        """7a. The state's open writes to the changelogs."""
        if self.state is not None:
            self.state.produce_changelog(self.producer.records)

    def commit(self) -> float:
        """Run the steps in the module docstring; returns the seconds they took."""
        t0 = time.monotonic()
        self.send_state()
        _crash.abort_point("before_commit")
        # 7b. Flush and check every delivery report.
        t = time.monotonic()
        self.producer.records.flush_and_check(self.scope.topic, self.scope.partition)
        self.steps["flush_seconds"] = time.monotonic() - t
        _crash.point("after_produce")  # F2
        if self.config.exactly_once:
            # 7c. The input offset joins the transaction, with its witnesses.
            next_offset, stamp = self.offset_record(self.producer.records.take_witnesses())
            t = time.monotonic()
            self.producer.send_offsets(
                [(self.scope.topic, self.scope.partition, next_offset, stamp)],
                _offsets.group_metadata(self.config),
                self.log,
            )
            self.steps["send_offsets_seconds"] = time.monotonic() - t
            _crash.point("after_send_offsets")  # F3
            # 7d. Outputs and offset become visible together.
            t = time.monotonic()
            self.producer.commit_transaction(self.log)
            self.producer.committed_stamp = stamp
            self.steps["end_seconds"] = time.monotonic() - t
            # Seen committed by this worker: a task of it that starts from this offset need not read the
            # witnesses back.
            _pool.proven(self.scope.transactional_id, stamp)
        else:
            # 7d. at_least_once: the offset is committed after the outputs are acknowledged.
            next_offset, stamp = self.offset_record(None)
            _offsets.commit(self.config, self.scope.topic, self.scope.partition, next_offset, self.log, stamp)
        _crash.point("after_commit")  # F4
        self.offset = next_offset
        # 7e. Local stores and checkpoint files.
        if self.state is not None:
            self.state.on_commit(self.producer.records)
        return time.monotonic() - t0

    def report(
        self, stats: PartitionStats, seconds: float, on_commit: Callable[[Commit], None] | None
    ) -> None:
        """After the commit (which took `seconds`): the task's figures, and the user's `on_commit` record
        of it, the one place for an input partition's transactions and a part's."""
        stats.transactions += 1
        stats.records_out += self.outputs
        stats.dead_letters += self.dead_letters
        stats.commit_seconds_total += seconds
        stats.commit_seconds_max = max(stats.commit_seconds_max, seconds)
        for step, spent in self.steps.items():
            setattr(stats, step, getattr(stats, step) + spent)
        if on_commit is not None:
            on_commit(
                Commit(
                    app_id=self.config.app_id,
                    topic=self.scope.topic,
                    partition=self.scope.partition,
                    offset=self.offset,
                    batch_id=self.scope.batch_id,
                    transactional_id=self.scope.transactional_id,
                    records=self.records,
                    outputs=self.outputs,
                    seconds=seconds,
                    dead_letters=self.dead_letters,
                )
            )

    def offset_record(self, witnesses: Mapping[tuple[str, int], int] | None) -> tuple[int, str]:
        """The offset 7c/7d commit and its metadata: the next input offset, stamped as this app's with
        the transaction's witnesses (an `input_mode="any"` part records its batch instead)."""
        stamp = _offsets.stamp(
            self.config,
            self.scope.query,
            self.scope.batch_id,
            self.scope.first,
            witnesses=witnesses,
            since=self.since if witnesses is not None else None,
            log=self.log,
        )
        return self.last_offset + 1, stamp

    def abort(self) -> bool:
        """Abort it (exactly_once; at_least_once has nothing to abort: what was delivered stays); returns
        whether a delivery of it failed. Its failures and witnesses are forgotten either way."""
        if self.config.exactly_once and self.producer.in_transaction:
            return self.producer.abort_transaction(self.log)
        failed = self.producer.records.delivery_failed
        self.producer.records.forget()
        return failed

    def outlived(self, exc: Exception) -> EosError | None:
        """8e, the one place it is decided: the error to raise instead of `exc` where this transaction
        was open longer than transaction.timeout.ms: the broker aborted it and fenced its producer, so the
        attempt is not a zombie, and redoing it as slowly would fail again."""
        if isinstance(exc, TransactionTimeoutError | PartTooLargeError):
            return None
        seconds = self.age()
        if seconds * 1000 < self.config.transaction_timeout_ms:
            return None
        self.log.error("transaction outlived transaction.timeout.ms", seconds=round(seconds, 1))
        return self.too_slow(seconds, exc)

    def too_slow(self, seconds: float, exc: Exception) -> EosError:
        """The error of a transaction open `seconds`, too long (`exc`: what the broker said of it)."""
        return TransactionTimeoutError(
            f"the transaction of input partition {self.scope.topic}/{self.scope.partition} was open for"
            f" {seconds:.1f}s, longer than transaction_timeout_ms ({self.config.transaction_timeout_ms}), and"
            f" the broker aborted it ({exc}). Make process faster, commit more often (commit_every,"
            " commit_interval_ms, commit_max_bytes) or raise transaction_timeout_ms (at most the"
            " broker's transaction.max.timeout.ms). (A task stopped that long, by a GC pause or a"
            " suspended host, ends the same way; Spark's retry redoes it.)",
            kafka_error=getattr(exc, "kafka_error", None),
        )
