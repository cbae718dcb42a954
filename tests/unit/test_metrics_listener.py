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
    location changes, removed at the query's end, in a directory and a file only the user can read (a
    ledger URI may carry keys); a directory another user could reach is not used, and nothing there
    fails the commit."""
    import os
    import stat
    import tempfile

    from eos._fs import private_directory
    from eos._spark import _ledger

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert _ledger.announced("q1") is None
    _ledger.announce("q1", "s3://bucket/ckpt/eos-ledger")
    pointers = private_directory("eos-queries")
    written = (pointers / "q1").stat()
    _ledger.announce("q1", "s3://bucket/ckpt/eos-ledger")
    assert (pointers / "q1").stat().st_ino == written.st_ino, "the same location is not written again"
    assert _ledger.announced("q1") == "s3://bucket/ckpt/eos-ledger"
    _ledger.announce("q1", "relative/eos-ledger")
    assert _ledger.announced("q1") == os.path.abspath("relative/eos-ledger")
    assert stat.S_IMODE(pointers.stat().st_mode) == 0o700
    assert stat.S_IMODE((pointers / "q1").stat().st_mode) == 0o600
    assert os.listdir(pointers) == ["q1"]  # no temporary file left
    _ledger.forget("q1")
    assert _ledger.announced("q1") is None
    _ledger.announce("q2", "")  # a query that keeps no ledger
    assert _ledger.announced("q2") == ""
    _ledger.announce("../x", "/elsewhere")  # not a query id: no file outside the directory
    assert not (tmp_path / "x").exists()

    pointers.chmod(0o777)  # a directory others can write: not used
    _ledger.announce("q3", "s3://AK:SECRET@bucket/ledger")
    assert _ledger.announced("q3") is None and not (pointers / "q3").exists()
    pointers.chmod(0o700)
    os.rename(pointers, tmp_path / "moved")
    pointers.write_text("not a directory")  # nor a file where the directory should be
    _ledger.announce("q4", "/ledger")
    assert _ledger.announced("q4") is None


# -- counting: a process's listeners over format("eos")'s ledger and foreach_writer's accumulator ----


def _progress(query: str, batch_id: int, latest: dict | None = None, add_batch_ms: int = 100):
    offsets = json.dumps(latest) if latest is not None else None
    return SimpleNamespace(
        id=query,
        batchId=batch_id,
        durationMs={"addBatch": add_batch_ms},
        sources=[SimpleNamespace(latestOffset=offsets)],
    )


def _row(partition: int, records: int, last_offset: int, **figures) -> dict:
    return {
        "topic": "in",
        "partition": partition,
        "transactional_id": f"app:in:{partition}",
        "records_in": records,
        "records_out": records,
        "skipped": 0,
        "transactions": 1,
        "commit_seconds_max": 0.01,
        "commit_seconds_total": 0.01,
        "last_offset": last_offset,
        "committed_before": None,
        **figures,
    }


def _attempt(outcome: str, *rows: dict) -> dict:
    return {"outcome": outcome, "app_id": "app", "guarantee": "exactly_once", "partitions": list(rows)}


@pytest.fixture
def metrics(monkeypatch, tmp_path):
    """A fresh prometheus registry for eos's families, the pointers in tmp_path, no runs counted."""
    import tempfile

    import prometheus_client

    from eos._spark import _listener, _metrics

    registry = prometheus_client.CollectorRegistry()
    for name in ("Counter", "Gauge", "Histogram"):
        original = getattr(prometheus_client, name)
        monkeypatch.setattr(
            prometheus_client, name, lambda *a, _c=original, **k: _c(*a, registry=registry, **k)
        )
    monkeypatch.setattr(_metrics, "_families", {})
    monkeypatch.setattr(_metrics, "_lag_shown", {})
    monkeypatch.setattr(_listener, "_runs", {})
    monkeypatch.setattr(_listener, "_accumulator", [])
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def value(name: str, **labels) -> float | None:
        return registry.get_sample_value(name, {"app_id": "app", **labels})

    return value


def _ledger_query(tmp_path, query: str, batches: dict[int, list[dict]]):
    from eos._spark import _ledger

    location = str(tmp_path / "ledger")
    for batch_id, attempts in batches.items():
        for attempt in attempts:
            _ledger.append(location, batch_id, attempt)
    _ledger.announce(query, location)
    return location


def test_ledger_batches_are_counted_once_however_many_listeners_and_repeats(metrics, tmp_path):
    _ledger_query(tmp_path, "q", {0: [_attempt("committed", _row(0, 10, 9))]})
    first, second = MetricsListener(0), MetricsListener(0)
    seen = []
    second.on_progress = lambda progress, summary: seen.append(summary.records_in)
    for listener in (first, second, first):
        listener.onQueryProgress(SimpleNamespace(progress=_progress("q", 0, {"in": {"0": 25}})))
    assert metrics("eos_records_in_total", topic="in", partition="0") == 10
    assert metrics("eos_batches_total") == 1
    assert metrics("eos_input_lag_records", topic="in", partition="0") == 15
    assert seen == [10], "the second listener's hook gets the batch's summary, counted by the first"


