"""Checks on the input coordinates a task receives, before anything of an input partition is written or
skipped: eos commits each input partition's offsets from the rows' `topic`, `partition` and `offset`
columns and skips the rows below what is committed, so rows that name another record than their own
would be written under, or skipped as, the wrong input.

**Coordinates are the records' own** (`check_rows`, every API). Each row is compared with what Spark's
Kafka source read: in classic `foreachBatch`, the offset range of the Spark partition it was read in,
from the batch's lineage (`eos._spark._partitioning`; where the sink regroups rows, a column added before the
shuffle says which partition each was read in); through shuffles and unions, the ranges the batch read;
elsewhere (Spark Connect, `format("eos")`, `eos.foreach_writer`: no lineage) the `eos_input` column that
`eos.read_stream` adds, the coordinates as the source read them. A column overwritten (a `partition`
meant as the output partition, as Spark's Kafka sink reads it), or coordinates copied onto rows that are
not that record, raise InputCoordinateError naming the column and the first row that differs.

**One task per input partition** (step 3a). The `foreachBatch` sink regroups a batch so that each input
partition is one run in one task (D3). The `format("eos")` data source cannot: Spark hands it the
query's partitions as they are. Had the Kafka source split an input partition across tasks
(`minPartitions`, `maxRecordsPerPartition`), or a shuffle moved its rows, two tasks would write one
partition in one batch under one transactional id, and a task holding a later piece that committed first
would move the committed offset past the earlier piece, whose rows would then be skipped as already
written: lost.

So every offset such a task commits is stamped with its query, its batch and its first row's offset
(which a retried task or a re-run batch has again; Spark's partition numbers change when a restarted
driver plans the batch again), and a task that finds its partition's offset committed by another task of
the same batch raises `InputOrderError`
instead of skipping the rows below it (they were not that task's: a shuffle interleaved them, or the
source split the partition); the batch fails, and its ledger shows what each task committed. And before
its first transaction such a task looks at the input between the committed offset and its own first row.
A gap that holds no record (commit markers, aborted or compacted records) is what the source skips too;
a record in it reached another task, or the query filtered it out: the task raises `InputOrderError` and
writes nothing. A query that drops input rows on purpose says so (`eos.input.filtered`), which turns the
look off; it must then keep each input partition in one task (no splitting source options, no shuffle).
Where nothing is committed yet there is nothing to look from (where the source started is its
`startingOffsets`, which the sink does not see): `eos.read_stream` commits where partitions without an
offset start, so that this holds from a new app's first batch on.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from eos._core._arrow import Layout, boundaries
from eos._kafka import _offsets, _reads
from eos._scope import PartitionScope
from eos.errors import InputCoordinateError, InputGapError, InputOrderError

#: The column `eos.read_stream` adds: each row's input coordinates as Spark's Kafka source read them.
INPUT_COLUMN = "eos_input"
INPUT_COLUMN_TYPE = "struct<topic:string,partition:int,offset:bigint>"
#: The column the sink adds before it regroups a batch (classic Spark): the Spark partition each row was
#: read in. Tasks drop it with the rest of the columns they do not write.
READ_IN_COLUMN = "_eos_read_in"
_COORDINATES = ("topic", "partition", "offset")
#: What a task refused by step 3a's looks tells the user to do.
_REGROUP_OR_SAY_FILTERED = (
    "write such a stream with foreachBatch(eos.sink(...)), which regroups it. If the query filters input"
    ' rows out on purpose, say so (format("eos"): option eos.input.filtered=true; eos.foreach_writer(...,'
    " input_filtered=True)) and keep each input partition in one task."
)


@attrs.frozen
class SourceRange:
    """Offsets [start, end) of Kafka topic-partition topic/partition, as Spark's Kafka source read them."""

    topic: str
    partition: int
    start: int
    end: int


@attrs.frozen
class Provenance:
    """What a task's rows are checked against (see the module): the range each Spark partition read, by
    partition (`partitions`; each row's partition is the task's own, or `read_in`'s column where the
    rows were regrouped); else the ranges the batch read (`ranges`); else each row's `column`."""

    partitions: tuple[SourceRange, ...] | None = None
    read_in: str | None = None
    ranges: tuple[SourceRange, ...] = ()
    column: str | None = None


def checked_batches(
    batches: Iterable[pa.RecordBatch], layout: Layout, provenance: Provenance | None, task_partition: int
) -> Iterator[pa.RecordBatch]:
    """`batches`, each checked by `check_rows` before it is handed on (without the sink's `read_in`
    column, which only the check reads)."""
    for batch in batches:
        if provenance is None:
            yield batch
            continue
        if batch.num_rows:
            check_rows(batch, layout, provenance, task_partition)
        if provenance.read_in is not None:
            keep = [i for i, name in enumerate(batch.schema.names) if name != provenance.read_in]
            batch = pa.RecordBatch.from_arrays(
                [batch.column(i) for i in keep], schema=pa.schema([batch.schema.field(i) for i in keep])
            )
        yield batch


