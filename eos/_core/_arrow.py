"""Arrow record batches on the executors: the runs of one input topic-partition a task receives, and
the output columns eos produces from them.

`tp_runs` cuts the stream of batches `mapInArrow` hands a task into runs of one input topic-partition
and checks that each topic-partition is one run in offset order (the driver's grouping promises it;
a broken promise raises `InputOrderError` before anything of that run is produced). What the producer
writes (`eos.records.Outputs`) is built here: the pass-through columns of a run (`passthrough`), or what
a `process_batch` function returned (`batch_outputs`, which validates it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.compute as pc

from eos.errors import InputOrderError, ProcessError
from eos.records import Outputs, is_bytes


@attrs.frozen
class Layout:
    """Names of the batch's columns that eos reads: the input coordinates, and for pass-through
    batches the output columns (`value`, `key`, `headers`, and the configured topic/partition columns)."""

    topic: str = "topic"
    partition: str = "partition"
    offset: str = "offset"
    value: str | None = None
    key: str | None = None
    headers: str | None = None
    out_topic: str | None = None
    out_partition: str | None = None
    out_timestamp: str | None = None


def tp_runs(
    batches: Iterable[pa.RecordBatch], layout: Layout
) -> Iterator[tuple[tuple[str, int], pa.RecordBatch]]:
    """((topic, partition), run) for each maximal run of rows of one input topic-partition, in order.

    Each topic-partition must appear as one run with strictly increasing offsets; otherwise
    `InputOrderError` is raised, naming it, before the offending run is yielded.
    """
    done: set[tuple[str, int]] = set()
    current: tuple[str, int] | None = None
    last_offset = -1
    for batch in batches:
        if batch.num_rows == 0:
            continue
        topics = batch.column(layout.topic)
        partitions = batch.column(layout.partition)
        for start, end in boundaries(topics, partitions):
            run = batch.slice(start, end - start)
            tp = (topics[start].as_py(), partitions[start].as_py())
            offsets = run.column(layout.offset)
            if tp != current:
                if tp in done:
                    raise two_runs(tp, offsets[0].as_py())
                if current is not None:
                    done.add(current)
                current, last_offset = tp, -1
            _check_increasing(offsets, last_offset, tp)
            last_offset = offsets[len(offsets) - 1].as_py()
            yield tp, run


def boundaries(topics: pa.Array, partitions: pa.Array) -> list[tuple[int, int]]:
    """[start, end) of each run of equal (topic, partition) in one batch."""
    n = len(topics)
    first_t, first_p = topics[0], partitions[0]
    if pc.all(pc.equal(partitions, first_p)).as_py() and pc.all(pc.equal(topics, first_t)).as_py():
        return [(0, n)]  # the common case: the whole batch is one topic-partition
    ts, ps = topics.to_pylist(), partitions.to_pylist()
    out, start = [], 0
    for i in range(1, n):
        if ps[i] != ps[start] or ts[i] != ts[start]:
            out.append((start, i))
            start = i
    out.append((start, n))
    return out


def _check_increasing(offsets: pa.Array, after: int, tp: tuple[str, int]) -> None:
    n = len(offsets)
    first = offsets[0].as_py()
    ordered = first > after and (n < 2 or pc.all(pc.less(offsets.slice(0, n - 1), offsets.slice(1))).as_py())
    if not ordered:
        raise not_increasing(tp, first)


def two_runs(tp: tuple[str, int], offset: int) -> InputOrderError:
    """The error of an input partition whose rows reached a task as two runs (the second at `offset`)."""
    return InputOrderError(
        f"input partition {tp[0]}/{tp[1]} reached this task as two separate runs"
        f" (again at offset {offset}): its rows were not grouped into one"
        " sorted run. Nothing of this run was written.",
        topic=tp[0],
        partition=tp[1],
        offset=offset,
    )


def not_increasing(tp: tuple[str, int], offset: int) -> InputOrderError:
    """The error of an input partition whose rows are out of offset order near `offset`."""
    return InputOrderError(
        f"the rows of input partition {tp[0]}/{tp[1]} are not in strictly increasing offset order"
        f" (near offset {offset}). Nothing of this run was written.",
        topic=tp[0],
        partition=tp[1],
        offset=offset,
    )


def first_offset(run: pa.RecordBatch, layout: Layout) -> int:
    return run.column(layout.offset)[0].as_py()


def last_offset(run: pa.RecordBatch, layout: Layout) -> int:
    return run.column(layout.offset)[run.num_rows - 1].as_py()


def below(run: pa.RecordBatch, layout: Layout, committed: int | None) -> int:
    """How many leading rows of `run` (sorted by offset) lie below the committed offset."""
    if committed is None or run.num_rows == 0:
        return 0
    offsets = run.column(layout.offset)
    if offsets[0].as_py() >= committed:
        return 0
    if offsets[run.num_rows - 1].as_py() < committed:
        return run.num_rows
    return pc.sum(pc.less(offsets, committed)).as_py()


def index_of(offsets: pa.Array, offset: int) -> int | None:
    """The position of `offset` in sorted `offsets`, or None."""
    found = pc.index(offsets, offset).as_py()
    return None if found < 0 else found


# -- what the producer writes -------------------------------------------------------------------------


def passthrough(
    run: pa.RecordBatch, layout: Layout, default_topic: str | None, offsets: pa.Array | None = None
) -> Outputs:
    """A pass-through run's output columns: `value`, `key`, `headers` as Spark's Kafka sink reads them.
    `offsets` names each row's input (default: the input offset column)."""
    headers = run.column(layout.headers) if layout.headers else None
    if headers is not None and not pc.sum(pc.list_value_length(headers)).as_py():
        headers = None  # no record has a header: the producer's fastest loop takes no headers
    return Outputs(
        values=run.column(layout.value),
        topic=run.column(layout.out_topic).to_pylist() if layout.out_topic else default_topic,
        keys=run.column(layout.key) if layout.key else None,
        headers=headers_of(headers) if headers is not None else None,
        partitions=run.column(layout.out_partition).to_pylist() if layout.out_partition else None,
        timestamps=timestamps_ms(run.column(layout.out_timestamp)) if layout.out_timestamp else None,
        offsets=run.column(layout.offset) if offsets is None else offsets,
    )


