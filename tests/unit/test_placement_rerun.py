"""P0's decision (eos/_spark/_parts_writer.py `PartsWriter.placement`, the sink's `_placement`): which
placement a batch's run uses, given what its first run recorded. The progress read and the topic growth
are the broker's; here they are given."""

from __future__ import annotations

import pytest

import eos
from eos._core._parts import RowPlacement
from eos._spark import _parts_writer
from eos.errors import ConfigError, NondeterministicBatchError
from tests.support.configs import config


def _sink(monkeypatch, first, **settings):
    monkeypatch.setattr(_parts_writer._parts, "batch_placement", lambda *a, **k: first)
    monkeypatch.setattr(_parts_writer._topics, "ensure_parts_topic", lambda *a, **k: None)
    return eos.sink(config(input_mode="any", **settings))


def test_a_batch_no_part_committed_is_placed_as_configured(monkeypatch):
    assert _sink(monkeypatch, None, parts=8)._placement(3, ["key", "value"], "key") == RowPlacement(8, "key")


def test_a_rerun_keeps_the_first_runs_placement(monkeypatch):
    sink = _sink(monkeypatch, RowPlacement(4, "content"), parts=8)
    assert sink._placement(3, ["key", "value"], "key") == RowPlacement(4, "content")


def test_a_first_run_recorded_before_placements_were_keeps_its_count_and_the_configs_rule(monkeypatch):
    """Progress written by an eos that recorded only `parts`: it placed by the config's rule (key here),
    so the re-run does; placing by content would put committed rows in uncommitted parts."""
    sink = _sink(monkeypatch, RowPlacement(8, None), parts=4)
    assert sink._placement(3, ["key", "value"], "key") == RowPlacement(8, "key")


def test_a_placement_the_rerun_cannot_have_is_refused(monkeypatch):
    sink = _sink(monkeypatch, RowPlacement(4, "columns:customer"), parts=4)
    with pytest.raises(NondeterministicBatchError, match="lacks 'customer'"):
        sink._placement(3, ["key", "value"], "key")
    sink = _sink(monkeypatch, RowPlacement(4, "key"), parts=4)
    with pytest.raises(NondeterministicBatchError, match="lacks 'key'"):
        sink._placement(3, ["value"], None)


def test_part_columns_the_output_lacks_names_the_setting(monkeypatch):
    with pytest.raises(ConfigError, match="part_columns"):
        _sink(monkeypatch, None, part_columns="customer")._placement(0, ["key", "value"], "key")
