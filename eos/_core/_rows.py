"""The rows that `process(row, state)` receives: views of one row of an Arrow record batch.

Spark used to hand eos pickled `Row`s, and unpickling them was half of every Python worker's time (a
`make bench` profile: docs/design.md, "How rows reach Python"). A view reads the batch's columns
instead, each converted to Python objects once per batch and only when `process` first touches it, so
unused columns (a `timestamp` kept in the batch, say) cost nothing. Access is a Spark `Row`'s:
`row.value`, `row["value"]`, `row[3]`, `row.asDict()`, iteration and `len`; values are what a `Row`
would hold (binary as `bytes`, timestamps as naive local `datetime`s, structs as `Row`s: the Spark side
hands in `pyspark.sql.Row` as `struct`, so that this module needs no Spark).
"""

from __future__ import annotations

import datetime
import keyword
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

import pyarrow as pa

#: what a struct value becomes, called with its fields as keywords (`pyspark.sql.Row` from Spark)
Struct = Callable[..., Any]


def to_python(array: pa.Array | pa.ChunkedArray, struct: Struct = dict) -> list[Any]:
    """A column as the Python values a Spark `Row` holds."""
    if not _needs_conversion(array.type):
        return array.to_pylist()
    return [_convert(value, array.type, struct) for value in _raw(array)]


def _needs_conversion(t: pa.DataType) -> bool:
    if pa.types.is_timestamp(t) or pa.types.is_struct(t):
        return True
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _needs_conversion(t.value_type)
    if pa.types.is_map(t):
        return _needs_conversion(t.key_type) or _needs_conversion(t.item_type)
    return False


def _raw(array: pa.Array | pa.ChunkedArray) -> list[Any]:
    """Python values with timestamps as integers, so `_convert` can rebuild them as Spark does."""
    return array.cast(_timestamps_as_int(array.type)).to_pylist()


def _timestamps_as_int(t: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(t):
        return pa.int64()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_timestamps_as_int(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_timestamps_as_int(t.value_type)))
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(_timestamps_as_int(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(_timestamps_as_int(t.key_type), _timestamps_as_int(t.item_type))
    return t


_EPOCH = datetime.datetime(1970, 1, 1)


def _convert(value: Any, t: pa.DataType, struct: Struct) -> Any:
    if value is None:
        return None
    if pa.types.is_timestamp(t):
        if t.tz is None:  # TimestampNTZType: the wall-clock time as stored
            return _EPOCH + datetime.timedelta(microseconds=_micros(value, t.unit))
        micros = _micros(value, t.unit)  # TimestampType: local time, as TimestampType.fromInternal
        return datetime.datetime.fromtimestamp(micros // 1_000_000).replace(microsecond=micros % 1_000_000)
    if pa.types.is_struct(t):
        return struct(**{f.name: _convert(value[f.name], f.type, struct) for f in t})
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_convert(v, t.value_type, struct) for v in value]
    if pa.types.is_map(t):
        return {_convert(k, t.key_type, struct): _convert(v, t.item_type, struct) for k, v in value}
    return value


def _micros(value: int, unit: str) -> int:
    return {"s": value * 1_000_000, "ms": value * 1_000, "us": value, "ns": value // 1_000}[unit]


class Columns:
    """The Python values of one record batch's columns, each converted on first use."""

    __slots__ = ("_batch", "_values", "_struct")

    def __init__(self, batch: pa.RecordBatch, struct: Struct = dict) -> None:
        self._batch = batch
        self._struct = struct
        self._values: list[list[Any] | None] = [None] * batch.num_columns

    def column(self, i: int) -> list[Any]:
        values = self._values[i]
        if values is None:
            values = self._values[i] = to_python(self._batch.column(i), self._struct)
        return values


class RowView:
    """One row of a record batch, read like a Spark `Row`. Subclassed per schema (`row_type`)."""

    __slots__ = ("_cols", "_i")
    __fields__: tuple[str, ...] = ()
    _index: dict[str, int] = {}

    def __init__(self, cols: Columns, i: int) -> None:
        self._cols = cols
        self._i = i

    def __getitem__(self, item: int | str | slice) -> Any:
        if isinstance(item, str):
            try:
                return self._cols.column(self._index[item])[self._i]
            except KeyError:
                raise KeyError(f"row has no field {item!r}; fields are {list(self.__fields__)}") from None
        if isinstance(item, slice):
            return tuple(self)[item]
        n = len(self.__fields__)
        if not -n <= item < n:
            raise IndexError(f"row index {item} out of range ({n} fields)")
        return self._cols.column(item % n)[self._i]

    def __getattr__(self, name: str) -> Any:
        # Reached only for names that are not attributes (fields that are not identifiers use row[...]).
        raise AttributeError(f"row has no field {name!r}; fields are {list(self.__fields__)}")

    def __iter__(self) -> Iterator[Any]:
        return (self._cols.column(i)[self._i] for i in range(len(self.__fields__)))

    def __len__(self) -> int:
        return len(self.__fields__)

    def __contains__(self, name: object) -> bool:
        return name in self._index  # as a Spark Row: membership is by field name

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RowView | tuple):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def asDict(self, recursive: bool = False) -> dict[str, Any]:  # noqa: N802 - Spark's name
        values = dict(zip(self.__fields__, self, strict=True))
        if recursive:
            return {k: _as_dict(v) for k, v in values.items()}
        return values

    def __repr__(self) -> str:
        return "Row(" + ", ".join(f"{n}={v!r}" for n, v in zip(self.__fields__, self, strict=True)) + ")"


def _as_dict(value: Any) -> Any:
    if hasattr(value, "asDict"):
        return value.asDict(recursive=True)
    if isinstance(value, list):
        return [_as_dict(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_dict(v) for k, v in value.items()}
    return value


def _field(i: int) -> property:
    return property(lambda self: self._cols.column(i)[self._i], doc=f"field {i}")


@lru_cache(maxsize=64)
def row_type(names: tuple[str, ...]) -> type[RowView]:
    """The RowView subclass for a schema: one attribute per field whose name is an identifier."""
    namespace: dict[str, Any] = {"__slots__": (), "__fields__": names, "_index": {}}
    index: dict[str, int] = {}
    for i, name in enumerate(names):
        index.setdefault(name, i)  # a repeated name reads its first column, as Row does
        if name.isidentifier() and not keyword.iskeyword(name) and not hasattr(RowView, name):
            namespace.setdefault(name, _field(i))
    namespace["_index"] = index
    return type("Row", (RowView,), namespace)


def rows(batch: pa.RecordBatch, struct: Struct = dict) -> list[RowView]:
    """A view of every row of `batch`, sharing one lazily converted copy of its columns."""
    cls = row_type(tuple(batch.schema.names))
    cols = Columns(batch, struct)
    return [cls(cols, i) for i in range(batch.num_rows)]


def forget_schemas() -> None:
    """Forget the row types made so far (a fresh worker: `eos._core._worker.reset`)."""
    row_type.cache_clear()