_MS_PER = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}


def timestamps_ms(column: pa.Array | pa.ChunkedArray) -> list[int | None] | None:
    """A timestamp column (Spark's `timestamp`: UTC instants) or an integer one (epoch milliseconds) as
    the epoch milliseconds a producer takes, None for a null; None for a column of nulls only."""
    if column.null_count == len(column):
        return None
    if pa.types.is_timestamp(column.type):
        times, over = _MS_PER[column.type.unit]
        return [None if v is None else v * times // over for v in column.cast(pa.int64()).to_pylist()]
    return column.to_pylist()


def headers_of(column: pa.Array) -> list[list[tuple[str, bytes | None]] | None]:
    """Spark's `array<struct<key:string,value:binary>>` as the (key, value) lists a producer takes."""
    return [[(h["key"], h["value"]) for h in hs] if hs else None for hs in column.to_pylist()]


# -- process_batch ---------------------------------------------------------------------------------------

OUTPUT_FIELDS = ("value", "key", "headers", "topic", "partition", "timestamp")
_KINDS = {
    "value": ("binary or string", (is_bytes,)),
    "key": ("binary or string", (is_bytes,)),
    "topic": ("string", (pa.types.is_string, pa.types.is_large_string)),
    "partition": ("integer", (pa.types.is_integer,)),
    "timestamp": (
        "a timestamp with a time zone (pa.timestamp('ms', tz='UTC')) or an integer (epoch milliseconds)",
        (lambda t: pa.types.is_timestamp(t) and t.tz is not None, pa.types.is_integer),
    ),
}


def batch_outputs(
    result: Any,
    *,
    default_topic: str | None,
    topic: str,
    partition: int,
    first: int,
    last: int,
    serialized: frozenset[str] = frozenset(),
) -> Outputs:
    """Validate what a `process_batch` call over input offsets first..last returned; its columns.

    The output columns are `eos.Output`'s fields: `value` (required), `key`, `headers`, `topic`,
    `partition`, `timestamp`. Anything else raises ProcessError naming the first input record of the
    call (not a poison record: the function's output is wrong, whatever its input). The fields in
    `serialized` may have any type (a Schema Registry serializer encodes them).
    """

    def refuse(message: str) -> ProcessError:
        return ProcessError(
            f"process_batch over input offsets {first}-{last}: {message}",
            topic=topic,
            partition=partition,
            offset=first,
            through=last,
            poison=False,
        )

    if result is None:
        return Outputs(values=[], topic=default_topic, first=first, last=last)
    if not isinstance(result, pa.RecordBatch | pa.Table):
        raise refuse(f"returned a {type(result).__name__}, not a pyarrow RecordBatch or Table")
    names = result.schema.names
    unknown = [n for n in names if n not in OUTPUT_FIELDS]
    if unknown:
        raise refuse(
            f"output has columns {unknown} that are not output fields {list(OUTPUT_FIELDS)}"
            " (the input coordinates 'topic'/'partition' would route the output: select output columns only)"
        )
    if len(set(names)) != len(names):
        raise refuse(f"output has repeated column names {names}")
    if "value" not in names:
        raise refuse(f"output has no 'value' column; its columns are {names}")
    for name in names:
        column_type = result.schema.field(name).type
        if pa.types.is_null(column_type) or name in serialized:
            continue  # all nulls: tombstones, the default topic, the partitioner
        if name == "headers":
            if not _is_headers(column_type):
                expected = "list<struct<key: string, value: binary>>"
                raise refuse(f"column 'headers' has type {column_type}, expected {expected}")
            continue
        what, checks = _KINDS[name]
        if not any(check(column_type) for check in checks):
            raise refuse(f"column {name!r} has type {column_type}, expected {what}")

    def column(name: str) -> list[Any] | None:
        return result.column(name).to_pylist() if name in names else None

    topics = column("topic")
    if topics is not None and default_topic is None and None in topics:
        raise refuse(f"output row {topics.index(None)} has no topic and no output_topic is configured")
    return Outputs(
        values=result.column("value"),
        topic=topics if topics is not None else default_topic,
        keys=result.column("key") if "key" in names else None,
        headers=headers_of(result.column("headers")) if "headers" in names else None,
        partitions=column("partition"),
        timestamps=timestamps_ms(result.column("timestamp")) if "timestamp" in names else None,
        first=first,
        last=last,
    )


def _is_headers(t: pa.DataType) -> bool:
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)) or not pa.types.is_struct(t.value_type):
        return False
    fields = {f.name: f.type for f in t.value_type}
    return (
        set(fields) == {"key", "value"}
        and any(check(fields["key"]) for check in (pa.types.is_string, pa.types.is_large_string))
        and is_bytes(fields["value"])
    )
