"""Store snapshots in durable storage (`state_snapshot_location`): a lost store comes back from its newest
snapshot and the changelog's tail since, not the whole changelog; a snapshot that cannot be read, or that
belongs to a deleted and recreated changelog, falls back to the full restore and says why. Driven through
`PartitionState` on the real broker, each backend."""

from __future__ import annotations

import json
import shutil
import time

import attrs
import pytest
from confluent_kafka.admin import AdminClient

import eos
from eos import testing
from eos._kafka import _changelog
from eos._kafka._changelog import ensure_changelog
from eos._log import get_logger
from eos._scope import PartitionScope
from eos.state import _snapshot
from eos.state._partition import PartitionState
from tests.support.changelogs import write_changelog

KEYS = 20_000
TAIL = 500


def _write(bootstrap: str, changelog: str, records: list[tuple[int, int | None]], first_input: int) -> None:
    """Records (key number, value or None: a tombstone) into the changelog in one transaction."""
    encoded = [(f"key{k}".encode(), None if v is None else json.dumps(v).encode()) for k, v in records]
    write_changelog(bootstrap, changelog, encoded, first_input)


def _config(bootstrap: str, app: str, source: str, location: str, **settings) -> eos.Config:
    """exactly_once, snapshots after every batch into `location`."""
    return eos.Config(
        bootstrap_servers=bootstrap,
        app_id=app,
        output_topic=source,
        processing_guarantee="exactly_once",
        state_snapshot_location=location,
        state_snapshot_interval_ms=1,
        **settings,
    )


def _open(config, source, committed: int) -> PartitionState:
    scope = PartitionScope(config, source, 0, 0, None, get_logger("eos.task", test="snapshots"))
    state = PartitionState(scope, {"big": eos.StoreSpec()})
    state.open(committed)
    return state


def _contents(state: PartitionState) -> dict[str, int]:
    store = state.view.store("big")
    return {key: store.get(key) for key in store.keys()}


@pytest.mark.parametrize("backend", ["sqlite", "rocksdb"])
def test_a_lost_store_restores_from_its_snapshot_and_the_changelog_tail(
    bootstrap, names, tmp_path, backend, caplog
):
    import logging

    source = names("in")
    testing.create_topic(bootstrap, source, 1)
    config = _config(
        bootstrap,
        names("app"),
        source,
        f"file://{tmp_path / 'snapshots'}",
        state_dir=str(tmp_path / "state"),
        state_store=backend,
    )
    changelog = ensure_changelog(config, source, "big").name
    _write(bootstrap, changelog, [(i, i) for i in range(KEYS)], 0)
    expected = {f"key{i}": i for i in range(KEYS)}

    state = _open(config, source, KEYS)  # a new store: restored whole, then snapshotted
    try:
        assert state.restored == KEYS and state.from_snapshot == 0
        state.snapshot_if_due(KEYS)
    finally:
        state.close()
    location = _snapshot.store_location(config, source, 0, "big")
    (snapshot,) = _snapshot.listed(location)
    assert snapshot.backend == backend and snapshot.input_offset == KEYS

    # The tail: updates and deletes after the snapshot.
    tail = [(i, -i) for i in range(0, TAIL, 2)] + [(i, None) for i in range(1, TAIL, 2)]
    _write(bootstrap, changelog, tail, KEYS)
    for key, value in tail:
        if value is None:
            expected.pop(f"key{key}")
        else:
            expected[f"key{key}"] = value
    state_dir = tmp_path / "state"

    shutil.rmtree(state_dir)  # the executor's disk is gone
    with caplog.at_level(logging.INFO, logger="eos.task"):
        state = _open(config, source, KEYS + TAIL)
    try:
        assert state.from_snapshot == 1
        assert state.restored == TAIL, "only the changelog's records after the snapshot are read"
        assert _contents(state) == expected
        state.snapshot_if_due(KEYS + TAIL)  # the store moved on: a second snapshot
    finally:
        state.close()
    assert [s.offset for s in _snapshot.listed(location)][0] > snapshot.offset
    assert any("store restored from snapshot" in r.getMessage() for r in caplog.records)

    # A damaged snapshot: the full restore, and a warning naming it.
    newest = _snapshot.listed(location)[0]
    data = tmp_path / "snapshots" / newest.data_path.split("/snapshots/", 1)[1]
    damaged = bytearray(data.read_bytes())
    middle = len(damaged) // 2
    damaged[middle : middle + 64] = bytes(b ^ 0xFF for b in damaged[middle : middle + 64])
    data.write_bytes(bytes(damaged))
    shutil.rmtree(state_dir)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="eos.task"):
        state = _open(config, source, KEYS + TAIL)
    try:
        assert state.from_snapshot == 0
        assert _contents(state) == expected
        assert state.restored >= KEYS  # the whole changelog
    finally:
        state.close()
    warnings = [r.getMessage() for r in caplog.records if "snapshot cannot be read" in r.getMessage()]
    assert warnings and "SHA-256" in warnings[0], warnings


