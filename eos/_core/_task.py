"""Executor side: write the rows of one input topic-partition of one micro-batch, steps 1-8 of
docs/protocol.md.

`run_partition` is the sink's `mapInArrow` function (D4). Its Arrow batches hold each input
topic-partition as one run in offset order (`eos._core._arrow.tp_runs` checks it); each run is one
`PartitionTask`: steps 1-4 start an incarnation (`_start_incarnation`), step 5 skips what is committed
(`_skip`), step 6 writes, step 7 is `Checkpoint.commit()`, and `_guarded` applies the error rules of
step 8.

Rows stay Arrow. They are written a chunk at a time (at most one Arrow batch, and never more than the
open transaction may still take): pass-through chunks in bulk, `process(row, state)` on row views,
`process_batch(batch, state)` on the chunk itself. The open transaction's input is kept as Arrow slices
for a redo: at most `commit_every` rows, and at most one Arrow batch beyond `commit_max_bytes`.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import pyarrow as pa

from eos import _crash
from eos._core import _arrow, _input, _rows, _worker
from eos._core._arrow import Layout
from eos._core._checkpoint import Checkpoint
from eos._core._deadletter import DeadLetters
from eos._core._scope import PartitionScope
from eos._kafka import _offsets, _schemas
from eos._kafka import _producer as producers
from eos.config import Config
from eos.errors import (
    ConfigError,
    DeliveryFailedError,
    FatalError,
    FencedError,
    OffsetsUnstableError,
    OutputTypeError,
    ProcessError,
    ProduceError,
    RecordError,
    TransactionAbortableError,
    TransactionTimeoutError,
)
from eos.records import Outputs, outputs_of
from eos.state import State, StoreSpec
from eos.state._partition import PartitionState

Process = Callable[[Any, Any], Any]
ProcessBatch = Callable[[pa.RecordBatch, Any], Any]


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
    #: bad records written to the dead-letter topic (committed), on_error="dead_letter"
    dead_letters: int = 0


#: The one row per input partition that each task returns to the driver (`mapInArrow`'s output): the
#: fields of PartitionStats, a Kafka partition number as Spark's int, every other int as bigint.
_SQL_TYPES = {
    "str": ("string", pa.string()),
    "int": ("bigint", pa.int64()),
    "float": ("double", pa.float64()),
}
_STATS_COLUMNS = {
    f.name: ("int", pa.int32()) if f.name == "partition" else _SQL_TYPES[f.type.removesuffix(" | None")]
    for f in attrs.fields(PartitionStats)
}
#: the figures that add up over a batch's partitions: PartitionStats' counts (its ints that start at 0)
COUNTS = tuple(f.name for f in attrs.fields(PartitionStats) if f.type == "int" and f.default == 0)
STATS_SCHEMA = pa.schema([(name, arrow) for name, (_, arrow) in _STATS_COLUMNS.items()])
STATS_DDL = ", ".join(f"{name} {sql}" for name, (sql, _) in _STATS_COLUMNS.items())


def totals(stats: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Each of COUNTS summed over a batch's stats rows (one per input partition, or per part)."""
    return {name: sum(row[name] for row in stats) for name in COUNTS}


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
    #: of `records`, how many went to the dead-letter topic instead (on_error="dead_letter")
    dead_letters: int = 0


OnCommit = Callable[[Commit], None]

_STORE_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


