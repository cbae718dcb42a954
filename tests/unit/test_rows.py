"""eos._core._rows: the rows `process(row, state)` receives read like Spark's `Row` from an Arrow batch."""

from __future__ import annotations

import datetime

import pyarrow as pa
import pytest
from pyspark.sql import Row

from eos._core._rows import Columns, row_type, rows, to_python
from eos._spark._preflight import functions

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def kafka_batch() -> pa.RecordBatch:
    """Two rows as Spark's Kafka source hands them to mapInArrow (timestamps carry the session zone)."""
    micros = [1_700_000_000_123_456, 1_700_000_001_000_000]
    return pa.RecordBatch.from_arrays(
        [
            pa.array([b"k1", None], pa.binary()),
            pa.array([b"v1", b"v2"], pa.binary()),
            pa.array(["in", "in"]),
            pa.array([3, 3], pa.int32()),
            pa.array([10, 11], pa.int64()),
            pa.array(micros, pa.timestamp("us", tz="UTC")),
            pa.array([0, 0], pa.int32()),
            pa.array([[{"key": "h", "value": b"x"}], None], HEADERS),
        ],
        ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"],
    )


def test_fields_by_attribute_name_and_index():
    first, second = rows(kafka_batch())
    assert (first.key, first.value, first.topic, first.partition, first.offset) == (b"k1", b"v1", "in", 3, 10)
    assert first["value"] == first[1] == first.value
    assert first[-1] == first.headers
    assert second.key is None
    assert type(first.value) is bytes


def test_as_dict_iteration_and_len_follow_the_schema():
    row = rows(kafka_batch())[0]
    names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    assert list(row.asDict()) == names
    assert len(row) == 8
    assert list(row) == [row.asDict()[n] for n in names]
    assert row[1:3] == (b"v1", "in")
    assert "offset" in row and "nope" not in row
    assert row.__fields__ == tuple(names)


def test_values_are_what_a_spark_row_holds():
    row = rows(kafka_batch(), functions().struct)[0]  # the struct type every Spark entry point hands in
    # TimestampType: a naive datetime in local time, as TimestampType.fromInternal builds it
    expected = datetime.datetime.fromtimestamp(1_700_000_000).replace(microsecond=123_456)
    assert row.timestamp == expected and row.timestamp.tzinfo is None
    # array<struct<key,value>>: a list of Rows, each readable by name or position
    [header] = row.headers
    assert header == Row(key="h", value=b"x")
    assert (header.key, header[1]) == ("h", b"x")
    assert row.asDict(recursive=True)["headers"] == [{"key": "h", "value": b"x"}]


def test_timestamp_without_zone_is_the_wall_clock_time():
    array = pa.array([0, 86_400_000_000 + 5], pa.timestamp("us"))
    assert to_python(array) == [datetime.datetime(1970, 1, 1), datetime.datetime(1970, 1, 2, 0, 0, 0, 5)]


def test_columns_are_converted_once_and_only_when_read():
    batch = kafka_batch()
    cols = Columns(batch)
    view = row_type(tuple(batch.schema.names))
    first, second = view(cols, 0), view(cols, 1)
    assert first.value == b"v1" and second.value == b"v2"
    assert cols._values[1] is cols.column(1)  # one list for the whole batch
    assert cols._values[5] is None, "the timestamp column was never read, so never converted"


def test_unknown_fields_and_out_of_range_indexes_say_what_exists():
    row = rows(kafka_batch())[0]
    with pytest.raises(AttributeError, match="'nope'.*'offset'"):
        row.nope  # noqa: B018
    with pytest.raises(KeyError, match="'nope'"):
        row["nope"]
    with pytest.raises(IndexError, match="8 fields"):
        row[8]


def test_field_names_that_are_not_identifiers_or_shadow_methods_are_read_by_key():
    batch = pa.RecordBatch.from_pydict({"my col": [1], "asDict": [2], "class": [3], "x": [4]})
    row = rows(batch)[0]
    assert (row["my col"], row["asDict"], row["class"], row.x) == (1, 2, 3, 4)
    assert callable(row.asDict)
    assert row.asDict() == {"my col": 1, "asDict": 2, "class": 3, "x": 4}


def test_rows_compare_as_tuples_and_print_as_spark_rows():
    row = rows(pa.RecordBatch.from_pydict({"a": [1], "b": ["x"]}))[0]
    assert row == (1, "x")
    assert repr(row) == "Row(a=1, b='x')"


def test_empty_batch_has_no_rows():
    assert rows(kafka_batch().slice(0, 0)) == []