def test_a_store_left_behind_on_a_host_takes_a_newer_snapshot_over_the_records_between(
    bootstrap, names, tmp_path
):
    """Host A's store stays at an old offset while its partition runs on host B, which snapshots it
    later; back on A, the store is replaced by B's newer snapshot and reads only what came after it,
    not every record since A's offset."""
    source = names("in")
    testing.create_topic(bootstrap, source, 1)
    base = _config(bootstrap, names("app"), source, str(tmp_path / "snapshots"))
    host_a = attrs.evolve(base, state_dir=str(tmp_path / "a"))
    host_b = attrs.evolve(base, state_dir=str(tmp_path / "b"))
    changelog = ensure_changelog(base, source, "big").name
    _write(bootstrap, changelog, [(i, i) for i in range(2_000)], 0)
    _open(host_a, source, 2_000).close()  # A at the changelog's end then
    _write(bootstrap, changelog, [(i, -i) for i in range(1_500)], 2_000)  # B's batches
    state = _open(host_b, source, 3_500)
    state.snapshot_if_due(3_500)
    state.close()
    _write(bootstrap, changelog, [(i, 7) for i in range(100)], 3_500)  # after B's snapshot
    state = _open(host_a, source, 3_600)
    try:
        assert state.from_snapshot == 1
        assert state.restored <= 101, state.restored  # not the 1,600 since A's offset
        expected = {f"key{i}": 7 if i < 100 else -i if i < 1_500 else i for i in range(2_000)}
        assert _contents(state) == expected
    finally:
        state.close()


def test_a_snapshot_of_a_deleted_and_recreated_changelog_is_not_used(bootstrap, names, tmp_path, caplog):
    import logging

    source = names("in")
    testing.create_topic(bootstrap, source, 1)
    config = _config(
        bootstrap, names("app"), source, str(tmp_path / "snapshots"), state_dir=str(tmp_path / "state")
    )
    changelog = ensure_changelog(config, source, "big").name
    _write(bootstrap, changelog, [(i, i) for i in range(1_000)], 0)
    state = _open(config, source, 1_000)
    try:
        state.snapshot_if_due(1_000)
    finally:
        state.close()
    assert len(_snapshot.listed(_snapshot.store_location(config, source, 0, "big"))) == 1

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([changelog])[changelog].result(30)
    deadline = time.monotonic() + 30
    while changelog in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    _changelog.forget_ensured()
    ensure_changelog(config, source, "big")
    _write(bootstrap, changelog, [(i, 7) for i in range(300)], 0)  # another history, fewer keys
    shutil.rmtree(tmp_path / "state")
    with caplog.at_level(logging.INFO, logger="eos.task"):
        state = _open(config, source, 1_000)
    try:
        assert state.from_snapshot == 0
        assert _contents(state) == {f"key{i}": 7 for i in range(300)}
    finally:
        state.close()
    reasons = [r.getMessage() for r in caplog.records if "snapshot not used" in r.getMessage()]
    assert reasons and "topic id" in reasons[0], reasons