@attrs.frozen
class Functions:
    """A sink's functions and the stores they use, as every entry point takes them (`eos.sink`,
    `eos.register`, `eos.foreach_writer`): checked once (`of`), then carried by each Job."""

    process: Process | None = None
    process_batch: ProcessBatch | None = None
    stores: dict[str, StoreSpec] = attrs.field(factory=dict)
    on_commit: OnCommit | None = None
    #: what a struct value of a row `process` sees becomes: Spark's `Row`, handed in by each entry point
    struct: _rows.Struct = dict

    @classmethod
    def of(
        cls,
        process: Process | None = None,
        process_batch: ProcessBatch | None = None,
        stores: Mapping[str, StoreSpec | str] | None = None,
        on_commit: OnCommit | None = None,
        struct: _rows.Struct = dict,
    ) -> Functions:
        """Checked: one of process / process_batch, store names that can name topics and files, and
        each store as a StoreSpec (a value serde name stands for one)."""
        if process is not None and process_batch is not None:
            raise ValueError("pass process= (one row at a time) or process_batch= (Arrow batches), not both")
        specs = {
            name: spec if isinstance(spec, StoreSpec) else StoreSpec(value_serde=spec)
            for name, spec in (stores or {}).items()
        }
        for name in specs:
            if not isinstance(name, str) or not _STORE_NAME.match(name) or len(name) > 100:
                raise ConfigError(
                    "stores",
                    f"store name {name!r} must be 1-100 characters of letters, digits, '.', '_' or '-' (it"
                    " names the store's changelog topic and files)",
                )
        if specs and process is None and process_batch is None:
            raise ValueError("state stores are used by a process function: pass process= or process_batch=")
        return cls(process, process_batch, specs, on_commit, struct)

    @property
    def any(self) -> bool:
        """Whether a function sees the rows (else the rows are the outputs, passed through)."""
        return self.process is not None or self.process_batch is not None


@attrs.frozen
class Job:
    """Everything a task needs to write one micro-batch; built by the sink, shipped to the executors."""

    config: Config
    batch_id: int
    layout: Layout
    functions: Functions = attrs.field(factory=Functions)
    #: whether a task checks that no input before its first row of a partition reached another task
    #: (`format("eos")`, which cannot regroup; see `eos._core._input`)
    check_input: bool = False
    #: with `check_input`: a partition with nothing committed fails instead of trusting the source's
    #: start (the Connect sink, which regroups the batch instead)
    start_known: bool = False
    #: the streaming query's id, which `batch_id` belongs to (`format("eos")`)
    query: str | None = None
    #: what each row's input coordinates are checked against before anything is written or skipped
    #: (`eos._core._input.check_rows`); None: the caller built the rows itself (tests, tools)
    provenance: _input.Provenance | None = None


DISPLACED = "kept producer was fenced by a newer incarnation; starting a fresh one"