def check_rows(batch: pa.RecordBatch, layout: Layout, provenance: Provenance, task_partition: int) -> None:
    """Raise InputCoordinateError for the first row whose input coordinates are not those of the record
    Spark read it from (see the module); `task_partition`: the Spark partition this task runs."""
    claimed = [batch.column(name) for name in (layout.topic, layout.partition, layout.offset)]
    if provenance.column is not None:
        column = batch.column(provenance.column)
        # by name (pyarrow < 15 orders a struct's fields by name where it infers them from dicts); the
        # struct's nulls (no record) become nulls
        children = dict(zip((field.name for field in column.type), column.flatten(), strict=True))
        truth = [children[name] for name in _COORDINATES]
        _refuse_first(
            claimed,
            [_differs(c, t) for c, t in zip(claimed, truth, strict=True)],
            layout,
            lambda i: (
                f"the Kafka source read it as {_where(t[i].as_py() for t in truth)}"
                f" (column {provenance.column!r})"
            ),
        )
    elif provenance.partitions is not None:
        sources = provenance.partitions
        if provenance.read_in is None:
            read_in = pa.array([task_partition] * batch.num_rows, pa.int32())
        else:
            read_in = batch.column(provenance.read_in)
        truth = [
            pa.array([s.topic for s in sources], pa.string()).take(read_in),
            pa.array([s.partition for s in sources], pa.int32()).take(read_in),
        ]
        starts = pa.array([s.start for s in sources], pa.int64()).take(read_in)
        ends = pa.array([s.end for s in sources], pa.int64()).take(read_in)
        offset = claimed[2]
        outside = pc.or_(pc.less(offset, starts), pc.greater_equal(offset, ends))
        differs = [_differs(claimed[0], truth[0]), _differs(claimed[1], truth[1]), outside]

        _refuse_first(claimed, differs, layout, lambda i: read_from(sources[read_in[i].as_py()]))
    else:
        _check_ranges(claimed, provenance.ranges, layout)


def _differs(claimed: pa.Array, truth: pa.Array) -> pa.Array:
    return pc.fill_null(pc.not_equal(claimed, truth), True)


def _where(parts) -> str:
    topic, partition, offset = parts
    return "no Kafka record (null)" if topic is None else f"{topic}/{partition}@{offset}"


def _refuse_first(claimed, differs, layout: Layout, truth_of) -> None:
    """Raise for the first row where any of `differs` (topic, partition, offset) is true."""
    anywhere = pc.or_(pc.or_(differs[0], differs[1]), differs[2])
    if not pc.any(anywhere).as_py():
        return
    row = pc.index(anywhere, True).as_py()
    column = next(n for n, d in zip(_COORDINATES, differs, strict=True) if d[row].as_py())
    _raise(claimed, row, column, truth_of(row), layout)


def _check_ranges(claimed, ranges: tuple[SourceRange, ...], layout: Layout) -> None:
    """Through shuffles: each topic-partition a row names must be one the batch read, its offset within."""
    read: dict[tuple[str, int], tuple[int, int]] = {}
    for r in ranges:
        start, end = read.get((r.topic, r.partition), (r.start, r.end))
        read[(r.topic, r.partition)] = (min(start, r.start), max(end, r.end))
    topics, partitions, offsets = claimed
    for start, end in boundaries(topics, partitions):
        tp = (topics[start].as_py(), partitions[start].as_py())
        run = offsets.slice(start, end - start)
        if tp not in read:
            shown = ", ".join(f"{t}/{p}" for t, p in sorted(read)) or "none"
            _raise(
                claimed,
                start,
                "partition",
                f"the batch read no such input partition (it read {shown})",
                layout,
            )
        low, high = read[tp]
        outside = pc.or_(pc.less(run, low), pc.greater_equal(run, high))
        if pc.any(outside).as_py():
            row = start + pc.index(outside, True).as_py()
            _raise(
                claimed, row, "offset", f"the batch read {tp[0]}/{tp[1]} at offsets {low}-{high - 1}", layout
            )


def read_from(source: SourceRange) -> str:
    """What an error says of the Spark partition a row was read in."""
    return (
        f"Spark read it from {source.topic}/{source.partition} (offsets {source.start} to {source.end - 1})"
    )


def _raise(claimed, row: int, column: str, truth: str, layout: Layout) -> None:
    raise coordinate_error(*(c[row].as_py() for c in claimed), column, truth, layout)


