"""The witnesses' text in an offset stamp: round trip, and the bound that keeps a stamp under Kafka's
offset.metadata.max.bytes."""

from __future__ import annotations

from eos._kafka import _offsets, _witness
from tests.support.configs import config


def test_witnesses_round_trip_through_the_stamp():
    witnesses = {("out", 0): 12, ("out", 3): 7, ("app-in-counts-changelog", 1): 0, ("dlq.v1", 2): 99}
    stamp = _offsets.stamp(config(), witnesses=witnesses, since=40)
    found = _offsets.fields(stamp)
    assert _witness.decode(found[_witness.FIELD]) == witnesses
    assert found["since"] == "40"
    assert _offsets.is_own(config(), stamp)  # still this app's offset


def test_a_stamp_without_witnesses_has_none():
    assert _witness.FIELD not in _offsets.fields(_offsets.stamp(config()))
    assert _witness.decode(None) == {}


def test_too_many_witnesses_are_cut_to_the_budget_and_counted():
    witnesses = {("a-long-output-topic-name", p): 10**9 + p for p in range(400)}
    text, left_out = _witness.encode(witnesses)
    assert len(text) <= _witness.BUDGET
    assert left_out > 0 and len(_witness.decode(text)) + left_out == len(witnesses)
    stamp = _offsets.stamp(config(), witnesses=witnesses, since=1)
    assert len(stamp.encode()) < 4096  # offset.metadata.max.bytes' default
    assert _offsets.fields(stamp)["unwitnessed"] == str(left_out)


def test_a_parts_stamp_with_long_part_columns_and_many_witnesses_stays_under_the_limit():
    from eos._core._parts import Digest, Progress, RowPlacement

    placement = RowPlacement(64, "columns:" + ",".join(f"a_rather_long_column_name_{i}" for i in range(40)))
    witnesses = {(f"output-topic-{t}", p): 10**12 + p for t in range(5) for p in range(100)}
    metadata = Progress(3, placement, Digest(7, 1, 2)).metadata(config(), 5, witnesses)
    assert len(metadata.encode()) < 4096
    back = Progress.of(_offsets.Committed(4, metadata))
    assert (
        back.placement == placement and back.witnesses and int(_offsets.fields(metadata)["unwitnessed"]) > 0
    )


def test_the_arrow_paths_placement_of_a_sliced_key_column_is_that_of_its_copy():
    import numpy as np
    import pyarrow as pa

    from eos._kafka import _rdkafka

    keys = pa.array([f"key-{i}".encode() * (i % 7) if i % 11 else None for i in range(30_000)])
    sliced = keys.slice(12_345, 10_000)
    copied = pa.array(sliced.to_pylist(), pa.binary())
    for start, stop in ((0, 10_000), (100, 7_000)):
        np.testing.assert_array_equal(
            _rdkafka.partitions(sliced, start, stop, 12, 5), _rdkafka.partitions(copied, start, stop, 12, 5)
        )
