"""`eos repair`'s reading of record batch headers (`eos._kafka._batches`) and its new stamp."""

from __future__ import annotations

import struct

from eos._kafka import _batches, _offsets, _witness


def _batch(
    base: int, count: int, producer: int, epoch: int, attributes: int, payload: bytes = b"xx"
) -> bytes:
    """A magic-2 record batch header (61 bytes) and `payload` as its records."""
    fields = (base, 49 + len(payload), 0, 2, 0, attributes, count - 1, 0, 0, producer, epoch, 0, count)
    return struct.pack(">qiibIhiqqqhii", *fields) + payload


def test_batch_headers_name_their_producer_offsets_and_kind():
    data = _batch(10, 3, 7, 0, 0x10) + _batch(13, 1, 8, 2, 0) + _batch(14, 1, 7, 0, 0x30)
    assert list(_batches._batches(data)) == [
        _batches.Batch(10, 12, 7, 0, True, False),
        _batches.Batch(13, 13, 8, 2, False, False),
        _batches.Batch(14, 14, 7, 0, True, True),  # a control batch: a commit or abort marker
    ]


def test_a_batch_cut_short_by_the_fetch_size_is_left_out():
    whole, cut = _batch(0, 2, 1, 0, 0x10), _batch(2, 2, 1, 0, 0x10)
    assert [b.first for b in _batches._batches(whole + cut[:-1])] == [0]


def test_a_repaired_stamp_keeps_every_field_and_names_the_copies():
    witnesses = {("out", 0): 5, ("out", 3): 9}
    metadata = "eos/1;app=a;out=out;since=120;" + f"{_witness.FIELD}={_witness.encode(witnesses)[0]}"
    repaired = _offsets.rewitnessed(metadata, {**witnesses, ("out", 3): 40}, 1)
    fields = _offsets.fields(repaired)
    assert {k: fields[k] for k in ("app", "out", "since", "repaired")} == {
        "app": "a",
        "out": "out",
        "since": "120",
        "repaired": "1",
    }
    assert _witness.decode(fields[_witness.FIELD]) == {("out", 0): 5, ("out", 3): 40}
