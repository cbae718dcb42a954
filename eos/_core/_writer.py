"""Step 6 of docs/protocol.md: a chunk of one input partition's rows written into the open transaction,
in the style the job's functions call for — pass-through columns in bulk, `process_batch(batch, state)`
on the chunk, `process(row, state)` on row views — and the dead letters of records found bad (8b).

Rows stay Arrow: a chunk is at most one Arrow batch, and never more than the open transaction may still
take."""

from __future__ import annotations

from typing import Any, Protocol

import pyarrow as pa

from eos._core import _arrow, _rows
from eos._core._deadletter import DeadLetters
from eos._core._spec import TaskSpec
from eos._core._transaction import Transaction
from eos._registry import _decoders, _serializers
from eos._scope import PartitionScope
from eos.errors import DeserializationError, OutputTypeError, ProcessError, ProduceError, RecordError
from eos.records import Outputs, outputs_of


class Target(Protocol):
    """What rows are written through: the producer of the moment (a task replaces it after a fence or a
    failure), and the state the functions see (an input partition's `Incarnation`; a part has none)."""

    @property
    def producer(self) -> Any: ...

    state: Any
    view: Any


class Writer:
    """The outputs of one input partition's (or part's) rows, produced through its target's producer."""

    def __init__(self, job: TaskSpec, scope: PartitionScope, incarnation: Target) -> None:
        self.job = job
        self.config = job.config
        self.layout = job.layout
        self.functions = job.functions
        self.topic = scope.topic
        self.partition = scope.partition
        self.log = scope.log
        self.incarnation = incarnation
        #: on_error="dead_letter": the bad records found so far, written as dead letters from then on
        self.dead = DeadLetters.of(job.config, scope.topic, scope.partition, job.batch_id)
        #: call process_batch one row at a time (it raised over several rows; until the next commit)
        self.one_by_one = False
        #: value_serializer / key_serializer: the worker's Schema Registry serializers
        self.serializers = _serializers.Serializers.of(job.config)
        #: value_deserializer / key_deserializer: the input's key and value read before anything sees them
        self.deserializers = _decoders.Deserializers.of(job.config)

    def write(self, chunk: pa.RecordBatch, transaction: Transaction, may_stop: bool) -> int:
        """Produce the outputs of `chunk` into `transaction`; returns the rows written (fewer than all
        only where `process` made the transaction due mid-chunk and `may_stop`)."""
        read = self._read(chunk)
        if self.functions.process is not None:
            return self._write_rows(chunk, read, transaction, may_stop)
        last = _arrow.last_offset(chunk, self.layout)
        rows, dead = self.dead.split(read, self.layout) if self.dead is not None else (read, None)
        if dead is not None and read is not chunk:
            _, dead = self.dead.split(chunk, self.layout)  # a dead letter carries the input as it came
        step = 1 if self.one_by_one else max(rows.num_rows, 1)
        produced = sum(self._write_outputs(rows.slice(at, step)) for at in range(0, rows.num_rows, step))
        letters = self._write_dead(dead) if dead is not None else 0
        transaction.mark(last, chunk.num_rows, produced, letters)
        return chunk.num_rows

    def dead_letter(self, exc: RecordError) -> bool:
        """8b with on_error="dead_letter": whether the transaction is to be written again with `exc`'s
        record as a dead letter (or, where that record is not known yet (`untraced`), one row per
        process_batch call to find it). Raises past max_dead_letters_per_batch."""
        if not self.may_dead_letter(exc):
            return False
        if self.untraced(exc):
            self.one_by_one = True
            self.log.warning(
                "process_batch: calling it one row at a time to find the bad row", error=str(exc)
            )
            return True
        self.dead.add(exc)
        self.log.warning("dead-lettering record", offset=exc.offset, error=exc.reason)
        return True

    def may_dead_letter(self, exc: RecordError) -> bool:
        """Whether 8b writes the transaction again with `exc`'s record dead (or to find it)."""
        return self.dead is not None and exc.poison

    def untraced(self, exc: RecordError) -> bool:
        """Whether `exc`'s row is unknown until process_batch is called one row at a time (on_error=
        "dead_letter"): it raised over several rows (`through`), or an output of it was refused. A refused
        output carries its call's first offset (`Outputs.offset_of`; a changelog record, its last), not
        its row's: dead-lettering that row would lose its good outputs and blame the next row, and
        `_isolate` cannot narrow such offsets either. (One naming a dead row is its dead letter refused.)"""
        if self.dead is None or not exc.poison or self.functions.process_batch is None or self.one_by_one:
            return False
        if isinstance(exc, ProduceError):
            return exc.offset not in self.dead.found
        through = getattr(exc, "through", None)
        return through is not None and through != exc.offset

    def _write_outputs(self, rows: pa.RecordBatch) -> int:
        """The outputs of pass-through rows or of one process_batch call over them; how many."""
        if self.functions.process_batch is not None:
            outputs = self._call_process_batch(rows, _arrow.last_offset(rows, self.layout))
        else:
            outputs = _arrow.passthrough(rows, self.layout, self.config.output_topic)
        if self.serializers is not None:
            outputs = self.serializers.outputs(outputs, self.topic, self.partition)
        return self.incarnation.producer.records.produce_outputs(outputs, self.topic, self.partition)

    def _read(self, chunk: pa.RecordBatch) -> pa.RecordBatch:
        """`chunk` with its key / value read by the deserializers; a row that cannot be read is a bad
        record (8b): with on_error="dead_letter" dead from now on, else the batch fails naming it."""
        if self.deserializers is None:
            return chunk
        read, unreadable = self.deserializers.read(chunk)
        if unreadable:
            offsets = chunk.column(self.layout.offset).to_pylist()
            for row, why in unreadable.items():
                offset = offsets[row]
                if self.dead is not None and offset in self.dead.found:
                    continue
                exc = DeserializationError(why, topic=self.topic, partition=self.partition, offset=offset)
                if self.dead is None:
                    raise exc
                self.dead.add(exc)
                self.log.warning("dead-lettering record", offset=offset, error=why)
        return read

    def _write_dead(self, rows: pa.RecordBatch) -> int:
        """The dead letters of `rows` (every one a dead record), into the open transaction; how many."""
        passthrough = not self.functions.any
        records = self.incarnation.producer.records
        offsets = rows.column(self.layout.offset).to_pylist()
        for i, offset in enumerate(offsets):
            letter = self.dead.letter(rows.slice(i, 1), offset, passthrough)
            records.produce(letter, self.config.dead_letter_topic, self.topic, self.partition, offset)
        return len(offsets)

    def _call_process_batch(self, chunk: pa.RecordBatch, last: int) -> Outputs:
        first = _arrow.first_offset(chunk, self.layout)
        state = self.incarnation.state
        if state is not None:
            state.set_input_offset(last)
        try:
            result = self.functions.process_batch(chunk, self.incarnation.view)
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
            serialized=_serializers.serialized_fields(self.config),
        )

    def _process_error(
        self, caller: str | None, exc: Exception, offset: int, through: int | None = None
    ) -> ProcessError:
        """8b: the user's function raised (`caller`), or returned an output Kafka cannot carry (None)."""
        message = str(exc) if caller is None else f"{caller} raised {type(exc).__name__}: {exc}"
        return ProcessError(
            message, topic=self.topic, partition=self.partition, offset=offset, through=through
        )

    def _write_rows(
        self, chunk: pa.RecordBatch, read: pa.RecordBatch, transaction: Transaction, may_stop: bool
    ) -> int:
        """`process(row, state)` for each row of `read` (`chunk` with its key / value deserialized); stops
        early when the transaction is due (`may_stop`). A dead letter carries the row of `chunk`."""
        process, view = self.functions.process, self.incarnation.view
        records, state = self.incarnation.producer.records, self.incarnation.state
        serializers, layout = self.serializers, self.layout
        offsets = chunk.column(layout.offset).to_pylist()
        row_topics = chunk.column(layout.out_topic).to_pylist() if layout.out_topic else None
        row_partitions = chunk.column(layout.out_partition).to_pylist() if layout.out_partition else None
        row_stamps = (
            _arrow.timestamps_ms(chunk.column(layout.out_timestamp)) if layout.out_timestamp else None
        )
        default_topic = self.config.output_topic
        dead = self.dead.found if self.dead is not None else {}
        for i, row in enumerate(_rows.rows(read, self.functions.struct)):
            offset = offsets[i]
            if offset in dead:
                transaction.mark(offset, 1, 0, self._write_dead(chunk.slice(i, 1)))
                if may_stop and transaction.due():
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
            # An output without its own topic / partition / timestamp takes the row's column, else the
            # config's topic.
            row_topic = row_topics[i] if row_topics is not None else default_topic
            row_partition = row_partitions[i] if row_partitions is not None else None
            row_stamp = row_stamps[i] if row_stamps is not None else None
            for out in outs:
                if out.partition is None and row_partition is not None:
                    out.partition = row_partition
                if out.timestamp is None and row_stamp is not None:
                    out.timestamp = row_stamp
                if serializers is not None:
                    serializers.record(out, out.topic or row_topic, self.topic, self.partition, offset)
                records.produce(out, out.topic or row_topic, self.topic, self.partition, offset)
            transaction.mark(offset, 1, len(outs))
            if may_stop and transaction.due():
                return i + 1
        return chunk.num_rows
