"""Holes a reliability review found, each made to happen for real (real broker, real Spark): offsets
committed by something else, a changelog whose beginning moved, a changelog that cannot back its store,
input partitions added under a running query, a record the broker (not the client) refuses, a
`process` slower than transaction.timeout.ms, and a producer per input partition kept without bound."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from conftest import commit_foreign_offset, finish, group_offsets, run_query, start_pipeline

import eos
from eos import cli, testing
from eos._core._arrow import Layout
from eos._core._spec import Functions, TaskSpec
from eos._core._task import run_partition
from eos._kafka import _offsets
from examples.pipeline import count_per_key
from tests.support.processes import pyspark_python, threads_and_rss
from tests.support.summaries import read_summaries

ROOT = Path(__file__).resolve().parents[2]


def _exactly_once(bootstrap, app_id, output, **kw) -> eos.Config:
    return eos.Config(
        bootstrap_servers=bootstrap,
        app_id=app_id,
        output_topic=output,
        processing_guarantee="exactly_once",
        **kw,
    )


# -- committed offsets that eos did not commit -----------------------------------------------------


def test_a_foreign_committed_offset_is_refused_and_nothing_is_written_or_skipped(
    spark, bootstrap, names, tmp_path, data_path
):
    """2,000 records written, 1,000 more produced; a plain consumer reusing the group id commits partition
    0 to its end. Before eos stamped its offsets, the next run exited 0 and 500 records never reached
    the output."""
    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, 2)
    testing.create_topic(bootstrap, output, 2)
    sent = testing.produce_sequence(bootstrap, source, 2, 1_000)
    config = _exactly_once(bootstrap, names("app"), output, data_path=data_path)
    run_query(spark, config, [source], tmp_path / "ckpt")
    more = testing.produce_sequence(bootstrap, source, 2, 500, start=1_000)
    stamped = _offsets.committed_entries(config, [(source, 0), (source, 1)])
    own = _offsets.fields(_offsets.stamp(config)).items()  # app and output; a transaction adds its witnesses
    assert all(_offsets.fields(e.metadata).items() >= own for e in stamped.values()), stamped

    commit_foreign_offset(bootstrap, config.app_id, source, 0, 1_500)

    with pytest.raises(eos.ForeignOffsetError) as info:
        run_query(spark, config, [source], tmp_path / "ckpt")
    err = info.value
    assert (err.group, err.topic, err.partition, err.offset) == (config.app_id, source, 0, 1_500)
    assert f"{source}/0" in str(err) and "1500" in str(err)
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert len(records) == 2_000 and hanging == [], "nothing was written"
    entries = _offsets.committed_entries(config, [(source, 0), (source, 1)])
    assert {tp: e.offset for tp, e in entries.items()} == {(source, 0): 1_500, (source, 1): 1_000}

    # The operator puts the offset back where eos was: `eos offsets reset` stamps what it writes.
    target = json.dumps({source: {"0": 1_000}})
    reset = ["offsets", "reset", "--app", config.app_id, "--to", target, "--execute"]
    assert cli.main(["--bootstrap-server", bootstrap, *reset]) == 0
    run_query(spark, config, [source], tmp_path / "ckpt")
    for partition, values in more.items():
        sent[partition].extend(values)
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    assert result.exactly_once, result


def test_accept_foreign_offsets_trusts_them(spark, bootstrap, names, tmp_path, data_path):
    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, 1)
    testing.create_topic(bootstrap, output, 1)
    testing.produce_sequence(bootstrap, source, 1, 100)
    config = _exactly_once(bootstrap, names("app"), output, accept_foreign_offsets=True, data_path=data_path)
    commit_foreign_offset(bootstrap, config.app_id, source, 0, 60)
    sink = run_query(spark, config, [source], tmp_path / "ckpt")
    assert sum(s.records_out for s in sink.history) == 40, "rows below the foreign offset are skipped"
    assert group_offsets(config, source, 1) == {0: 100}


# -- changelogs ------------------------------------------------------------------------------------


def _stateful(bootstrap, app_id, output, state_dir, **kw) -> eos.Config:
    return _exactly_once(bootstrap, app_id, output, state_dir=str(state_dir), **kw)


def _count(spark, config, source, checkpoint):
    sink = eos.sink(config, count_per_key, stores={"counts": "json"})
    return run_query(spark, config, [source], checkpoint, sink=sink)


def test_a_changelog_whose_start_moved_past_the_store_is_restored_from_its_beginning(
    spark, bootstrap, names, tmp_path
):
    """Host A's store is checkpointed at offset c; host B carries on and writes the changelog further;
    then everything before B's last transaction leaves the changelog (DeleteRecords, as a retention on a
    `compact,delete` changelog would). Back on A, a consumer positioned at c would jump to the end
    (auto.offset.reset) and leave A's store stale but marked clean."""
    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, 2)
    testing.create_topic(bootstrap, output, 2)
    app_id, checkpoint = names("app"), tmp_path / "ckpt"
    # Kafka refuses DeleteRecords on a compact-only topic; compact,delete (a changelog with retention,
    # which eos accepts) allows it.
    changelog = f"{app_id}-{source}-counts-changelog"
    testing.create_topic(bootstrap, changelog, 2, config={"cleanup.policy": "compact,delete"})
    sent = testing.produce_sequence(bootstrap, source, 2, 200)  # every key (k0..k96) at least twice
    _count(spark, _stateful(bootstrap, app_id, output, tmp_path / "host-a"), source, checkpoint)
    more = testing.produce_sequence(bootstrap, source, 2, 400, start=200)
    b = _stateful(bootstrap, app_id, output, tmp_path / "host-b", commit_every=200)
    _count(spark, b, source, checkpoint)  # two transactions per partition, each writing every key

    cut = {}
    for partition in range(2):  # the first changelog record of B's second transaction (input >= 400)
        records, _ = testing.read_topic(bootstrap, changelog, isolation="read_uncommitted", timeout=30)
        offsets = [
            r.offset
            for r in records
            if r.partition == partition and int(dict(r.headers)["eos.input.offset"]) >= 400
        ]
        cut[partition] = min(offsets)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(changelog, p, o) for p, o in cut.items()])
    for future in futures.values():
        future.result(30)

    last = testing.produce_sequence(bootstrap, source, 2, 100, start=600)
    _count(spark, _stateful(bootstrap, app_id, output, tmp_path / "host-a"), source, checkpoint)
    for extra in (more, last):
        for partition, values in extra.items():
            sent[partition].extend(values)
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    result = testing.compare(
        testing.flatten(sent), records, hanging, running_counts=testing.expected_running_counts(sent)
    )
    assert result.exactly_once, result  # state_mismatches counts stale running totals


