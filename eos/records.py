"""Output records: what `process` returns and what a batch row becomes, as Spark's Kafka sink reads them.

A batch row's `value` (required), `key` and `headers` columns are the output, as in `.format("kafka")`;
`topic`, `partition` and `offset` are the input coordinates. A `process` function may return `Output`
objects, mappings with the same field names, or bare `bytes`/`str` values.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import pyarrow as pa

from eos.errors import OutputTypeError

Headers = list[tuple[str, bytes | None]]


@attrs.define(slots=True)
class Output:
    """One output record, as `process` returns it (a mapping with the same field names, or a bare
    `bytes` or `str` value, is taken as one too).

    Parameters:

    - `value`: the record's value: `bytes`, or `str` (written as UTF-8); None writes a null value (a
      tombstone). With a `value_serializer`, any value its schema describes (a dict for a record, ...).
    - `key`: the record's key, as `value` is (with a `key_serializer`, as its schema describes). None
      (the default): no key.
    - `headers`: the record's headers, as (name, value) pairs or a mapping of name to value; each value
      `bytes`, `str` (written as UTF-8) or None. None (the default): no headers.
    - `topic`: the topic to write the record to. None (the default): the row's `output_topic_column`
      where one is set, else the configured `output_topic`.
    - `partition`: the partition to write the record to, an int >= 0. None (the default): the row's
      `output_partition_column` where one is set, else the producer's partitioner picks one.
    - `timestamp`: the record's timestamp: epoch milliseconds, or a `datetime` (a naive one is local
      time). None (the default): the row's `output_timestamp_column` where one is set, else the
      producer's clock.
    """

    value: bytes | str | None
    key: bytes | str | None = None
    headers: Headers | Mapping[str, bytes | str | None] | None = None
    #: Overrides the configured output topic for this record.
    topic: str | None = None
    #: Overrides the producer's partitioner for this record.
    partition: int | None = None
    #: The record's timestamp: epoch milliseconds or a `datetime` (a naive one is local time, as
    #: Spark's rows hold timestamps); None: the producer's clock (or the row's
    #: `output_timestamp_column`).
    timestamp: int | datetime.datetime | None = None


def to_bytes(field: str, value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise OutputTypeError(field, value)


def to_headers(value: Any) -> Headers | None:
    if not value:
        return None
    items = value.items() if isinstance(value, Mapping) else value
    out: Headers = []
    for item in items:
        # Spark's Kafka headers are structs (key, value); a Row unpacks like a tuple.
        k, v = item[0], item[1]
        out.append((str(k), to_bytes("headers", v)))
    return out


def outputs_of(result: Any) -> Iterable[Output]:
    """Normalise what `process` returned into Output records."""
    if result is None:
        return ()
    if isinstance(result, Output | Mapping | bytes | bytearray | memoryview | str):
        result = (result,)
    elif not isinstance(result, Iterable):
        raise OutputTypeError(
            "value",
            result,
            f"process returned a {type(result).__name__}, not an Output or an iterable of them",
        )
    return (_one(r) for r in result)


def _one(item: Any) -> Output:
    if isinstance(item, Output):
        return _routed(item)
    if isinstance(item, Mapping):
        unknown = set(item) - {"value", "key", "headers", "topic", "partition", "timestamp"}
        if unknown:
            field = sorted(unknown)[0]
            raise OutputTypeError(field, item, f"output has unknown field {field!r}")
        if "value" not in item:
            raise OutputTypeError("value", item, "output mapping has no 'value' field")
        return _routed(Output(**item))
    if isinstance(item, bytes | bytearray | memoryview | str):
        return Output(item)
    raise OutputTypeError("value", item, f"process returned a {type(item).__name__}, not an Output")


def _routed(out: Output) -> Output:
    """`out`, whose topic and partition a producer can take (else OutputTypeError naming the field,
    which the task reports as the ProcessError of the record that returned it)."""
    if out.topic is not None and not isinstance(out.topic, str):
        raise OutputTypeError(
            "topic", out.topic, f"output field 'topic' must be a topic name (str) or None, not {out.topic!r}"
        )
    partition = out.partition
    if partition is not None and (
        isinstance(partition, bool) or not isinstance(partition, int) or partition < 0
    ):
        raise OutputTypeError(
            "partition",
            partition,
            f"output field 'partition' must be an int >= 0 (None: the partitioner picks), not {partition!r}",
        )
    if out.timestamp is not None:
        out.timestamp = timestamp_ms(out.timestamp)
    return out


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def datetime_ms(value: datetime.datetime) -> int:
    """Epoch milliseconds, exactly (a naive datetime is local time, as `datetime.timestamp` takes it)."""
    aware = value if value.tzinfo is not None else value.astimezone()
    return (aware - _EPOCH) // datetime.timedelta(milliseconds=1)


def timestamp_ms(value: Any) -> int:
    """An output timestamp as the epoch milliseconds Kafka carries (OutputTypeError naming `timestamp`)."""
    if isinstance(value, datetime.datetime):
        ms = datetime_ms(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        ms = value
    else:
        raise OutputTypeError(
            "timestamp",
            value,
            f"output field 'timestamp' must be epoch milliseconds (int) or a datetime, not {value!r}",
        )
    if ms < 0:
        raise OutputTypeError("timestamp", value, f"output field 'timestamp' is before 1970: {value!r}")
    return ms


# -- the producer's input: output records as columns --------------------------------------------------

_BYTES = (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_string, pa.types.is_large_string)


def is_bytes(t: pa.DataType) -> bool:
    """Binary or string, regular or large: what a record's value or key may be."""
    return any(check(t) for check in _BYTES)


@attrs.define
class Outputs:
    """Output records as columns of Python values, and the input record each one came from.

    `topic` is one topic for every record or one per record (None: the default topic). `offsets` names
    each record's input offset; without it every record comes from `first`..`last` (a process_batch call).
    """

    #: Arrow columns as the batch holds them (the producer hands them over whole where it can), or lists
    values: pa.Array | pa.ChunkedArray | list[Any]
    topic: str | list[str | None] | None
    keys: pa.Array | pa.ChunkedArray | list[Any] | None = None
    headers: list[Any] | None = None
    partitions: list[int | None] | None = None
    #: epoch milliseconds, None where the producer's clock stamps the record
    timestamps: list[int | None] | None = None
    offsets: pa.Array | None = None
    first: int = -1
    last: int = -1

    def __len__(self) -> int:
        return len(self.values)

    def offset_of(self, i: int) -> int:
        return self.offsets[i].as_py() if self.offsets is not None else self.first

    def origin(self, i: int) -> str:
        """How an error names the input of output record i, beyond the offset RecordError gives."""
        if self.offsets is not None or self.first == self.last:
            return ""
        return f" (an output of process_batch over input offsets {self.first}-{self.last})"
