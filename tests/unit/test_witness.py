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