def coordinate_error(
    topic, partition, offset, column: str, truth: str, layout: Layout
) -> InputCoordinateError:
    """The error of a row whose `column` ("topic", "partition" or "offset") is not the input coordinate of
    the record it came from (`truth`: what is known of that record)."""
    name = {"topic": layout.topic, "partition": layout.partition, "offset": layout.offset}[column]
    hint = ""
    if column == "partition":
        hint = (
            " If the query sets 'partition' to choose the output partition (Spark's Kafka sink reads it"
            " so), put that in a column of another name and set output_partition_column to it."
        )
    return InputCoordinateError(
        f"column {name!r} does not hold the input coordinate of the record its row came from: a row says"
        f" {topic}/{partition}@{offset}, but {truth}. eos commits each input partition's offsets from"
        " the rows' topic, partition and offset columns, which must be the Kafka source's own (not"
        " overwritten, nor copied onto other rows). Nothing of that input partition was written or"
        f" skipped by this task.{hint}",
        column=name,
        topic=topic,
        partition=partition,
        offset=offset,
    )


def require_contiguous(scope: PartitionScope, committed: int | None, start_known: bool = False) -> None:
    """Raise InputOrderError, before anything is written, when input before the task's first row
    (`scope.first`) did not reach this task (see the module's docstring). `start_known`: where nothing
    is committed, refuse rather than trust the source's start (the sink, which can regroup instead)."""
    if committed is None:
        if start_known:
            raise InputOrderError(
                f"input partition {scope.where}: nothing is committed for it, so nothing shows that this"
                f" task's rows of batch {scope.batch_id}, from offset {scope.first}, are all of its input."
                " Nothing of this partition was written.",
                topic=scope.topic,
                partition=scope.partition,
                offset=scope.first,
            )
        return  # where the source started is its own (startingOffsets), unknown here
    if scope.first <= committed:
        return  # a re-run: the rows up to the committed offset are skipped, the rest follow on
    unseen = _reads.unseen_record(scope.config, scope.topic, scope.partition, committed, scope.first)
    if unseen is None:
        return
    topic, partition, first, batch = scope.topic, scope.partition, scope.first, scope.batch_id
    raise InputOrderError(
        f"input partition {topic}/{partition}: this task's rows of batch {batch} begin at offset {first},"
        f" but input record {unseen} (committed offset: {committed}) did not reach it. Either the Kafka"
        " source split the partition across tasks (minPartitions, maxRecordsPerPartition: drop them) or"
        f" the query moved its rows (repartition, union, ...): {_REGROUP_OR_SAY_FILTERED}"
        " Nothing of this partition was written.",
        topic=topic,
        partition=partition,
        offset=unseen,
    )


def read_start(provenance: Provenance | None, topic: str, partition: int) -> int | None:
    """Where the Kafka source began reading `topic`/`partition` in this batch, where the batch's lineage
    says (classic Spark); None where only the rows say."""
    if provenance is None:
        return None
    ranges = provenance.partitions if provenance.partitions is not None else provenance.ranges
    starts = [r.start for r in ranges if (r.topic, r.partition) == (topic, partition)]
    return min(starts) if starts else None


def require_reset_honoured(
    scope: PartitionScope, committed: int | None, reset_from: int | None, resumes_at: int
) -> None:
    """Raise InputGapError, before anything is written or skipped, where `eos offsets reset` set the
    committed offset back (`reset_from`: the offset it replaced, -1 where not known) and this run reads the
    partition from `resumes_at`, past it, with readable records between: Spark's Kafka source resumes
    from its checkpoint, not from the group's offsets, and the task would commit past records it never
    saw. A run that reads from below the replaced offset started where the reset points (a new
    checkpoint, `eos.read_stream`): rows it filtered out before its first are not a gap."""
    if reset_from is None or committed is None or resumes_at <= committed:
        return
    if 0 <= reset_from and resumes_at < reset_from:
        return
    unseen = _reads.unseen_record(scope.config, scope.topic, scope.partition, committed, resumes_at)
    if unseen is not None:
        raise gap_error(scope, committed, reset_from, resumes_at, unseen)


