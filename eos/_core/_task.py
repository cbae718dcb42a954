"""Executor side: write the rows of one input topic-partition of one micro-batch, steps 1-8 of
docs/protocol.md.

`run_partition` is the sink's `mapInArrow` function (D4). Its Arrow batches hold each input
topic-partition as one run in offset order (`eos._core._arrow.tp_runs` checks it); each run is one
`PartitionTask`, which hands each step to the part that does it: steps 1-4 start an `Incarnation`, step
5 skips what is committed (`_skip`), step 6 is the `Writer`, step 7 is `Transaction.commit()`, and
`_guarded` applies the error rules of step 8, redoing the open transaction from its `RedoBuffer`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs
import pyarrow as pa

from eos import _crash
from eos._core import _arrow, _input, _worker
from eos._core._incarnation import DISPLACED, Incarnation
from eos._core._redo import RedoBuffer
from eos._core._spec import TaskSpec
from eos._core._stats import STATS_SCHEMA, PartitionStats
from eos._core._transaction import Transaction
from eos._core._writer import Writer
from eos._scope import PartitionScope
from eos.errors import (
    DeliveryFailedError,
    EosError,
    FatalError,
    FencedError,
    ProduceError,
    RecordError,
    TransactionAbortableError,
    TransactionInDoubtError,
)

#: why a task goes on with a fresh producer after a failed transaction (`PartitionTask._drop`)
FAILED = "transaction failed: going on with a fresh producer, whose init_transactions ends it"
#: why a task goes on with a fresh producer after a call of the transaction timed out (8f)
IN_DOUBT = "going on with a fresh producer, whose init_transactions commits or aborts the transaction"


class PartitionTask:
    """The protocol for one input topic-partition of one micro-batch (docs/protocol.md, steps 1-8)."""

    def __init__(self, job: TaskSpec, topic: str, partition: int) -> None:
        self.job = job
        self.scope = scope = PartitionScope.of(job.config, topic, partition, job.batch_id, job.query)
        self.config = job.config
        self.layout = job.layout
        self.topic = topic
        self.partition = partition
        self.log = scope.log
        self.stats = PartitionStats(topic, partition, scope.transactional_id)
        self.incarnation = Incarnation(job, scope, self.stats)
        self.writer = Writer(job, scope, self.incarnation)
        #: the offset of the last row fed so far (the checks of `check_input`)
        self.seen: int | None = None
        self.redo = RedoBuffer(job.layout)
        #: name each output's input record (a record-by-record redo, until the next commit)
        self.exact = False
        self.transaction: Transaction | None = None
        self.started = time.monotonic()

    # -- the protocol --------------------------------------------------------------------------------

    def run(self, runs: Iterable[pa.RecordBatch]) -> PartitionStats:
        """The whole protocol over `runs` (this input partition's rows, in offset order)."""
        runs = iter(runs)
        first = next(runs, None)
        try:
            self.start(first)
            for run in itertools.chain([first] if first is not None else [], runs):
                self.feed(run)
            return self.finish()
        except BaseException:
            self.fail()
            raise

    # The same protocol for a writer that is handed rows instead of pulling them (`eos._spark._realtime`):
    # start, feed every run, then finish; the caller calls fail where any of them raised.

    def start(self, first: pa.RecordBatch | None) -> None:
        """Steps 1-4 (`first`: the first run, for the checks of `check_input`)."""
        t0 = time.monotonic()
        if first is not None and self.job.check_input:
            self.scope = attrs.evolve(self.scope, first=_arrow.first_offset(first, self.layout))
            self.incarnation.first_row(self.scope)
        self._start_incarnation(reuse=True)  # steps 1-4
        self.stats.start_seconds += time.monotonic() - t0
        if first is not None and self.incarnation.reset_from is not None:
            read_from = _input.read_start(self.job.provenance, self.topic, self.partition)
            _input.require_reset_honoured(
                self.scope,
                self.incarnation.committed,
                self.incarnation.reset_from,
                read_from if read_from is not None else _arrow.first_offset(first, self.layout),
            )
        if first is not None and self.job.check_input:
            _input.require_contiguous(self.scope, self.incarnation.committed, self.job.start_known)
        _crash.point("before_produce")  # F1

    def feed(self, run: pa.RecordBatch) -> None:
        """Steps 5-7 for the next run of rows: what is new is written, committed whenever due."""
        self.stats.records_in += run.num_rows
        if self.job.check_input and run.num_rows:
            self.seen = _input.require_no_gaps(self.scope, run, self.layout, self.seen)
        run = self._skip(run)  # step 5: rows already written open no transaction
        position = 0
        while position < run.num_rows:  # steps 6, 7
            room = self.config.commit_every - (self.transaction.records if self.transaction else 0)
            chunk = run.slice(position, min(run.num_rows - position, room))
            position += self._guarded(lambda chunk=chunk: self._write_new(chunk))
            if self.transaction is not None and self.transaction.due():
                self._guarded(self._commit)

    def commit_if_due(self) -> None:
        """Commit the open transaction if it is due (`Transaction.due`): for a writer that is handed rows
        and sees time pass between them (`eos._spark._realtime`)."""
        if self.transaction is not None and self.transaction.due():
            self._guarded(self._commit)

    def finish(self) -> PartitionStats:
        """Commit what is open; hand the producer back to the worker's pool."""
        if self.transaction is not None:
            self._guarded(self._commit)
        self.incarnation.release()
        self.stats.seconds = time.monotonic() - self.started
        self.log.info(
            "partition written",
            records_in=self.stats.records_in,
            records_out=self.stats.records_out,
            skipped=self.stats.skipped,
            transactions=self.stats.transactions,
            aborted=self.stats.aborted,
            redos=self.stats.redos,
            commit_ms_max=round(self.stats.commit_seconds_max * 1000, 1),
            seconds=round(time.monotonic() - self.started, 3),
        )
        return self.stats

    def fail(self) -> None:
        """After an error: the producer is thrown away (its transaction dies with it), the state closed."""
        self.incarnation.discard()

    def _start_incarnation(self, reuse: bool) -> None:
        """Steps 1-4, and step 5 for the open transaction's kept input: the open transaction (if any) is
        gone, and its kept input loses the rows now committed."""
        self.incarnation.start(reuse)
        self._restarted()

    def _replace_kept(self, why: str, exc: Exception | None = None) -> None:
        self.incarnation.replace_kept(why, exc)
        self._restarted()

    def _restarted(self) -> None:
        self.redo.trim(self._skip)
        self.transaction = None
        self.incarnation.producer.records.exact = self.exact

    # -- step 8 ----------------------------------------------------------------------------------------

    def _guarded(self, action: Callable[[], Any]) -> Any:
        """Run one action of the open transaction under the error rules of step 8; its result."""
        redos = doubts = 0
        replay = False
        while True:
            try:
                if replay:
                    self._replay()
                elif self.transaction is None:
                    self.transaction = self.incarnation.begin()
                return action()
            except TransactionAbortableError as exc:  # 8a
                self._raise_if_timed_out(exc)
                self._drop(exc)
                if not self.exact:
                    # A bulk write does not know which record a failed delivery came from (its shared
                    # callback notes only that one failed): redo record by record, which names it. This
                    # redo does not count against max_redo.
                    self.exact = self.incarnation.producer.records.exact = True
                elif redos >= self.config.max_redo or isinstance(exc, DeliveryFailedError):
                    raise
                else:
                    redos += 1
                self.stats.redos += 1
                self.log.warning("redoing transaction record by record", attempt=redos, rows=self.redo.rows())
                replay = True
            except RecordError as exc:  # 8b
                isolate = (
                    isinstance(exc, ProduceError)
                    and len(exc.candidates) > 1
                    and not self.writer.untraced(exc)
                )
                try:
                    self._drop(exc, go_on=isolate or self.writer.may_dead_letter(exc))
                except EosError as drop_failure:
                    # The producer died aborting, or no producer could take the partition back; the
                    # record's error is still the one to report (the next incarnation's
                    # init_transactions ends the transaction).
                    self.log.error("abort failed", error=str(drop_failure))
                    raise exc from None
                found = [exc]
                if isolate:
                    found = self._isolate(exc, every=self.writer.dead is not None)
                    if not found:
                        raise exc from None
                for bad in found:
                    if not self.writer.dead_letter(bad):
                        if bad is exc:
                            raise
                        raise bad from exc
                replay = True
            except TransactionInDoubtError as exc:  # 8f
                doubts += 1
                if doubts > self.config.max_redo:
                    raise
                # Not retried on the same producer, nor aborted on it: a record of the transaction may
                # still be on its way, and would land in that producer's next transaction (librdkafka
                # does not speak transactions v2, KIP-890). A fresh producer's init_transactions ends
                # the transaction: committed where its commit reached the coordinator, else aborted;
                # the new incarnation reads which, and skips what was committed.
                self.log.warning("transaction in doubt", error=str(exc), rows=self.redo.rows())
                self.transaction = None
                self._replace_kept(IN_DOUBT, exc)
                replay = True
            except FencedError as exc:  # 8c, or 8d for a kept producer
                self._raise_if_timed_out(exc)
                if not (self.incarnation.reused and self.stats.transactions == 0):
                    self.log.error("fenced: this attempt is a zombie", error=str(exc))
                    raise
                # A kept producer displaced by another worker (found by step 2's check, or by a write
                # where there was no committed offset to check with, or where its own commit was still
                # the committed one): take the partition back once.
                self._replace_kept(DISPLACED, exc)
                replay = True
            except FatalError as exc:  # 8c
                self._raise_if_timed_out(exc)
                self.log.error("fatal producer error", error=str(exc))
                raise

    def _raise_if_timed_out(self, exc: Exception) -> None:
        """8e (`Transaction.outlived`)."""
        timed_out = self.transaction.outlived(exc) if self.transaction is not None else None
        if timed_out is not None:
            raise timed_out from exc

    def _isolate(self, exc: ProduceError, every: bool) -> list[ProduceError]:
        """One refusal hit the outputs of several input records: a broker refuses a whole record batch
        when one record in it is too large for the topic. Write suspects alone, each in a transaction
        that is then aborted, largest output first (`ProduceError.candidates`' order); returns the
        errors of those refused on their own: the first one, or with `every` (dead letters) each one
        before the first suspect accepted alone (smaller ones are as good; one that is not fails the
        redo and is found then). None refused alone: every suspect was tried. (at_least_once has no
        transaction to abort: a suspect that is accepted alone is written once more.)"""
        self.log.warning("finding the refused record", suspects=len(exc.candidates), error=str(exc))
        found: list[ProduceError] = []
        for offset in exc.candidates:
            row = self.redo.row(offset)
            if row is None:
                continue
            for _ in range(3):
                self.transaction = self.incarnation.begin()
                try:
                    self.writer.write(row, self.transaction, may_stop=False)
                    self.transaction.send_state()  # its store writes too: the changelog may refuse them
                    self.incarnation.producer.records.flush_and_check(self.topic, self.partition)
                except ProduceError as alone:
                    self._drop(alone)
                    found.append(alone)
                    break
                except TransactionAbortableError as undecided:
                    # No verdict (a record purged unsent, a broker going away): write it again.
                    self._drop(undecided)
                    continue
                self._drop(exc)  # accepted alone
                if found:
                    return found
                break
            if found and not every:
                return found
        return found

    def _replay(self) -> None:
        """Begin a new transaction and write the open transaction's input again."""
        self.transaction = self.incarnation.begin()
        for chunk in self.redo:
            self.writer.write(chunk, self.transaction, may_stop=False)
            self.transaction.input_bytes += chunk.nbytes

    def _drop(self, exc: BaseException, go_on: bool = True) -> None:
        """Abort the open transaction after it failed (8a, 8b). Where a delivery of it failed (known
        after the abort, which serves the last reports), exactly_once goes on with a fresh producer, not
        that one: librdkafka purges the records queued behind a refused record batch and, after the
        abort, records produced next (docs/design.md, "A failed transaction's producer"). The abort
        spares the fresh producer's init_transactions the wait for an open transaction (~0.5 s); where
        the abort fails, init_transactions ends the transaction. The task goes on from the committed
        offset as a new incarnation (steps 2-4), as after 8d. Unless it does not `go_on` (it raises
        `exc`): then the abort alone."""
        fresh = go_on and self.config.exactly_once
        self.stats.aborted += 1
        self.log.warning("aborting transaction", error=str(exc), rows=self.redo.rows())
        failed = self.incarnation.producer.records.delivery_failed
        if self.transaction is not None:
            try:
                failed = self.transaction.abort() or failed
            except EosError as abort_failure:
                if not fresh:
                    raise
                self.log.info("abort failed: a fresh producer ends the transaction", error=str(abort_failure))
                failed = True
        self.transaction = None
        if fresh and failed:
            self._replace_kept(FAILED)
        else:
            self.incarnation.rolled_back()  # the aborted writes must not survive

    # -- steps 5-7 -------------------------------------------------------------------------------------

    def _skip(self, chunk: pa.RecordBatch) -> pa.RecordBatch:
        """Step 5, the one place it is done: `chunk` without its rows below the committed offset
        (already written), counting them."""
        n = _arrow.below(chunk, self.layout, self.incarnation.committed)
        self.stats.skipped += n
        return chunk.slice(n) if n else chunk

    def _write_new(self, chunk: pa.RecordBatch) -> int:
        """Write the rows of `chunk` not yet committed; returns how many rows of it are done (fewer than
        all when `process` made the transaction due mid-chunk)."""
        # Re-checked per chunk: after a fenced producer was replaced, the committed offset may have moved.
        rest = self._skip(chunk)
        done = chunk.num_rows - rest.num_rows
        if rest.num_rows == 0:
            return done
        self.redo.writing = rest
        written = self.writer.write(rest, self.transaction, may_stop=True)
        if self.stats.first_offset is None:
            self.stats.first_offset = _arrow.first_offset(rest, self.layout)
        kept = rest.slice(0, written)
        self.redo.add(kept)
        self.transaction.input_bytes += kept.nbytes
        return done + written

    def _commit(self) -> None:
        transaction = self.transaction
        if transaction.records == 0:  # everything pending was committed by the incarnation we fenced
            transaction.abort()
            self.transaction = None
            return
        seconds = transaction.commit()
        self.exact = self.incarnation.producer.records.exact = False  # a redo lasts one transaction
        self.writer.one_by_one = False
        self.stats.last_offset = transaction.last_offset
        self.incarnation.advance(transaction.offset)
        transaction.report(self.stats, seconds, self.job.functions.on_commit)
        self.redo.clear()
        self.transaction = None


def run_partition(
    job: TaskSpec,
    batches: Iterator[pa.RecordBatch],
    task_partition: int = -1,
    executor: tuple[str | None, bool] = (None, False),
) -> Iterator[pa.RecordBatch]:
    """One PartitionTask per input topic-partition run of a Spark task's batches; yields its stats row.
    Each batch's input coordinates are checked first (`eos._core._input.check_rows`; `task_partition`, the
    Spark partition the task read, names the task in what it finds; -1: not known). `executor`: where
    the task runs, where eos placed it, and whether that is where eos asked (into each stats row).

    Afterwards, trims the worker's import caches so that PySpark's set-up of its next task is cheap
    (see `eos._core._worker`).
    """
    checked = _input.checked_batches(batches, job.layout, job.provenance, task_partition)
    try:
        for (topic, partition), runs in itertools.groupby(
            _arrow.tp_runs(checked, job.layout), key=lambda item: item[0]
        ):
            stats = PartitionTask(job, topic, partition).run(run for _, run in runs)
            stats.executor, stats.placed = executor[0], int(executor[1])
            yield pa.RecordBatch.from_pylist([attrs.asdict(stats)], schema=STATS_SCHEMA)
    finally:
        _worker.trim_import_caches()
