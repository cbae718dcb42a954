"""eos._spark._preflight.batch_layout: the driver-side batch schema check (D1), on a DataFrame stand-in
(no Spark)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import eos
from eos._core._arrow import Layout
from eos._spark._preflight import batch_layout
from eos.sink import Sink
from tests.support.configs import config

HEADERS = "array<struct<key:string,value:binary>>"
KAFKA_SOURCE = [
    ("key", "binary"),
    ("value", "binary"),
    ("topic", "string"),
    ("partition", "int"),
    ("offset", "bigint"),
    ("timestamp", "timestamp"),
    ("timestampType", "int"),
    ("headers", HEADERS),
]


class FakeDF:
    """What `batch_layout` reads from a DataFrame: `.columns` and `.dtypes` as Spark returns them."""

    def __init__(self, dtypes: list[tuple[str, str]]) -> None:
        self.dtypes = list(dtypes)
        self.columns = [name for name, _ in dtypes]


def df(*, drop: tuple[str, ...] = (), retype: dict[str, str] | None = None, extra=()) -> FakeDF:
    retype = retype or {}
    return FakeDF([(n, retype.get(n, t)) for n, t in KAFKA_SOURCE if n not in drop] + list(extra))


def layout(batch: FakeDF, process=None, process_batch=None, **kw):
    return batch_layout(config(**kw), batch.dtypes, process is not None or process_batch is not None)


def test_kafka_source_batch_selects_the_output_columns():
    result, columns = layout(df())
    assert columns == ["topic", "partition", "offset", "value", "key", "headers"]
    assert result == Layout(value="value", key="key", headers="headers")


def test_key_and_headers_are_optional():
    result, columns = layout(df(drop=("key", "headers")))
    assert columns == ["topic", "partition", "offset", "value"]
    assert result == Layout(value="value")


@pytest.mark.parametrize(
    "retype",
    [{"value": "string"}, {"key": "string"}, {"offset": "int"}],
    ids=["str-value", "str-key", "int-offset"],
)
def test_other_accepted_types(retype):
    _, columns = layout(df(retype=retype))
    assert columns[:4] == ["topic", "partition", "offset", "value"]


@pytest.mark.parametrize("missing", ["topic", "partition", "offset", "value"])
def test_missing_required_column(missing):
    with pytest.raises(eos.BatchSchemaError) as info:
        layout(df(drop=(missing,)))
    assert f"no {missing!r} column" in str(info.value)
    assert "Nothing was written" in str(info.value)


@pytest.mark.parametrize(
    ("column", "bad"),
    [
        ("value", "int"),
        ("value", "array<string>"),
        ("key", "bigint"),
        ("headers", "map<string,binary>"),
        ("topic", "binary"),
        ("partition", "bigint"),
        ("offset", "string"),
    ],
)
def test_wrong_column_type_names_column_and_type(column, bad):
    with pytest.raises(eos.BatchSchemaError) as info:
        layout(df(retype={column: bad}))
    assert repr(column) in str(info.value)
    assert f"type {bad}" in str(info.value)


def test_schema_error_is_raised_before_the_broker_or_spark_is_touched(monkeypatch):
    def touched(*args, **kwargs):
        pytest.fail("the sink went on after a schema error")

    monkeypatch.setattr(sys.modules["eos._spark._preflight"], "check_output_topic", touched)
    batch = df(drop=("value",))
    batch.select = batch.repartition = touched
    sink = eos.sink(config())
    with pytest.raises(eos.BatchSchemaError):
        sink(batch, 0)
    assert not sink.history


def test_with_process_value_is_not_required_and_all_columns_are_kept():
    batch = FakeDF(
        [
            ("id", "bigint"),
            ("offset", "bigint"),
            ("payload", "string"),
            ("partition", "int"),
            ("topic", "string"),
        ]
    )
    result, columns = layout(batch, process=lambda row, state: None)
    assert columns == batch.columns
    assert result == Layout()  # the input coordinates by name; the rest is the function's
    batch_result, batch_columns = layout(batch, process_batch=lambda b, state: None)
    assert (batch_result, batch_columns) == (result, columns)


def test_process_and_process_batch_are_exclusive_and_stores_need_one():
    with pytest.raises(ValueError, match="not both"):
        Sink(config(), lambda row, state: None, process_batch=lambda batch, state: None)
    with pytest.raises(ValueError, match="process_batch="):
        Sink(config(), stores={"counts": "json"})
    assert Sink(config(), process_batch=lambda batch, state: None, stores={"counts": "json"}).functions.stores


def test_with_process_the_input_coordinates_are_still_required():
    with pytest.raises(eos.BatchSchemaError, match="'offset'"):
        layout(df(drop=("offset",)), process=lambda row, state: None)


def test_output_topic_and_partition_columns_are_placed_in_the_layout():
    batch = df(drop=("headers",), extra=[("dest", "string"), ("dest_partition", "int")])
    result, columns = layout(
        batch, output_topic=None, output_topic_column="dest", output_partition_column="dest_partition"
    )
    assert columns == ["topic", "partition", "offset", "value", "key", "dest", "dest_partition"]
    assert result == Layout(value="value", key="key", out_topic="dest", out_partition="dest_partition")


@pytest.mark.parametrize(
    ("kw", "extra", "column"),
    [
        ({"output_topic": None, "output_topic_column": "dest"}, [], "dest"),
        ({"output_topic": None, "output_topic_column": "dest"}, [("dest", "binary")], "dest"),
        ({"output_partition_column": "p"}, [], "p"),
        ({"output_partition_column": "p"}, [("p", "bigint")], "p"),
    ],
)
def test_output_topic_and_partition_columns_are_checked(kw, extra, column):
    with pytest.raises(eos.BatchSchemaError) as info:
        layout(df(extra=extra), **kw)
    assert repr(column) in str(info.value)


def test_output_columns_are_checked_with_process_too():
    with pytest.raises(eos.BatchSchemaError, match="'dest'"):
        layout(df(), process=lambda row, state: None, output_topic=None, output_topic_column="dest")


def test_importing_eos_does_not_import_pyspark():
    """The sink, config and checker work without a JVM: pyspark is imported only where a session starts."""
    code = (
        "import sys, eos, eos.sink, eos.testing\n"
        "print(sorted(m for m in sys.modules if m.startswith('pyspark')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_output_timestamp_column_is_checked_and_passed_to_the_tasks():
    result, columns = layout(df(), output_timestamp_column="timestamp")
    assert columns[-1] == "timestamp" and result.out_timestamp == "timestamp"
    result, _ = layout(df(extra=[("event_ms", "bigint")]), process=len, output_timestamp_column="event_ms")
    assert result.out_timestamp == "event_ms"
    for bad in ({"timestamp": "timestamp_ntz"}, {"timestamp": "string"}):
        with pytest.raises(
            eos.BatchSchemaError, match="'timestamp' has type .* expected timestamp or bigint or int"
        ):
            layout(df(retype=bad), output_timestamp_column="timestamp")
    with pytest.raises(eos.BatchSchemaError, match="no 'ts' column .named by output_timestamp_column"):
        layout(df(), output_timestamp_column="ts")


def test_process_batch_cannot_take_the_rows_timestamp_column():
    with pytest.raises(eos.ConfigError, match="output_timestamp_column.*return a 'timestamp' column"):
        batch_layout(config(output_timestamp_column="timestamp"), df().dtypes, True, process_batch=True)