def test_a_changelog_that_is_not_compacted_or_too_small_is_refused(spark, bootstrap, names, tmp_path):
    source, output, app_id = names("in"), names("out"), names("app")
    testing.create_topic(bootstrap, source, 2)
    testing.create_topic(bootstrap, output, 2)
    testing.produce_sequence(bootstrap, source, 2, 10)
    changelog = f"{app_id}-{source}-counts-changelog"
    testing.create_topic(bootstrap, changelog, 2, config={"cleanup.policy": "delete"})
    config = _stateful(bootstrap, app_id, output, tmp_path / "state")
    with pytest.raises(Exception, match="ChangelogError") as info:
        _count(spark, config, source, tmp_path / "ckpt")
    assert "cleanup.policy=delete" in str(info.value) and changelog in str(info.value)
    records, _ = testing.read_topic(bootstrap, output, timeout=10)
    assert records == []

    with pytest.raises(eos.ConfigError, match="cleanup.policy"):
        _stateful(bootstrap, app_id, output, tmp_path, changelog_topic_config={"cleanup.policy": "delete"})


def test_input_partitions_added_under_a_running_stateful_query_stop_it_clearly(
    spark, bootstrap, names, tmp_path
):
    source, output, app_id = names("in"), names("out"), names("app")
    testing.create_topic(bootstrap, source, 2)
    testing.create_topic(bootstrap, output, 2)
    testing.produce_sequence(bootstrap, source, 2, 50)
    config = _stateful(bootstrap, app_id, output, tmp_path / "state")
    _count(spark, config, source, tmp_path / "ckpt")  # creates a 2-partition changelog
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(source, 3)])[source].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(source, b"in|2|0", b"k0", partition=2)
    assert producer.flush(30) == 0
    with pytest.raises(Exception, match="ChangelogError") as info:
        _count(spark, config, source, tmp_path / "ckpt")
    message = str(info.value)
    assert f"{app_id}-{source}-counts-changelog" in message and "has 2 partitions" in message
    assert "partition 2" in message


# -- a record the broker refuses -------------------------------------------------------------------