def gap_error(
    scope: PartitionScope, committed: int, reset_from: int, resumes_at: int, unseen: int
) -> InputGapError:
    """The error of a run that resumes at `resumes_at`, past the offset `eos offsets reset` set back to
    `committed`, with the readable record `unseen` between."""
    where, app = scope.where, scope.config.app_id
    return InputGapError(
        f"input partition {where}: `eos offsets reset` set its committed offset to {committed}"
        f"{f' (from {reset_from})' if reset_from >= 0 else ''}, but this query resumes it at offset"
        f" {resumes_at}: Spark's Kafka source resumes from the query's checkpoint, not from the group's"
        f" offsets, so input records {committed} to {resumes_at - 1} (the first: {unseen}) would be"
        " skipped, never written. Nothing of this partition was written or skipped. To write them, stop"
        " the query and start it with a new checkpointLocation: eos.read_stream starts each partition at"
        " its committed offset (eos's state stores and ledgers carry over; Spark's own state, such as"
        " an aggregation's, does not). To skip them instead:"
        f' `eos offsets reset --app {app} --to \'{{"{scope.topic}": {{"{scope.partition}":'
        f" {resumes_at}}}}}' --execute`.",
        topic=scope.topic,
        partition=scope.partition,
        offset=committed,
        resumes_at=resumes_at,
    )


def require_no_gaps(scope: PartitionScope, run: pa.RecordBatch, layout: Layout, before: int | None) -> int:
    """Raise InputOrderError, before any row of `run` is written, where input between two of the task's
    rows of the partition (`before`: the offset of its row before `run`, if any) reached another task;
    returns the offset of `run`'s last row. Without it a task holding some of a partition's rows in
    offset order (`repartition(n, "key")` deals them out by key) passed the look before its first row,
    wrote its rows and committed an offset past the rows it did not hold: they were then skipped as
    written. A gap that holds no record (a transaction's marker, an aborted record) is what the source
    skips too; input without gaps costs no read."""
    offsets = run.column(layout.offset).to_numpy(zero_copy_only=False)
    if before is not None:
        offsets = np.concatenate(([before], offsets))
    for at in np.flatnonzero(np.diff(offsets) > 1):
        low, high = int(offsets[at]), int(offsets[at + 1])
        unseen = _reads.unseen_record(scope.config, scope.topic, scope.partition, low + 1, high)
        if unseen is None:
            continue
        topic, partition, batch = scope.topic, scope.partition, scope.batch_id
        raise InputOrderError(
            f"input partition {topic}/{partition}: this task's rows of batch {batch} go from offset {low}"
            f" to {high}, but input record {unseen} between them did not reach it: the query moved the"
            f" partition's rows (repartition, union, ...) or filtered it: {_REGROUP_OR_SAY_FILTERED}"
            f" Nothing from offset {high} on was written by this task; what it committed before is every"
            " input up to there.",
            topic=topic,
            partition=partition,
            offset=unseen,
        )
    return int(offsets[-1])


def require_unshared(scope: PartitionScope, entry: _offsets.Committed | None) -> None:
    """Raise InputOrderError when another task of this batch committed this input partition's offset
    (see the module's docstring)."""
    stamp = _offsets.fields(entry.metadata) if entry is not None else None
    if (
        not stamp
        or stamp.get("query") != str(scope.query)
        or stamp.get("batch") != str(scope.batch_id)
        or stamp.get("from") in (None, str(scope.first))
    ):
        return  # not this batch's, or this very run's (a task retried, a batch run again)
    other = int(stamp["from"])
    if other > scope.first or scope.first < entry.offset:
        # The other task holds a later piece, or rows between this task's (`require_no_gaps` refuses to
        # commit past them since), and its commit moved the offset past this task's rows: they were never
        # written. Moving the offset back writes them, and writes the other task's again.
        recover = (
            f" This task's rows from {scope.first} to {entry.offset - 1} were not written and the committed"
            " offset is past"
            " them; to write them without losing any, stop the query, drop what splits the partition, set"
            f" its committed offset back with `eos offsets reset --app {scope.config.app_id} --to"
            f' \'{{"{scope.topic}": {{"{scope.partition}": {scope.first}}}}}\' --execute` (offsets'
            f" {max(other, scope.first)}-{entry.offset - 1} are then written a second time: duplicates,"
            " nothing lost) and start it again on the same checkpoint."
        )
    else:
        recover = (
            " Nothing is lost: everything below the committed offset was written; drop what splits the"
            " partition and start the query again on the same checkpoint."
        )
    raise InputOrderError(
        f"input partition {scope.where}: the task whose rows of batch {scope.batch_id} begin at offset"
        f" {other} committed offset {entry.offset} for it, and this task's begin at {scope.first}: two"
        " tasks hold rows of it: the Kafka source split the partition (minPartitions,"
        " maxRecordsPerPartition) or the query moved its rows (repartition, union, ...), which"
        " foreachBatch(eos.sink(...)) regroups and a data source or ForeachWriter cannot. This task wrote"
        f" nothing.{recover}",
        topic=scope.topic,
        partition=scope.partition,
        offset=entry.offset,
    )