def test_operators_list_take_and_restore_snapshots_with_the_cli(bootstrap, names, tmp_path, capsys):
    """`eos state snapshots`, `state show --snapshot-location`, `state restore` on a host without the
    store (the newest snapshot and the changelog's tail), `state snapshot` (the store brought up to its
    changelog and snapshotted now)."""
    from confluent_kafka import Consumer, TopicPartition

    from eos.cli._main import main as cli

    source = names("in")
    testing.create_topic(bootstrap, source, 1)
    app = names("app")
    location = str(tmp_path / "snapshots")
    config = _config(bootstrap, app, source, location, state_dir=str(tmp_path / "state"))
    changelog = ensure_changelog(config, source, "big").name
    _write(bootstrap, changelog, [(i, i) for i in range(1_000)], 0)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": app})  # the input offset eos committed
    consumer.commit(offsets=[TopicPartition(source, 0, 1_200)], asynchronous=False)
    consumer.close()
    state = _open(config, source, 1_000)
    try:
        state.snapshot_if_due(1_000)
    finally:
        state.close()
    _write(bootstrap, changelog, [(i, -1) for i in range(200)], 1_000)
    common = ["--bootstrap-server", bootstrap, "--app", app, "--snapshot-location", location]

    assert cli(["state", "snapshots", *common]) == 0
    listed = capsys.readouterr().out
    assert source in listed and "big" in listed and "1000" in listed, listed
    assert cli(["state", "show", *common, "--state-dir", str(tmp_path / "state")]) == 0
    assert "SNAPSHOT" in capsys.readouterr().out

    elsewhere = str(tmp_path / "other-host")
    where = ["--topic", source, "--partition", "0", "--state-dir", elsewhere]
    assert cli(["state", "restore", *common, *where]) == 0
    out = capsys.readouterr().out
    assert "1 store(s) from a snapshot" in out and "at changelog offset" in out, out
    restored = int(out.split("store(s) from a snapshot, ")[1].split()[0])
    assert 200 <= restored <= 202, out  # the tail (and its transaction's marker), not the 1,000 before

    assert cli(["state", "snapshot", *common, *where]) == 0
    assert "1 snapshot(s) written" in capsys.readouterr().out
    assert _snapshot.listed(_snapshot.store_location(config, source, 0, "big"))[0].offset > 1_000


@pytest.mark.long  # two driver processes (~25 s): make chaos; make test runs the PartitionState ones above
def test_a_pipeline_whose_executor_lost_its_disk_restores_from_snapshots_and_counts_stay_exact(
    bootstrap, names, tmp_path
):
    """The stateful running count through foreachBatch with snapshots after every batch: the executor's
    state directory is lost after a first run, and a second run over more input rebuilds every store
    from its snapshot without reading the changelogs (each snapshot is at its changelog's end; the
    tail-reading path is the test above). Output exactly once, counts exact (read_committed): the
    snapshots hold the counts."""
    from conftest import finish, start_pipeline

    from tests.support.summaries import read_summaries

    source, output, app_id = names("in"), names("out"), names("app")
    partitions = 4
    testing.create_topic(bootstrap, source, partitions)
    testing.create_topic(bootstrap, output, partitions)
    first = testing.produce_sequence(bootstrap, source, partitions, 300)
    state_dir = tmp_path / "state"
    env = {
        "EOS_PROCESSING_GUARANTEE": "exactly_once",
        "EOS_STATE_DIR": str(state_dir),
        "EOS_STATE_SNAPSHOT_LOCATION": str(tmp_path / "snapshots"),
        "EOS_STATE_SNAPSHOT_INTERVAL_MS": "1",
    }
    flags = {"stateful": True, "max_offsets": 400}

    def pipeline(run: int) -> list[dict]:
        summaries = tmp_path / f"s{run}.jsonl"
        finish(
            start_pipeline(bootstrap, app_id, source, output, tmp_path / "ckpt", summaries, env=env, **flags)
        )
        return read_summaries(summaries)

    batches = pipeline(1)
    assert [b["snapshots_taken"] for b in batches] == [partitions] * len(batches), batches
    shutil.rmtree(state_dir)  # the executor's disk is gone
    second = testing.produce_sequence(bootstrap, source, partitions, 100, start=300)
    batches = pipeline(2)
    assert batches[0]["snapshots_restored"] == partitions, batches[0]
    assert batches[0]["restored"] == 0, "a full restore would read every changelog record"

    sent = {p: first[p] + second[p] for p in range(partitions)}
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    counts = testing.expected_running_counts(sent)
    result = testing.compare(testing.flatten(sent), records, hanging, running_counts=counts)
    assert result.exactly_once and result.state_mismatches == 0, result