def test_a_record_the_broker_refuses_is_named_and_nothing_is_visible(spark, bootstrap, names, tmp_path):
    """The output topic takes records of at most 1,000 bytes; one input record of 2,000 bytes sits among
    small ones. librdkafka sends it (its own limit is 1 MB), and the broker refuses the whole record
    batch it travels in: eos must name that record, not the first of its batch."""
    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, 1)
    testing.create_topic(bootstrap, output, 1, config={"max.message.bytes": "1000"})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for i in range(40):
        producer.produce(source, b"x" * (2_000 if i == 25 else 50), b"k", partition=0)
    assert producer.flush(30) == 0
    config = _exactly_once(bootstrap, names("app"), output)
    with pytest.raises(Exception, match="ProduceError") as info:
        run_query(spark, config, [source], tmp_path / "ckpt")
    message = str(info.value)
    assert f"input record {source}/0@25" in message, message[-2000:]
    assert "too large" in message.lower()
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert records == [] and hanging == []
    assert group_offsets(config, source, 1) == {0: 0}  # where eos.read_stream started it: unchanged


def test_a_changelog_record_the_broker_refuses_is_named_and_nothing_is_visible(
    spark, bootstrap, names, tmp_path
):
    """The same, for a store's write: the changelog takes record batches of at most 100,000 bytes and
    one input record's value, kept in the store, is 200,000 (the others' 50). Changelog writes share
    one delivery callback, which knows only that a delivery failed; the record-by-record redo must still
    name the input record, and its isolation must send each suspect's store writes too."""
    source, output, app_id = names("in"), names("out"), names("app")
    testing.create_topic(bootstrap, source, 1)
    testing.create_topic(bootstrap, output, 1)
    changelog = f"{app_id}-{source}-last-changelog"
    testing.create_topic(
        bootstrap, changelog, 1, config={"cleanup.policy": "compact", "max.message.bytes": "100000"}
    )
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for i in range(40):
        producer.produce(source, b"x" * (200_000 if i == 25 else 50), b"k%d" % i, partition=0)
    assert producer.flush(30) == 0

    def keep_last(row, state):
        state.store("last").put(row.key, row.value)
        return row.key

    config = _stateful(bootstrap, app_id, output, tmp_path / "state")
    sink = eos.sink(config, keep_last, stores={"last": "bytes"})
    with pytest.raises(Exception, match="ProduceError") as info:
        run_query(spark, config, [source], tmp_path / "ckpt", sink=sink)
    message = str(info.value)
    assert f"input record {source}/0@25" in message, message[-2000:]
    assert "too large" in message.lower()
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert records == [] and hanging == []
    # a compacted topic takes no marker (it has no key): read up to the end instead
    assert testing.read_topic(bootstrap, changelog) == ([], [])
    assert group_offsets(config, source, 1) == {0: 0}

    # With dead letters on, that record alone is one, and every other one's output and state land once.
    dlq = names("dlq")
    testing.create_topic(bootstrap, dlq, 1)
    config = _stateful(
        bootstrap, app_id, output, tmp_path / "state", on_error="dead_letter", dead_letter_topic=dlq
    )
    sink = eos.sink(config, keep_last, stores={"last": "bytes"})
    run_query(spark, config, [source], tmp_path / "ckpt", sink=sink)
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert [r.value for r in records] == [b"k%d" % i for i in range(40) if i != 25] and hanging == []
    dead, _ = testing.read_topic(bootstrap, dlq, marker=testing.write_markers(bootstrap, dlq))
    assert len(dead) == 1 and dead[0].key == b"k25", dead
    kept, _ = testing.read_topic(bootstrap, changelog)
    assert sorted(r.key for r in kept) == sorted(b"k%d" % i for i in range(40) if i != 25)
    assert group_offsets(config, source, 1) == {0: 40}


# -- a process slower than the transaction may be open ---------------------------------------------


def test_a_process_slower_than_the_transaction_timeout_is_told_apart_from_a_zombie(bootstrap, names):
    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, 1)
    testing.create_topic(bootstrap, output, 1)
    config = _exactly_once(
        bootstrap, names("app"), output, transaction_timeout_ms=2_000, commit_interval_ms=1_000
    )

    def slow(row, state):
        if row.offset == 3:
            time.sleep(9)  # the broker aborts transactions older than 2 s (it looks every 5 s)
        return row.value

    batch = pa.RecordBatch.from_pydict(
        {
            "topic": pa.array([source] * 5),
            "partition": pa.array([0] * 5, pa.int32()),
            "offset": pa.array(range(5), pa.int64()),
            "value": pa.array([b"v%d" % i for i in range(5)]),
        }
    )
    started = time.monotonic()
    with pytest.raises(eos.TransactionTimeoutError) as info:
        list(run_partition(TaskSpec(config, 0, Layout(), Functions(process=slow)), iter([batch])))
    message = str(info.value)
    assert f"{source}/0" in message and "transaction_timeout_ms (2000)" in message
    assert "process faster" in message
    assert time.monotonic() - started < 60, "a clear error, not retries until the query dies"
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert records == [] and hanging == []