class PartitionTask:
    """The protocol for one input topic-partition of one micro-batch (docs/protocol.md, steps 1-8)."""

    def __init__(self, job: Job, topic: str, partition: int) -> None:
        self.job = job
        self.scope = scope = PartitionScope.of(job.config, topic, partition, job.batch_id, job.query)
        self.config = job.config
        self.layout = job.layout
        self.topic = topic
        self.partition = partition
        self.log = scope.log
        self.stats = PartitionStats(topic, partition, scope.transactional_id)
        self.producer: producers.OutputProducer | None = None
        self.reused = False
        #: the committed offset a kept producer has yet to prove itself current with (step 2)
        self.unchecked: _offsets.Committed | None = None
        self.committed: int | None = None
        #: the offset of the last row fed so far (the checks of `check_input`)
        self.seen: int | None = None
        self.pending: list[pa.RecordBatch] = []  # input of the open transaction, kept for a redo
        self.checkpoint: Checkpoint | None = None
        self.state: PartitionState | None = None
        self.view = State({})
        self.started = time.monotonic()
        #: on_error="dead_letter": the bad records found so far, written as dead letters from then on
        self.dead = DeadLetters.of(job.config, topic, partition, job.batch_id)
        #: call process_batch one row at a time (it raised over several rows; until the next commit)
        self.one_by_one = False
        #: value_serializer / key_serializer: the worker's Schema Registry serializers
        self.serializers = _schemas.Serializers.of(job.config)

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
        if first is not None and self.job.check_input:
            self.scope = attrs.evolve(self.scope, first=_arrow.first_offset(first, self.layout))
        self._start_incarnation(reuse=True)  # steps 1-4
        if first is not None and self.job.check_input:
            _input.require_contiguous(self.scope, self.committed, self.job.start_known)
        _crash.point("before_produce")  # F1

    def feed(self, run: pa.RecordBatch) -> None:
        """Steps 5-7 for the next run of rows: what is new is written, committed whenever due."""
        self.stats.records_in += run.num_rows
        if self.job.check_input and run.num_rows:
            self.seen = _input.require_no_gaps(self.scope, run, self.layout, self.seen)
        run = self._skip(run)  # step 5: rows already written open no transaction
        position = 0
        while position < run.num_rows:  # steps 6, 7
            room = self.config.commit_every - (self.checkpoint.records if self.checkpoint else 0)
            chunk = run.slice(position, min(run.num_rows - position, room))
            position += self._guarded(lambda chunk=chunk: self._write_new(chunk))
            if self.checkpoint is not None and self.checkpoint.due():
                self._guarded(self._commit)

    def commit_if_due(self) -> None:
        """Commit the open transaction if it is due (`Checkpoint.due`): for a writer that is handed rows
        and sees time pass between them (`eos._spark._realtime`)."""
        if self.checkpoint is not None and self.checkpoint.due():
            self._guarded(self._commit)

    def finish(self) -> PartitionStats:
        """Commit what is open; hand the producer back to the worker's cache."""
        if self.checkpoint is not None:
            self._guarded(self._commit)
        self._close_state()
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
            seconds=round(time.monotonic() - self.started, 3),
        )
        return self.stats

    def fail(self) -> None:
        """After an error: the producer is thrown away (its transaction dies with it), the state closed."""
        if self.producer is not None:
            producers.discard(self.producer)
            self.producer = None
        self._close_state()

    def _close_state(self) -> None:
        if self.state is not None:
            self.stats.restored = self.state.restored
            self.state.close()
            self.state = None

    def _start_incarnation(self, reuse: bool) -> None:
        """Steps 1-4, and step 5 for the open transaction's kept input: a producer (the worker's kept
        one if `reuse`, else a fresh one) that has fenced every older incarnation, the committed offset,
        the state recovered to it. Run at task start and again when a kept producer turns out displaced;
        the open transaction (if any) is then gone, and its kept input loses the rows now committed."""
        tid = self.scope.transactional_id
        if reuse:
            self.producer, self.reused = producers.acquire(self.config, tid)
        else:
            self.producer, self.reused = producers.OutputProducer(self.config, tid), False
        if self.config.exactly_once and not self.producer.initialized:
            self.producer.init_transactions(self.log, known_topic=self.topic)  # step 2
        tp = (self.topic, self.partition)
        kept = self.reused and self.config.exactly_once
        try:
            entries = _offsets.committed_entries(self.config, [tp], self.log, wait=not kept)  # step 3
        except OffsetsUnstableError:
            # Step 2 for a kept producer: it was initialised in an earlier task and cannot end another
            # incarnation's open transaction (a worker killed between its offsets and its commit holds
            # the offset until transaction.timeout.ms). A fresh producer's init_transactions does.
            self._replace_kept(
                "an open transaction holds the committed offset: fencing it with a fresh producer"
            )
            return
        self.committed = _offsets.check_stamps(self.config, entries).get(tp)
        if self.job.check_input:
            _input.require_unshared(self.scope, entries.get(tp))
        # Step 2 for a kept producer, done by the first transaction (`_begin`): not before the task's
        # own checks, which may fail it, and a producer thrown away with a transaction open on the
        # partition's offset would hold every stable read of it until transaction_timeout_ms.
        self.unchecked = entries.get(tp) if kept else None
        self.stats.committed_before = self.committed
        if self.job.functions.stores:  # step 4
            if self.state is None:
                self.state = PartitionState(self.scope, self.job.functions.stores)
                self.state.open(self.committed)
                self.view = self.state.view
            else:
                self.state.reopen(self.committed)
            self.stats.restored = self.state.restored
        self.pending = [s for s in (self._skip(s) for s in self.pending) if s.num_rows]
        self.checkpoint = None

    def _check_current(self, entry: _offsets.Committed) -> None:
        """Step 2 for a kept producer: it fenced every older incarnation when it was initialised, unless
        a producer of another worker was initialised for this partition since (Spark hands a partition's
        next task to whichever worker is free). It learns that only from a call to the transaction
        coordinator, so its first transaction begins by sending the committed offset into it unchanged
        (step 7c replaces it in the same transaction): a displaced producer is refused there (FencedError,
        8d), not after producing the rows."""
        self.producer.begin_transaction(self.log)
        offset = (self.topic, self.partition, entry.offset, entry.metadata)
        self.producer.send_offsets([offset], _offsets.group_metadata(self.config), self.log)

    def _replace_kept(self, why: str, exc: Exception | None = None) -> None:
        """Steps 1-4 again with a fresh producer, whose init_transactions fences the others."""
        self.log.info(why, **({} if exc is None else {"error": str(exc)}))
        producers.discard(self.producer)
        self.producer = None
        self.stats.producers_replaced += 1
        self._start_incarnation(reuse=False)

    def _guarded(self, action: Callable[[], Any]) -> Any:
        """Run one action of the open transaction under the error rules of step 8; its result."""
        redos = 0
        replay = False
        while True:
            try:
                if replay:
                    self._replay()
                elif self.checkpoint is None:
                    self.checkpoint = self._begin()
                return action()
            except TransactionAbortableError as exc:  # 8a
                self._raise_if_timed_out(exc)
                self._abort(exc)
                if not self.producer.exact:
                    # A bulk write does not know which record a failed delivery came from (exactly_once
                    # learns of it only from the commit): redo record by record, which names it. This
                    # redo does not count against max_redo.
                    self.producer.exact = True
                elif redos >= self.config.max_redo or isinstance(exc, DeliveryFailedError):
                    raise
                else:
                    redos += 1
                self.stats.redos += 1
                self.log.warning(
                    "redoing transaction record by record", attempt=redos, rows=self._pending_rows()
                )
                replay = True
            except RecordError as exc:  # 8b
                try:
                    self._abort(exc)
                except FatalError as abort_failure:
                    # The producer died aborting; the record's error is still the one to report
                    # (the next incarnation's init_transactions ends the transaction).
                    self.log.error("abort failed", error=str(abort_failure))
                    raise exc from None
                found = exc
                if isinstance(exc, ProduceError) and len(exc.candidates) > 1:
                    found = self._isolate(exc)
                    if found is exc:
                        raise found from None
                if not self._dead_letter(found):
                    if found is exc:
                        raise
                    raise found from exc
                replay = True
            except FencedError as exc:  # 8c, or 8d for a kept producer
                self._raise_if_timed_out(exc)
                if not (self.reused and self.stats.transactions == 0):
                    self.log.error("fenced: this attempt is a zombie", error=str(exc))
                    raise
                # A kept producer displaced by another worker (found by step 2's check, or by a write
                # where there was no committed offset to check with): take the partition back once.
                self._replace_kept(DISPLACED, exc)
                replay = True
            except FatalError as exc:  # 8c
                self._raise_if_timed_out(exc)
                self.log.error("fatal producer error", error=str(exc))
                raise

    def _dead_letter(self, exc: RecordError) -> bool:
        """8b with on_error="dead_letter": whether the transaction is to be written again with `exc`'s
        record as a dead letter (or, where process_batch raised over several rows, one row at a time to
        find it). Raises past max_dead_letters_per_batch."""
        if self.dead is None or not exc.poison:
            return False
        through = getattr(exc, "through", None)
        if through is not None and through != exc.offset and self.job.functions.process_batch is not None:
            self.one_by_one = True
            self.log.warning("process_batch raised: calling it one row at a time", error=str(exc))
            return True
        self.dead.add(exc)
        self.log.warning("dead-lettering record", offset=exc.offset, error=exc.reason)
        return True

    def _raise_if_timed_out(self, exc: Exception) -> None:
        """8e: a transaction open longer than transaction.timeout.ms was aborted by the broker, which fences
        its producer: the attempt is not a zombie, and redoing it as slowly would fail again."""
        if self.checkpoint is None or isinstance(exc, TransactionTimeoutError):
            return
        seconds = self.checkpoint.age()
        if seconds * 1000 < self.config.transaction_timeout_ms:
            return
        self.log.error("transaction outlived transaction.timeout.ms", seconds=round(seconds, 1))
        raise TransactionTimeoutError(
            f"the transaction of input partition {self.topic}/{self.partition} was open for {seconds:.1f}s,"
            f" longer than transaction_timeout_ms ({self.config.transaction_timeout_ms}), and the broker"
            f" aborted it ({exc}). Make process faster, commit more often (commit_every,"
            " commit_interval_ms, commit_max_bytes) or raise transaction_timeout_ms (at most the"
            " broker's transaction.max.timeout.ms). (A task stopped that long, by a GC pause or a"
            " suspended host, ends the same way; Spark's retry redoes it.)",
            kafka_error=getattr(exc, "kafka_error", None),
        ) from exc

    def _isolate(self, exc: ProduceError) -> ProduceError:
        """One refusal hit the outputs of several input records: a broker refuses a whole record batch
        when one record in it is too large for the topic. Write each suspect alone, in a transaction
        that is then aborted, and name the one refused on its own. (at_least_once has no transaction to
        abort: a suspect that is accepted alone is written once more.)"""
        self.log.warning("finding the refused record", suspects=len(exc.candidates), error=str(exc))
        for offset in exc.candidates:
            row = self._pending_row(offset)
            if row is None:
                continue
            for _ in range(3):
                self.checkpoint = self._begin()
                try:
                    self._write(row, may_stop=False)
                    self.producer.flush_and_check(self.topic, self.partition)
                except ProduceError as alone:
                    self._abort(alone)
                    return alone
                except TransactionAbortableError as undecided:
                    # librdkafka purges the first record produced after an abort that followed a
                    # refused batch (_PURGE_QUEUE, seen with 2.12): no verdict, write it again.
                    self._abort(undecided)
                    continue
                self._abort(exc)
                break
        return exc

    def _pending_row(self, offset: int) -> pa.RecordBatch | None:
        for chunk in self.pending:
            offsets = chunk.column(self.layout.offset)
            if offsets[0].as_py() <= offset <= offsets[len(offsets) - 1].as_py():
                index = _arrow.index_of(offsets, offset)
                if index is not None:
                    return chunk.slice(index, 1)
        return None

    def _pending_rows(self) -> int:
        return sum(s.num_rows for s in self.pending)

    def _replay(self) -> None:
        """Begin a new transaction and write the open transaction's input again."""
        self.checkpoint = self._begin()
        for chunk in self.pending:
            self._write(chunk, may_stop=False)
            self.checkpoint.input_bytes += chunk.nbytes

    def _begin(self) -> Checkpoint:
        if self.unchecked is not None:
            entry, self.unchecked = self.unchecked, None
            self._check_current(entry)
        return Checkpoint(self.scope, self.producer, self.state)

    def _abort(self, exc: BaseException) -> None:
        self.stats.aborted += 1
        self.log.warning("aborting transaction", error=str(exc), rows=self._pending_rows())
        if self.checkpoint is not None:
            self.checkpoint.abort()
        self.checkpoint = None
        if self.state is not None:
            self.state.reopen(self.committed)  # the aborted writes must not survive

    # -- writing rows --------------------------------------------------------------------------------

    def _skip(self, chunk: pa.RecordBatch) -> pa.RecordBatch:
        """Step 5, the one place it is done: `chunk` without its rows below the committed offset
        (already written), counting them."""
        n = _arrow.below(chunk, self.layout, self.committed)
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
        written = self._write(rest, may_stop=True)
        if self.stats.first_offset is None:
            self.stats.first_offset = _arrow.first_offset(rest, self.layout)
        kept = rest.slice(0, written)
        self.pending.append(kept)
        self.checkpoint.input_bytes += kept.nbytes
        return done + written

    def _write(self, chunk: pa.RecordBatch, may_stop: bool) -> int:
        """Produce the outputs of `chunk` into the open transaction; returns the rows written."""
        if self.job.functions.process is not None:
            return self._write_rows(chunk, may_stop)
        last = _arrow.last_offset(chunk, self.layout)
        rows, dead = self.dead.split(chunk, self.layout) if self.dead is not None else (chunk, None)
        step = 1 if self.one_by_one else max(rows.num_rows, 1)
        produced = sum(self._write_outputs(rows.slice(at, step)) for at in range(0, rows.num_rows, step))
        letters = self._write_dead(dead) if dead is not None else 0
        self.checkpoint.mark(last, chunk.num_rows, produced, letters)
        return chunk.num_rows

    def _write_outputs(self, rows: pa.RecordBatch) -> int:
        """The outputs of pass-through rows or of one process_batch call over them; how many."""
        if self.job.functions.process_batch is not None:
            outputs = self._call_process_batch(rows, _arrow.last_offset(rows, self.layout))
        else:
            outputs = _arrow.passthrough(rows, self.layout, self.config.output_topic)
        if self.serializers is not None:
            outputs = self.serializers.outputs(outputs, self.topic, self.partition)
        return self.producer.produce_outputs(outputs, self.topic, self.partition)

    def _write_dead(self, rows: pa.RecordBatch) -> int:
        """The dead letters of `rows` (every one a dead record), into the open transaction; how many."""
        passthrough = not self.job.functions.any
        offsets = rows.column(self.layout.offset).to_pylist()
        for i, offset in enumerate(offsets):
            letter = self.dead.letter(rows.slice(i, 1), offset, passthrough)
            self.producer.produce(letter, self.config.dead_letter_topic, self.topic, self.partition, offset)
        return len(offsets)

    def _call_process_batch(self, chunk: pa.RecordBatch, last: int) -> Outputs:
        first = _arrow.first_offset(chunk, self.layout)
        if self.state is not None:
            self.state.set_input_offset(last)
        try:
            result = self.job.functions.process_batch(chunk, self.view)
        except Exception as exc:  # noqa: BLE001 - any user error aborts and names the records
            caller = f"process_batch over input offsets {first}-{last}" if last != first else "process_batch"
            raise self._process_error(caller, exc, first, through=last) from exc
        return _arrow.batch_outputs(
            result,
            default_topic=self.config.output_topic,
            topic=self.topic,
            partition=self.partition,
            first=first,
            last=last,
            serialized=_schemas.serialized_fields(self.config),
        )

    def _process_error(
        self, caller: str | None, exc: Exception, offset: int, through: int | None = None
    ) -> ProcessError:
        """8b: the user's function raised (`caller`), or returned an output Kafka cannot carry (None)."""
        message = str(exc) if caller is None else f"{caller} raised {type(exc).__name__}: {exc}"
        return ProcessError(
            message, topic=self.topic, partition=self.partition, offset=offset, through=through
        )

    def _write_rows(self, chunk: pa.RecordBatch, may_stop: bool) -> int:
        """`process(row, state)` for each row; stops early when the transaction is due (`may_stop`)."""
        process, view, producer, state = self.job.functions.process, self.view, self.producer, self.state
        serializers = self.serializers
        layout, checkpoint = self.layout, self.checkpoint
        offsets = chunk.column(layout.offset).to_pylist()
        row_topics = chunk.column(layout.out_topic).to_pylist() if layout.out_topic else None
        row_partitions = chunk.column(layout.out_partition).to_pylist() if layout.out_partition else None
        default_topic = self.config.output_topic
        dead = self.dead.found if self.dead is not None else {}
        for i, row in enumerate(_rows.rows(chunk, self.job.functions.struct)):
            offset = offsets[i]
            if offset in dead:
                checkpoint.mark(offset, 1, 0, self._write_dead(chunk.slice(i, 1)))
                if may_stop and checkpoint.due():
                    return i + 1
                continue
            if state is not None:
                state.set_input_offset(offset)
            try:
                outs = list(outputs_of(process(row, view)))
            except OutputTypeError as exc:
                raise self._process_error(None, exc, offset) from exc
            except Exception as exc:  # noqa: BLE001 - any user error aborts and names the record
                raise self._process_error("process", exc, offset) from exc
            # An output without its own topic / partition takes the row's column, else the config's topic.
            row_topic = row_topics[i] if row_topics is not None else default_topic
            row_partition = row_partitions[i] if row_partitions is not None else None
            for out in outs:
                if out.partition is None and row_partition is not None:
                    out.partition = row_partition
                if serializers is not None:
                    serializers.record(out, out.topic or row_topic, self.topic, self.partition, offset)
                producer.produce(out, out.topic or row_topic, self.topic, self.partition, offset)
            checkpoint.mark(offset, 1, len(outs))
            if may_stop and checkpoint.due():
                return i + 1
        return chunk.num_rows

    def _commit(self) -> None:
        if self.checkpoint.records == 0:  # everything pending was committed by the incarnation we fenced
            self.checkpoint.abort()
            self.checkpoint = None
            return
        seconds = self.checkpoint.commit()
        self.producer.exact = False  # a record-by-record redo lasts one transaction
        self.one_by_one = False
        self.stats.transactions += 1
        self.stats.records_out += self.checkpoint.outputs
        self.stats.dead_letters += self.checkpoint.dead_letters
        self.stats.commit_seconds_total += seconds
        self.stats.commit_seconds_max = max(self.stats.commit_seconds_max, seconds)
        self.stats.last_offset = self.checkpoint.last_offset
        self.committed = self.checkpoint.last_offset + 1
        if self.job.functions.on_commit is not None:
            self.job.functions.on_commit(
                Commit(
                    app_id=self.config.app_id,
                    topic=self.topic,
                    partition=self.partition,
                    offset=self.committed,
                    batch_id=self.job.batch_id,
                    transactional_id=self.stats.transactional_id,
                    records=self.checkpoint.records,
                    outputs=self.checkpoint.outputs,
                    seconds=seconds,
                    dead_letters=self.checkpoint.dead_letters,
                )
            )
        self.pending = []
        self.checkpoint = None


def run_partition(
    job: Job, batches: Iterator[pa.RecordBatch], task_partition: int = -1
) -> Iterator[pa.RecordBatch]:
    """One PartitionTask per input topic-partition run of a Spark task's batches; yields its stats row.
    Each batch's input coordinates are checked first (`eos._core._input.check_rows`; `task_partition`, the
    Spark partition the task read, names the task in what it finds; -1: not known).

    Afterwards, trims the worker's import caches so that PySpark's set-up of its next task is cheap
    (see `eos._core._worker`).
    """
    checked = _input.checked_batches(batches, job.layout, job.provenance, task_partition)
    try:
        for (topic, partition), runs in itertools.groupby(
            _arrow.tp_runs(checked, job.layout), key=lambda item: item[0]
        ):
            stats = PartitionTask(job, topic, partition).run(run for _, run in runs)
            yield pa.RecordBatch.from_pylist([attrs.asdict(stats)], schema=STATS_SCHEMA)
    finally:
        _worker.trim_import_caches()
