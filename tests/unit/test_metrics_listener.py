"""What eos.MetricsListener reads: foreach_writer's accumulated figures (merged as tasks end) and the
Kafka source's end offsets in a progress, as classic Spark and a Spark Connect client give them."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from eos._spark._listener import Figures, MetricsListener, _latest_offsets
from eos.errors import ConfigError


def _task(records: int, last_offset: int, commit_max: float = 0.01) -> dict:
    return {
        "records_in": records,
        "records_out": records,
        "transactions": 1,
        "commit_seconds_total": commit_max,
        "commit_seconds_max": commit_max,
        "last_offset": last_offset,
        "transactional_id": "app:in:0",
        "guarantee": "exactly_once",
    }


def test_tasks_figures_add_up_per_partition_and_keep_the_highest_offset():
    param = Figures()
    value = param.zero({})
    key = ("query", "app", "in", 0)
    param.addInPlace(value, {key: _task(500, 499, 0.02)})
    param.addInPlace(value, {key: _task(250, 749, 0.01), ("query", "app", "in", 1): _task(7, 6)})
    merged = value[key]
    assert (merged["records_in"], merged["records_out"], merged["transactions"]) == (750, 750, 2)
    assert merged["last_offset"] == 749 and merged["commit_seconds_max"] == 0.02
    assert merged["commit_seconds_total"] == pytest.approx(0.03)
    assert merged["guarantee"] == "exactly_once" and value[("query", "app", "in", 1)]["records_in"] == 7


def test_a_task_that_wrote_nothing_keeps_the_partitions_offset():
    param = Figures()
    value = param.addInPlace({}, {("q", "a", "in", 0): _task(10, 9)})
    param.addInPlace(value, {("q", "a", "in", 0): {**_task(0, 0), "last_offset": None}})
    assert value[("q", "a", "in", 0)]["last_offset"] == 9


@pytest.mark.parametrize(
    "latest",
    [
        json.dumps({"in": {"0": 1500, "1": 7}}),  # classic: the JSON Spark wrote
        str({"in": {"0": 1500, "1": 7}}),  # a Spark Connect client: Python's repr of it
        {"in": {"0": 1500, "1": 7}},
    ],
)
def test_end_offsets_from_a_progress(latest):
    progress = SimpleNamespace(sources=[SimpleNamespace(latestOffset=latest)])
    assert _latest_offsets(progress) == {("in", 0): 1500, ("in", 1): 7}


def test_a_source_without_kafka_offsets_gives_none():
    sources = [
        SimpleNamespace(latestOffset=None),
        SimpleNamespace(latestOffset="12"),
        SimpleNamespace(latestOffset="{"),
    ]
    assert _latest_offsets(SimpleNamespace(sources=sources)) == {}


@pytest.mark.parametrize("port", [-1, 65536, "9108", True])
def test_a_bad_port_is_refused_naming_it(port):
    with pytest.raises(ConfigError, match="'port'"):
        MetricsListener(port)


def test_a_querys_ledger_is_announced_to_the_users_processes_only(tmp_path, monkeypatch):
    """The pointer a format("eos") commit leaves for the listener: read back, rewritten only when the
    location changes, removed at the query's end, in directories only the user can read (a ledger URI
    may carry keys)."""
    import os
    import stat
    import tempfile

    from eos._spark import _ledger

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert _ledger.announced("q1") is None
    _ledger.announce("q1", "s3://bucket/ckpt/eos-ledger")
    _ledger.announce("q1", "s3://bucket/ckpt/eos-ledger")
    assert _ledger.announced("q1") == "s3://bucket/ckpt/eos-ledger"
    _ledger.announce("q1", "/other/eos-ledger")
    assert _ledger.announced("q1") == "/other/eos-ledger"
    pointers = _ledger._pointers()
    for directory in (os.path.dirname(pointers), pointers):
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700, directory
    assert os.listdir(pointers) == ["q1"]  # no temporary file left
    _ledger.forget("q1")
    assert _ledger.announced("q1") is None
    _ledger.announce("q2", "")  # a query that keeps no ledger
    assert _ledger.announced("q2") == ""
