"""eos.records: output values, headers and what `process` may return."""

from __future__ import annotations

import datetime

import pytest

from eos.records import Output, OutputTypeError, outputs_of, to_bytes, to_headers


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b"raw", b"raw"),
        (b"", b""),
        ("text", b"text"),
        ("h\u00e9", "h\u00e9".encode()),
        (bytearray(b"ba"), b"ba"),
        (memoryview(b"mv"), b"mv"),
        (None, None),
    ],
)
def test_to_bytes(value, expected):
    result = to_bytes("value", value)
    assert result == expected
    assert result is None or type(result) is bytes


@pytest.mark.parametrize(("field", "value", "type_name"), [("value", 5, "int"), ("key", 1.5, "float")])
def test_to_bytes_rejects_other_types_naming_the_field(field, value, type_name):
    with pytest.raises(OutputTypeError) as info:
        to_bytes(field, value)
    assert info.value.field == field
    assert repr(field) in str(info.value)
    assert type_name in str(info.value)
    assert isinstance(info.value, TypeError)


def test_to_headers_from_tuples_and_dict():
    expected = [("a", b"1"), ("b", None), ("c", b"3")]
    assert to_headers([("a", b"1"), ("b", None), ("c", "3")]) == expected
    assert to_headers({"a": b"1", "b": None, "c": bytearray(b"3")}) == expected


def test_to_headers_keeps_repeated_keys_in_order():
    assert to_headers([("k", b"1"), ("k", b"2")]) == [("k", b"1"), ("k", b"2")]


@pytest.mark.parametrize("empty", [None, [], {}, ()])
def test_to_headers_empty_is_none(empty):
    assert to_headers(empty) is None


def test_to_headers_bad_value_names_headers():
    with pytest.raises(OutputTypeError) as info:
        to_headers([("a", 1)])
    assert info.value.field == "headers"


def test_outputs_of_none_is_empty():
    assert list(outputs_of(None)) == []
    assert list(outputs_of([])) == []


def test_outputs_of_single_output_mapping_and_values():
    out = Output(b"v", key=b"k", topic="t", partition=2)
    assert list(outputs_of(out)) == [out]
    assert list(outputs_of({"value": b"v", "key": b"k", "topic": "t", "partition": 2})) == [out]
    assert list(outputs_of(b"v")) == [Output(b"v")]
    assert list(outputs_of("s")) == [Output("s")]


def test_outputs_of_a_mixed_list_and_a_generator():
    out = Output(b"1")
    items = [out, {"value": b"2", "headers": {"h": b"x"}}, b"3", "4"]
    expected = [out, Output(b"2", headers={"h": b"x"}), Output(b"3"), Output("4")]
    assert list(outputs_of(items)) == expected
    assert list(outputs_of(iter(items))) == expected


def test_unknown_mapping_key_names_it():
    with pytest.raises(OutputTypeError) as info:
        list(outputs_of([{"value": b"v", "timestamp_ms": 1}]))
    assert info.value.field == "timestamp_ms"
    assert "unknown field 'timestamp_ms'" in str(info.value)


def test_an_output_timestamp_is_epoch_milliseconds_from_an_int_or_a_datetime():
    aware = datetime.datetime(2026, 11, 27, 12, 0, 0, 123456, tzinfo=datetime.timezone.utc)
    naive_local = aware.astimezone().replace(tzinfo=None)  # as a Spark row holds a timestamp
    (a, b, c, d) = outputs_of(
        [
            Output(b"v", timestamp=1_795_780_800_123),
            {"value": b"v", "timestamp": aware},
            Output(b"v", timestamp=naive_local),
            Output(b"v"),
        ]
    )
    assert a.timestamp == b.timestamp == c.timestamp == 1_795_780_800_123
    assert d.timestamp is None


@pytest.mark.parametrize(
    "bad", [-1, 1.5, "2026-11-27", True, datetime.datetime(1969, 12, 31, tzinfo=datetime.timezone.utc)]
)
def test_a_bad_output_timestamp_names_the_field(bad):
    with pytest.raises(OutputTypeError) as info:
        list(outputs_of([Output(b"v", timestamp=bad)]))
    assert info.value.field == "timestamp"


@pytest.mark.parametrize("item", [42, 1.5, object(), ("v", "k")])
def test_wrong_item_type_in_a_list(item):
    with pytest.raises(OutputTypeError) as info:
        list(outputs_of([b"ok", item]))
    assert type(item).__name__ in str(info.value)
    assert "Output" in str(info.value)


@pytest.mark.parametrize("result", [42, {"key": b"k"}], ids=["lone-int", "mapping-without-value"])
def test_malformed_result_raises_output_type_error(result):
    """`_task` turns OutputTypeError into a ProcessError about the *output*; a bare TypeError
    would read as if `process` itself had raised."""
    with pytest.raises(OutputTypeError):
        list(outputs_of(result))


def test_a_bare_bytearray_is_one_value_like_bytes():
    """`to_bytes` accepts bytearray values; returned alone, one is iterated into ints today."""
    assert [to_bytes("value", o.value) for o in outputs_of(bytearray(b"v"))] == [b"v"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("partition", "3"),
        ("partition", -1),
        ("partition", True),
        ("partition", 1.5),
        ("topic", 123),
        ("topic", b"t"),
    ],
)
def test_an_output_routed_by_a_mistyped_topic_or_partition_is_refused_naming_the_field(field, value):
    for result in (Output(b"v", **{field: value}), {"value": b"v", field: value}):
        with pytest.raises(OutputTypeError, match=f"output field '{field}'") as info:
            list(outputs_of(result))
        assert info.value.field == field