def test_a_dropped_progress_counts_every_batch_since_and_a_failed_attempts_commits(metrics, tmp_path):
    _ledger_query(
        tmp_path,
        "q",
        {
            0: [_attempt("committed", _row(0, 10, 9))],
            1: [_attempt("committed", _row(0, 10, 19))],  # its progress is dropped
            2: [
                _attempt("failed", _row(0, 5, 24)),  # a task committed 5, another failed
                _attempt("committed", _row(0, 5, 29, skipped=5)),  # the re-run skips those 5
            ],
        },
    )
    listener = MetricsListener(0)
    listener.onQueryProgress(SimpleNamespace(progress=_progress("q", 0)))
    listener.onQueryProgress(SimpleNamespace(progress=_progress("q", 2, {"in": {"0": 30}})))
    assert metrics("eos_batches_total") == 3
    assert metrics("eos_records_out_total", topic="in", partition="0") == 30
    assert metrics("eos_records_skipped_total", topic="in", partition="0") == 5
    assert metrics("eos_last_batch_id") == 2
    assert metrics("eos_input_lag_records", topic="in", partition="0") == 0


def test_foreach_epochs_are_counted_in_their_own_progress_and_a_failed_epochs_at_the_end(metrics):
    from eos._spark import _listener

    param = Figures()
    accumulator = SimpleNamespace(value={})
    _listener._accumulator[:] = [accumulator, None]
    task = {**_task(10, 9), "skipped": 0}
    param.addInPlace(accumulator.value, {("q", "app", "in", 0, 0): task})
    param.addInPlace(accumulator.value, {("q", "app", "in", 0, 1): {**_task(7, 16)}})  # epoch 1 ran ahead
    seen = []
    listener = MetricsListener(0, on_progress=lambda p, s: seen.append((p.batchId, s.records_in)))
    listener.onQueryProgress(SimpleNamespace(progress=_progress("q", 0, {"in": {"0": 30}})))
    assert seen == [(0, 10)], "epoch 1's figures wait for epoch 1's progress"
    assert metrics("eos_input_lag_records", topic="in", partition="0") == 20
    listener.onQueryProgress(SimpleNamespace(progress=_progress("q", 1, {"in": {"0": 30}})))
    assert seen[-1] == (1, 7)
    param.addInPlace(accumulator.value, {("q", "app", "in", 0, 2): _task(3, 19)})  # epoch 2 fails after
    listener.onQueryTerminated(SimpleNamespace(id="q"))
    assert metrics("eos_records_out_total", topic="in", partition="0") == 20
    assert metrics("eos_batches_total") == 2
    assert metrics("eos_input_lag_records", topic="in", partition="0") is None, "a query's lag goes with it"
    assert accumulator.value == {}


def test_two_queries_sharing_a_ledger_directory_count_only_their_own_attempts(metrics, tmp_path):
    from eos._spark import _ledger

    location = str(tmp_path / "shared")
    _ledger.append(location, 0, {**_attempt("committed", _row(0, 10, 9)), "query": "q1"})
    _ledger.append(location, 0, {**_attempt("committed", _row(1, 4, 3)), "query": "q2"})
    _ledger.announce("q1", location)
    MetricsListener(0).onQueryProgress(SimpleNamespace(progress=_progress("q1", 0)))
    assert metrics("eos_records_in_total", topic="in", partition="0") == 10
    assert metrics("eos_records_in_total", topic="in", partition="1") is None


def test_two_queries_of_one_app_keep_their_own_lag_gauges(metrics, tmp_path):
    from eos._spark import _ledger

    for query, partition in (("q1", 0), ("q2", 1)):
        location = str(tmp_path / query)
        _ledger.append(location, 0, _attempt("committed", _row(partition, 10, 9)))
        _ledger.announce(query, location)
    listener = MetricsListener(0)
    listener.onQueryProgress(SimpleNamespace(progress=_progress("q1", 0, {"in": {"0": 12}})))
    listener.onQueryProgress(SimpleNamespace(progress=_progress("q2", 0, {"in": {"1": 14}})))
    assert metrics("eos_input_lag_records", topic="in", partition="0") == 2
    assert metrics("eos_input_lag_records", topic="in", partition="1") == 4


def test_a_port_held_elsewhere_fails_the_listener_and_a_retry_adds_one(metrics):
    import socket

    from eos._spark import _listener

    added = []
    session = SimpleNamespace(streams=SimpleNamespace(addListener=added.append))
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(ConfigError, match="metrics_port"):
            _listener.listen(session, port)
    assert added == [] and not _listener._listening.get((id(session), port))
    listener = _listener.listen(session, port)
    assert added == [listener] and _listener.listen(session, port) is listener
    _listener._listening.pop((id(session), port))


def test_a_failing_on_progress_is_reported_as_such(metrics, tmp_path, caplog):
    import logging

    _ledger_query(tmp_path, "q", {0: [_attempt("committed", _row(0, 10, 9))]})

    def broken(progress, summary):
        raise RuntimeError("boom")

    with caplog.at_level(logging.WARNING, logger="eos.sink"):
        MetricsListener(0, on_progress=broken).onQueryProgress(SimpleNamespace(progress=_progress("q", 0)))
    assert metrics("eos_records_in_total", topic="in", partition="0") == 10
    assert [r.getMessage().split()[0:2] for r in caplog.records] == [["on_progress", "failed"]]
