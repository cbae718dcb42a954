"""Executor side: write the rows of one input topic-partition of one micro-batch (SPEC steps 2-7).

`run_partition` is Spark's `mapPartitions` function. Its rows arrive sorted by (topic, partition,
offset), so each input topic-partition is one contiguous run, handled by one `PartitionTask`:

    2. transactional.id = Config.transactional_id(topic, partition): the same for every attempt.
    3. init_transactions() fences older incarnations and ends their open transaction
       (a producer kept from an earlier task in this worker is already initialised).
    4. Read the group's committed offset (require-stable) and skip rows below it.
    5. begin -> produce -> Checkpoint.commit() (send offsets, commit), every `commit_every` records
       or `commit_interval_ms`, whichever comes first.
    7. Abortable errors: abort, redo the open transaction's rows (at most `max_redo` times).
       Record errors (bad output, `process` raising): abort and raise, naming the record.
       Fatal errors: close the producer and raise; this attempt is a zombie. One exception: a producer
       kept from an earlier task that turns out fenced before this task committed anything was only
       displaced by another worker; it is replaced by a fresh one once.

Rows are streamed; only the open transaction's rows are kept (for a redo), at most `commit_every`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs

from eos import _crash, _offsets, _worker
from eos import _producer as producers
from eos._checkpoint import Checkpoint
from eos._log import get_logger
from eos._recovery import PartitionState
from eos.config import Config
from eos.errors import FatalError, FencedError, ProcessError, RecordError, TransactionAbortableError
from eos.records import Output, OutputTypeError, outputs_of
from eos.state import State, StoreSpec


@attrs.frozen
class Layout:
    """Column positions in the rows the driver hands over (see `sink._prepare`)."""

    topic: int
    partition: int
    offset: int
    value: int | None = None
    key: int | None = None
    headers: int | None = None
    out_topic: int | None = None
    out_partition: int | None = None


@attrs.define
class PartitionStats:
    topic: str
    partition: int
    transactional_id: str | None
    records_in: int = 0
    skipped: int = 0
    records_out: int = 0
    transactions: int = 0
    aborted: int = 0
    redos: int = 0
    producers_replaced: int = 0
    commit_seconds_max: float = 0.0
    commit_seconds_total: float = 0.0
    first_offset: int | None = None
    last_offset: int | None = None
    committed_before: int | None = None
    restored: int = 0


Process = Callable[[Any, Any], Any]

#: Rows are tuples: Spark's `Row` is a tuple subclass whose Python-level `__getitem__` costs a call
#: per field read (~11% of a worker's samples in a `make bench` profile); this reads the tuple's slot.
_at = tuple.__getitem__


@attrs.frozen
class Commit:
    """What `on_commit` receives after each committed transaction (or at_least_once offset commit)
    of one input topic-partition, on the executor (Samza's checkpoint listener)."""

    app_id: str
    topic: str
    partition: int
    #: the committed input offset: the next record to process
    offset: int
    batch_id: int
    transactional_id: str | None
    records: int
    outputs: int
    seconds: float


OnCommit = Callable[[Commit], None]


class PartitionTask:
    def __init__(
        self,
        config: Config,
        topic: str,
        partition: int,
        batch_id: int,
        layout: Layout,
        process: Process | None,
        stores: dict[str, StoreSpec] | None = None,
        on_commit: OnCommit | None = None,
    ) -> None:
        self.config = config
        self.stores = stores or {}
        self.on_commit = on_commit
        self.batch_id = batch_id
        self.topic = topic
        self.partition = partition
        self.layout = layout
        self.process = process
        tid = config.transactional_id(topic, partition) if config.exactly_once else None
        self.stats = PartitionStats(topic, partition, tid)
        self.log = get_logger(
            app_id=config.app_id, topic=topic, partition=partition, transactional_id=tid, batch_id=batch_id
        )
        self.producer: producers.OutputProducer | None = None
        self.reused = False
        self.committed: int | None = None
        self.pending: list[Any] = []  # rows of the open transaction, kept for a redo
        self.checkpoint: Checkpoint | None = None
        self.state: PartitionState | None = None
        self.view = State({})

    # -- the protocol --------------------------------------------------------------------------------

    def run(self, rows: Iterable[Any]) -> PartitionStats:
        started = time.monotonic()
        offset_at = self.layout.offset
        try:
            self._start_producer(reuse=True)  # 2, 3
            self._read_committed()  # 4
            if self.stores:
                self.state = PartitionState(self.config, self.stores, self.topic, self.partition, self.log)
                self.state.open(self.committed)
                self.view = self.state.view
                self.stats.restored = self.state.restored
            _crash.point("before_produce")
            for row in rows:
                self.stats.records_in += 1
                if self.committed is not None and _at(row, offset_at) < self.committed:
                    self.stats.skipped += 1
                    continue
                if self.stats.first_offset is None:
                    self.stats.first_offset = _at(row, offset_at)
                self._guarded(lambda row=row: self._produce_new(row))  # 5
                if self.checkpoint is not None and self.checkpoint.due():
                    self._guarded(self._commit)
            if self.checkpoint is not None:
                self._guarded(self._commit)
        except BaseException:
            if self.producer is not None:
                producers.discard(self.producer)
                self.producer = None
            raise
        finally:
            if self.state is not None:
                self.stats.restored = self.state.restored
                self.state.close()
        producers.release(self.producer)
        self.producer = None
        self.log.info(
            "partition written",
            records_in=self.stats.records_in,
            records_out=self.stats.records_out,
            skipped=self.stats.skipped,
            transactions=self.stats.transactions,
            aborted=self.stats.aborted,
            redos=self.stats.redos,
            commit_ms_max=round(self.stats.commit_seconds_max * 1000, 1),
            seconds=round(time.monotonic() - started, 3),
        )
        return self.stats

    def _start_producer(self, reuse: bool) -> None:
        if reuse:
            self.producer, self.reused = producers.acquire(self.config, self.stats.transactional_id)
        else:
            self.producer, self.reused = (
                producers.OutputProducer(self.config, self.stats.transactional_id),
                False,
            )
        if self.config.exactly_once and not self.producer.initialized:
            self.producer.init_transactions(self.log)

    def _read_committed(self) -> None:
        offsets = _offsets.committed(self.config, [(self.topic, self.partition)], self.log)
        self.committed = offsets.get((self.topic, self.partition))
        self.stats.committed_before = self.committed

    def _guarded(self, action: Callable[[], None]) -> None:
        """Run one step of the open transaction, applying the error rules of step 7."""
        for attempt in itertools.count():
            try:
                if attempt:
                    self._replay()
                elif self.checkpoint is None:
                    self.checkpoint = self._begin()
                action()
                return
            except TransactionAbortableError as exc:
                self._abort(exc)
                if attempt >= self.config.max_redo:
                    raise
                self.stats.redos += 1
                self.log.warning("redoing transaction", attempt=attempt + 1, rows=len(self.pending))
            except RecordError as exc:
                try:
                    self._abort(exc)
                except FatalError as abort_failure:
                    # The producer died aborting; the record's error is still the one to report
                    # (the next incarnation's init_transactions ends the transaction).
                    self.log.error("abort failed", error=str(abort_failure))
                raise
            except FencedError as exc:
                if not (self.reused and self.stats.transactions == 0):
                    self.log.error("fenced: this attempt is a zombie", error=str(exc))
                    raise
                # A kept producer displaced by another worker: take the partition back once.
                self.log.info("kept producer was fenced by a newer incarnation; starting a fresh one")
                producers.discard(self.producer)
                self.stats.producers_replaced += 1
                self._start_producer(reuse=False)
                self._read_committed()
                if self.state is not None:
                    self.state.reopen(self.committed)
                if self.committed is not None:
                    self.stats.skipped += sum(
                        1 for r in self.pending if _at(r, self.layout.offset) < self.committed
                    )
                    self.pending = [r for r in self.pending if _at(r, self.layout.offset) >= self.committed]
                self.checkpoint = None
            except FatalError as exc:
                self.log.error("fatal producer error", error=str(exc))
                raise

    def _replay(self) -> None:
        """Begin a new transaction and produce the open transaction's rows again."""
        self.checkpoint = self._begin()
        for row in self.pending:
            self._produce_row(row)

    def _begin(self) -> Checkpoint:
        return Checkpoint(self.config, self.producer, self.topic, self.partition, self.log, self.state)

    def _abort(self, exc: BaseException) -> None:
        self.stats.aborted += 1
        self.log.warning("aborting transaction", error=str(exc), rows=len(self.pending))
        if self.checkpoint is not None:
            self.checkpoint.abort()
        self.checkpoint = None
        if self.state is not None:
            self.state.reopen(self.committed)  # the aborted writes must not survive

    def _produce_new(self, row: Any) -> None:
        # Re-checked here: after a fenced producer was replaced, the committed offset may have moved.
        if self.committed is not None and _at(row, self.layout.offset) < self.committed:
            self.stats.skipped += 1
            return
        self._produce_row(row)
        self.pending.append(row)

    def _produce_row(self, row: Any) -> None:
        layout = self.layout
        offset = _at(row, layout.offset)
        if self.process is None:
            outs: Iterable[Output] = (
                Output(
                    _at(row, layout.value),
                    _at(row, layout.key) if layout.key is not None else None,
                    _at(row, layout.headers) if layout.headers is not None else None,
                ),
            )
        else:
            if self.state is not None:
                self.state.set_input_offset(offset)
            try:
                outs = list(outputs_of(self.process(row, self.view)))
            except OutputTypeError as exc:
                raise ProcessError(
                    str(exc), topic=self.topic, partition=self.partition, offset=offset
                ) from exc
            except Exception as exc:  # noqa: BLE001 - any user error aborts and names the record
                raise ProcessError(
                    f"process raised {type(exc).__name__}: {exc}",
                    topic=self.topic,
                    partition=self.partition,
                    offset=offset,
                ) from exc
        # An output without its own topic / partition takes the row's column, else the config's topic.
        row_topic = _at(row, layout.out_topic) if layout.out_topic is not None else self.config.output_topic
        row_partition = _at(row, layout.out_partition) if layout.out_partition is not None else None
        produced = 0
        for out in outs:
            if out.partition is None and row_partition is not None:
                out.partition = row_partition
            self.producer.produce(out, out.topic or row_topic, self.topic, self.partition, offset)
            produced += 1
        self.checkpoint.mark(offset, produced)

    def _commit(self) -> None:
        if self.checkpoint.records == 0:  # everything pending was committed by the incarnation we fenced
            self.checkpoint.abort()
            self.checkpoint = None
            return
        seconds = self.checkpoint.commit()
        self.stats.transactions += 1
        self.stats.records_out += self.checkpoint.outputs
        self.stats.commit_seconds_total += seconds
        self.stats.commit_seconds_max = max(self.stats.commit_seconds_max, seconds)
        self.stats.last_offset = self.checkpoint.last_offset
        self.committed = self.checkpoint.last_offset + 1
        if self.on_commit is not None:
            self.on_commit(
                Commit(
                    app_id=self.config.app_id,
                    topic=self.topic,
                    partition=self.partition,
                    offset=self.committed,
                    batch_id=self.batch_id,
                    transactional_id=self.stats.transactional_id,
                    records=self.checkpoint.records,
                    outputs=self.checkpoint.outputs,
                    seconds=seconds,
                )
            )
        self.pending = []
        self.checkpoint = None


def run_partition(
    config: Config,
    batch_id: int,
    layout: Layout,
    process: Process | None,
    rows: Iterator[Any],
    *,
    stores: dict[str, StoreSpec] | None = None,
    on_commit: OnCommit | None = None,
) -> Iterator[dict[str, Any]]:
    """`mapPartitions` function: one PartitionTask per contiguous (topic, partition) run.

    Afterwards, trims the worker's import caches so that PySpark's set-up of its next task is cheap
    (see `eos._worker`).
    """
    try:
        topic_at, partition_at = layout.topic, layout.partition
        for (topic, partition), tp_rows in itertools.groupby(
            rows, key=lambda row: (_at(row, topic_at), _at(row, partition_at))
        ):
            task = PartitionTask(config, topic, partition, batch_id, layout, process, stores, on_commit)
            yield attrs.asdict(task.run(tp_rows))
    finally:
        _worker.trim_import_caches()