def test_a_transaction_timeout_above_the_brokers_limit_is_a_config_error_at_start(spark, bootstrap, names):
    config = _exactly_once(  # the broker's transaction.max.timeout.ms is 900000
        bootstrap, names("app"), names("out"), transaction_timeout_ms=3_600_000
    )
    testing.create_topic(bootstrap, config.output_topic, 1)
    empty = spark.createDataFrame([], "topic string, partition int, offset long, value binary")
    with pytest.raises(eos.ConfigError, match="transaction.max.timeout.ms \\(900000\\)"):
        eos.sink(config)(empty, 0)


# -- producers kept per Python worker --------------------------------------------------------------


def _workers_of(root: int) -> dict[int, tuple[int, int]]:
    """The PySpark Python workers under process `root`: pid -> (threads, RSS in KiB). Workers that exit
    while they are read are left out."""
    out = {}
    for proc in pyspark_python(root):
        usage = threads_and_rss(proc.pid)
        if usage is not None:
            out[proc.pid] = (usage[0], usage[1] // 1024)
    return out


# `make chaos` (long-test) only: 25 s of make test's 15 minutes on a clean clone of 12d0bbe; the cache's
# bound itself is tests/unit/test_producer_cache.py's.
@pytest.mark.slow
@pytest.mark.long
def test_producers_kept_per_worker_stay_bounded_with_32_input_partitions(bootstrap, names, tmp_path):
    """32 input partitions, 2 batches: each Python worker sees most partitions. One producer kept per
    partition ever seen was ~5 threads and a few MiB each, forever; the cache keeps at most 4 here."""
    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, 32)
    testing.create_topic(bootstrap, output, 4)
    sent = testing.produce_sequence(bootstrap, source, 32, 20)
    summaries = tmp_path / "summaries.jsonl"
    env = {"EOS_PROCESSING_GUARANTEE": "exactly_once", "EOS_MAX_PRODUCERS_PER_WORKER": "4"}
    proc = start_pipeline(
        bootstrap, names("app"), source, output, tmp_path / "ckpt", summaries, env, max_offsets=320
    )
    peak: dict[int, tuple[int, int]] = {}
    while proc.running():
        for pid, (threads, rss) in _workers_of(proc.proc.pid).items():
            old = peak.get(pid, (0, 0))
            peak[pid] = (max(old[0], threads), max(old[1], rss))
        time.sleep(0.2)
    finish(proc)
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    assert result.exactly_once, result
    assert len(read_summaries(summaries)) == 2
    print(f"peak threads and RSS (KiB) of each Python worker over 64 partition tasks: {peak}")
    assert peak, "no Python worker was seen"
    for threads, rss in peak.values():
        # 4 producers of ~3 threads, the admin and group clients, PySpark's own: ~30 (measured 30). One
        # producer per partition ever seen: ~100 (measured 98 with EOS_MAX_PRODUCERS_PER_WORKER=1000).
        assert threads <= 50, peak
        assert rss < 600 * 1024, peak


# -- a kept producer fences like a fresh one ------------------------------------------------------------


def start_worker(tmp_path, bootstrap, app_id, source, output, name, env=None) -> subprocess.Popen:
    """A Python worker's life without Spark (tests/integration/worker_app.py); its log in tmp_path."""
    argv = [sys.executable, "-m", "tests.integration.worker_app", bootstrap, app_id, source, output, "5000"]
    log = open(tmp_path / f"{name}.log", "wb")
    return subprocess.Popen(
        argv,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )


def task(proc: subprocess.Popen, batch: int, start: int, end: int) -> dict | None:
    """Rows [start, end) of input partition 0 as batch `batch` to a worker: its stats (None: it died)."""
    proc.stdin.write(json.dumps({"batch": batch, "from": start, "to": end}) + "\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    return json.loads(line) if line else None


def stop_worker(proc: subprocess.Popen) -> None:
    proc.stdin.close()
    proc.wait(30)


@pytest.mark.parametrize("crash_at", ["after_send_offsets", "before_produce"])
def test_a_kept_producer_takes_the_partition_back_from_a_worker_killed_mid_task(
    bootstrap, names, tmp_path, crash_at
):
    """Two Python workers take input partition 0 in turn, keeping their producers between tasks as
    PySpark workers do; worker 1 commits batch 0. Worker 2 takes batch 1 and is SIGKILLed, and Spark
    retries the task on worker 1, whose producer was kept from batch 0:
    - after_send_offsets (F3): worker 2's transaction is open with the partition's offsets in it, and
      step 2 must abort it for the kept producer as for a fresh one. Before, the kept producer skipped
      init_transactions and the committed-offset read waited on UNSTABLE_OFFSET_COMMIT until
      operation_timeout_ms (5 s here; the transaction stays open for transaction_timeout_ms, 60 s)
      and failed the attempt.
    - before_produce (F1): worker 2's fresh producer's init_transactions fenced worker 1's, and nothing
      was committed since, so worker 1's own stamp is still the committed metadata and it skips step
      2's round trip: its first write is refused as fenced (8d), and it takes the partition back with
      a fresh producer."""
    source, output, app_id = names("in"), names("out"), names("app")
    testing.create_topic(bootstrap, source, 1)
    testing.create_topic(bootstrap, output, 1)
    sent = testing.produce_sequence(bootstrap, source, 1, 300)
    once = tmp_path / "once"
    once.mkdir()
    args = (tmp_path, bootstrap, app_id, source, output)
    first = start_worker(*args, "worker-1")
    try:
        assert task(first, 0, 0, 100)["last_offset"] == 99
        crash = {"EOS_CRASH_AT": crash_at, "EOS_CRASH_ONCE_DIR": str(once)}
        second = start_worker(*args, "worker-2", crash)
        assert task(second, 1, 100, 200) is None, "worker 2 should have died"
        assert second.wait(30) == -signal.SIGKILL
        assert (once / f"crashed-{crash_at}").exists(), f"the kill at {crash_at} never came"

        retried = task(first, 1, 100, 200)  # Spark's retry, on the worker with a kept producer
        assert "error" not in retried, retried
        assert (retried["producers_replaced"], retried["skipped"], retried["last_offset"]) == (1, 0, 199)
        assert task(first, 2, 200, 300)["producers_replaced"] == 0  # the fresh producer is kept in turn
    finally:
        stop_worker(first)
    if crash_at == "before_produce":
        log = (tmp_path / "worker-1.log").read_text().splitlines()
        [found] = [ln for ln in log if "kept producer was fenced" in ln]
        # found out by its first write (adding the output partition), not by step 2's round trip
        assert "Failed to add partitions to transaction" in found, found
        assert "send_offsets_to_transaction" not in found, found
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    assert result.exactly_once, result


def test_a_kept_producer_displaced_by_another_worker_is_found_out_before_it_writes(
    bootstrap, names, tmp_path
):
    """Spark gives a partition's next task to whichever Python worker is free, so worker 2's fresh
    producer for input partition 0 fences the producer worker 1 kept from batch 0 (in `make bench` half
    the tasks met one). Worker 1 gets batch 2: the committed offset is worker 2's commit, not its own
    last one, so it replaces its producer before any call, and a fresh producer writes the batch. (At
    first the displaced producer produced the rows and learnt it was fenced from their delivery; then
    step 2 sent the committed offset into the transaction first, and the broker refused it there.)"""
    source, output, app_id = names("in"), names("out"), names("app")
    testing.create_topic(bootstrap, source, 1)
    testing.create_topic(bootstrap, output, 1)
    sent = testing.produce_sequence(bootstrap, source, 1, 300)
    args = (tmp_path, bootstrap, app_id, source, output)
    first, second = start_worker(*args, "worker-1"), start_worker(*args, "worker-2")
    try:
        assert task(first, 0, 0, 100)["last_offset"] == 99
        assert task(second, 1, 100, 200)["producers_replaced"] == 0  # fresh: its init fences worker 1's
        third = task(first, 2, 200, 300)
        assert "error" not in third, third
        assert (third["producers_replaced"], third["skipped"], third["last_offset"]) == (1, 0, 299)
    finally:
        stop_worker(first)
        stop_worker(second)
    log = (tmp_path / "worker-1.log").read_text()
    assert "a newer producer committed this partition" in log, log[-3000:]  # no round trip, no delivery
    assert "send_offsets_to_transaction" not in log and "fenced" not in log.lower(), log[-3000:]
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    assert result.exactly_once, result
