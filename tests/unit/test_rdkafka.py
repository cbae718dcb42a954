"""eos/_kafka/_rdkafka.py without a broker: the message array points at each Arrow element exactly, and the
librdkafka handle is taken from a Producer only."""

from __future__ import annotations

import ctypes

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Producer

from eos._kafka import _rdkafka

_NOWHERE = {"bootstrap.servers": "127.0.0.1:1"}  # librdkafka connects lazily: no broker is needed


def _read_back(column: pa.Array, start: int, stop: int) -> list[bytes | None]:
    addresses, lengths = _rdkafka._pointers(column, start, stop)
    return [
        None if a == 0 else ctypes.string_at(int(a), int(n)) for a, n in zip(addresses, lengths, strict=True)
    ]


@pytest.mark.parametrize("kind", [pa.binary(), pa.large_binary(), pa.string(), pa.large_string()])
def test_pointers_name_each_element_of_a_sliced_column_with_nulls_and_empties(kind):
    raw = [b"zero", None, b"", b"three", b"four-4", None, b"six"]
    items = [
        None if v is None else (v.decode() if kind in (pa.string(), pa.large_string()) else v) for v in raw
    ]
    column = pa.array(items, kind).slice(1)  # the column starts inside its buffers
    assert _read_back(column, 0, 6) == raw[1:]
    assert _read_back(column, 2, 5) == raw[3:6]


def test_an_empty_value_is_not_a_null_even_without_a_data_buffer():
    column = pa.array([b"", b""], pa.binary())
    addresses, lengths = _rdkafka._pointers(column, 0, 2)
    assert list(lengths) == [0, 0]
    assert all(addresses)  # librdkafka writes a null key for a NULL pointer, an empty one otherwise


def test_fits_takes_binary_and_string_columns_in_one_chunk():
    assert _rdkafka.fits(pa.array([b"a"]))
    assert _rdkafka.fits(pa.chunked_array([pa.array(["a"])]))
    assert not _rdkafka.fits(pa.chunked_array([pa.array(["a"]), pa.array(["b"])]))
    assert not _rdkafka.fits(pa.array([None, None]))  # a null column: the loop writes its tombstones
    assert not _rdkafka.fits([b"a"])


def test_the_handle_is_a_producers_own():
    producer = Producer(_NOWHERE)
    consumer = Consumer({**_NOWHERE, "group.id": "g"})
    try:
        rk = _rdkafka.handle(producer)
        assert rk is not None
        assert _rdkafka.ArrowProducer.of(producer) is not None
        assert _rdkafka.handle(consumer) is None  # same layout, not a Producer
        assert _rdkafka.handle(object()) is None
    finally:
        consumer.close()
