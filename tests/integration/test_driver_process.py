"""The pipeline as its own driver process: a guarantee switched by environment alone, the whole driver
SIGKILLed mid-stream (with a Python worker killed between produce and offsets, F2), broker restarts (F7)
and a paused zombie (F8)."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import sys
import time
from pathlib import Path

import psutil
import pytest
from confluent_kafka import Consumer, TopicPartition
from conftest import finish, kill_after_commits, kill_after_committed, seed, start_pipeline

import eos
from eos import testing
from tests.support.processes import DriverProcess
from tests.support.summaries import read_summaries

PARTITIONS = 4


def _log_end_offsets(bootstrap, topic) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-end-offsets"})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)
        )
    finally:
        consumer.close()


# `make chaos` (long-test) only: 26 s (a clean clone of 154be98 took 16 min 42 s on a slow day). make
# test runs both guarantees in-process (test_sink.py); Config.from_env's EOS_PROCESSING_GUARANTEE is
# unit-tested.
@pytest.mark.slow
@pytest.mark.long
def test_guarantee_switches_through_environment_alone(bootstrap, names, tmp_path):
    """The same program, once per guarantee, with only EOS_PROCESSING_GUARANTEE changed."""
    source, _, sent = seed(bootstrap, names, 500)
    seen = {}
    for guarantee in ("at_least_once", "exactly_once"):
        output = names(f"out-{guarantee}")
        testing.create_topic(bootstrap, output, PARTITIONS)
        summaries = tmp_path / f"{guarantee}.jsonl"
        proc = start_pipeline(
            bootstrap,
            names(f"app-{guarantee}"),
            source,
            output,
            tmp_path / guarantee,
            summaries,
            env={"EOS_PROCESSING_GUARANTEE": guarantee},
        )
        finish(proc)
        result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
        assert result.exactly_once, result
        seen[guarantee] = (
            {s["guarantee"] for s in read_summaries(summaries)},
            _log_end_offsets(bootstrap, output),
        )
    assert seen["at_least_once"][0] == {"at_least_once"}
    assert seen["exactly_once"][0] == {"exactly_once"}
    # The broker's own evidence: transactions leave commit markers in the log, idempotent writes do not.
    # (Each log also holds one marker record per partition written by the verification.)
    assert seen["at_least_once"][1] == 2_000 + PARTITIONS
    assert seen["exactly_once"][1] > 2_000 + PARTITIONS


# Both: `make chaos` (long-test). make test SIGKILLs classic foreachBatch drivers in test_dead_letters.py
# (twice, stateful) and test_state.py, a format("eos") driver in test_format_eos.py, and Connect workers in
# test_state.py; this test's Connect run took 40 s of make test's 15 minutes (16 min 4 s in all on a clean
# clone of 32ac434).
@pytest.mark.slow
@pytest.mark.long  # make chaos; make test SIGKILLs drivers in test_format_eos and kills the JVM at F3 below
@pytest.mark.parametrize("api", ["classic", "connect", "jvm", "connect-jvm"])
def test_driver_sigkilled_three_times_stays_exactly_once(bootstrap, names, tmp_path, api):
    """The driver's whole process group is SIGKILLed three times, each time right after a transaction of
    a batch committed while the batch's other transactions were still being written; every restart
    re-runs that batch and must skip what was committed. On top, on the Python path, one Python worker
    SIGKILLs itself after its outputs were produced and before the offsets were sent (F2): Spark retries
    the task. `jvm`: the JVM data path (no on_commit: the kills follow the group's committed offsets; its
    crash points kill the JVM itself, tested below); `connect-jvm`: the same under Spark Connect, whose
    server runs the JVM writer's tasks through eos's plugin."""
    source, output, sent = seed(bootstrap, names, 3_000)
    app_id, checkpoint, summaries = names("app"), tmp_path / "ckpt", tmp_path / "summaries.jsonl"
    commits, once = tmp_path / "commits.jsonl", tmp_path / "once"
    once.mkdir()
    jvm = api.endswith("jvm")
    env = {"EOS_PROCESSING_GUARANTEE": "exactly_once", "EOS_DATA_PATH": "jvm" if jvm else "python"}
    if not jvm:
        env.update(EOS_CRASH_AT="after_produce", EOS_CRASH_ONCE_DIR=str(once))
    flags = {"max_offsets": 2_000, "commit_every": 100}
    if not jvm:
        flags["commits"] = commits
    if api.startswith("connect"):
        flags["remote"] = "local"
    config = eos.Config(bootstrap_servers=bootstrap, app_id=app_id, output_topic=output)
    rng = random.Random(os.environ.get("EOS_TEST_SEED", "7"))
    for _ in range(3):
        proc = start_pipeline(bootstrap, app_id, source, output, checkpoint, summaries, env=env, **flags)
        # Kill after a random number of commits (at most one batch's worth), so mid-batch; the helpers
        # fail the test if they never come.
        if jvm:
            kill_after_committed(proc, config, source, PARTITIONS, 100 * rng.randint(1, 12))
        else:
            kill_after_commits(proc, commits, rng.randint(1, 12))
    proc = start_pipeline(bootstrap, app_id, source, output, checkpoint, summaries, env=env, **flags)
    finish(proc)

    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    history = read_summaries(summaries)
    skipped = sum(s["skipped"] for s in history)
    print(f"{api}: 3 driver kills, {len(history)} batch summaries, skipped on replay {skipped}: {result}")
    assert result.exactly_once and result.missing == 0, result
    assert {s["data_path"] for s in history} == {"jvm" if jvm else "python"}
    if not jvm:
        assert (once / "crashed-after_produce").exists(), "the worker crash point never fired"
    assert skipped > 0, "no kill landed mid-batch: nothing was re-run"
    # Classic Spark shows that the Kafka source gave each input partition its own task; under Spark
    # Connect the tasks' step 3a finds that each holds all of its partition: neither regroups.
    assert {s["regrouped"] for s in history} == {False}


_POINTS = ("before_produce", "after_produce", "after_send_offsets", "after_commit")


# make test runs the JVM path at F3 (the Python path's worker kills run in test_reliability); the other
# seven in make chaos
@pytest.mark.parametrize(
    "path,point",
    [
        (path, point)
        if (path, point) == ("jvm", "after_send_offsets")
        else pytest.param(path, point, marks=pytest.mark.long)
        for path in ("python", "jvm")
        for point in _POINTS
    ],
)
def test_a_crash_at_each_step_of_a_transaction_stays_exactly_once(bootstrap, names, tmp_path, path, point):
    """F1-F4 on both data paths: the process that writes SIGKILLs itself at the step, once. On the Python
    path that is a Python worker: Spark retries its task. On the JVM path it is the executor's JVM, in
    local mode the driver's own: the query dies with it and is started again on its checkpoint. Either
    way, every record once, read_committed."""
    source, output, sent = seed(bootstrap, names, 1_000)
    app_id, checkpoint, summaries = names("app"), tmp_path / "ckpt", tmp_path / "summaries.jsonl"
    once = tmp_path / "once"
    once.mkdir()
    env = {
        "EOS_PROCESSING_GUARANTEE": "exactly_once",
        "EOS_DATA_PATH": path,
        "EOS_CRASH_AT": point,
        "EOS_CRASH_ONCE_DIR": str(once),
    }
    flags = {"max_offsets": 2_000, "commit_every": 100}
    proc = start_pipeline(bootstrap, app_id, source, output, checkpoint, summaries, env=env, **flags)
    code = proc.wait(240)
    assert (once / f"crashed-{point}").exists(), f"the crash point never fired:\n{proc.log_tail()}"
    if path == "jvm":
        assert code != 0, "the driver outlived its JVM's crash"
        proc = start_pipeline(bootstrap, app_id, source, output, checkpoint, summaries, env=env, **flags)
        code = proc.wait(240)
    assert code == 0, proc.log_tail()
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    assert result.exactly_once and result.missing == 0, result
    assert {s["data_path"] for s in read_summaries(summaries)} == {path}


# make chaos (long-test), with the harness's own broker restarts (6 a pipeline): 42 s of make test's 15
# minutes, measured on a clean clone of a453870 (14 min 58 s in all).
@pytest.mark.slow
@pytest.mark.long
def test_broker_restarts_mid_stream_stay_exactly_once(broker, names, tmp_path):
    """F7: the broker is stopped and started again twice while the pipeline writes transactions. The
    first restart certainly hits an open transaction: a task stops itself (SIGSTOP) after producing its
    outputs and before sending its offsets (EOS_PAUSE_AT=after_produce), the test checks it is stopped,
    restarts the broker and resumes it; that transaction must then end one way or the other (committed,
    or aborted and redone) with the output exactly once. The second restart lands where it lands."""
    local = broker.require_local()
    source, output, sent = seed(local.bootstrap_servers, names, 1_500)
    summaries, once = tmp_path / "summaries.jsonl", tmp_path / "once"
    once.mkdir()
    proc = start_pipeline(
        local.bootstrap_servers,
        names("app"),
        source,
        output,
        tmp_path / "ckpt",
        summaries,
        env={
            "EOS_PROCESSING_GUARANTEE": "exactly_once",
            "EOS_PAUSE_AT": "after_produce",
            "EOS_CRASH_ONCE_DIR": str(once),
        },
        max_offsets=1_000,
        commit_every=300,
    )
    paused = once / "paused-after_produce"
    deadline = time.monotonic() + 120
    while not (paused.exists() and paused.read_text().strip()) and time.monotonic() < deadline:
        assert proc.running(), proc.log_tail()
        time.sleep(0.1)
    pid = int(paused.read_text())
    _wait_stopped(pid)  # the task is mid-transaction: outputs produced, nothing committed
    local.down()
    time.sleep(3)
    local.up()
    os.kill(pid, signal.SIGCONT)

    before = len(read_summaries(summaries))
    deadline = time.monotonic() + 180
    while len(read_summaries(summaries)) < before + 2 and proc.running() and time.monotonic() < deadline:
        time.sleep(0.2)
    second = proc.running()
    if second:
        local.down()
        time.sleep(3)
        local.up()
    finish(proc)

    result = testing.verify_exactly_once(local.bootstrap_servers, output, testing.flatten(sent))
    history = read_summaries(summaries)
    print(
        f"broker restarts: one with a transaction open, {'one more' if second else 'no second'};"
        f" {len(history)} batches, aborted {sum(s['aborted'] for s in history)},"
        f" redos {sum(s['redos'] for s in history)}: {result}"
    )
    assert result.exactly_once, result


def _wait_stopped(pid: int, timeout: float = 30) -> None:
    """Until process `pid` is stopped (SIGSTOP); fails if it is not within `timeout`."""
    deadline = time.monotonic() + timeout
    while psutil.Process(pid).status() != psutil.STATUS_STOPPED:
        assert time.monotonic() < deadline, f"process {pid} never stopped at its pause point"
        time.sleep(0.05)


# make chaos (long-test): two drivers one after another, ~60 s a data path.
@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("data_path", ["python", "jvm"])
def test_a_paused_driver_is_fenced_by_a_successor_and_its_transaction_never_shows(
    bootstrap, names, tmp_path, data_path
):
    """F8 through Spark, on either data path: a task of the first driver stops itself (SIGSTOP,
    EOS_PAUSE_AT=after_produce) mid-transaction, its outputs produced and nothing of it committed; a
    second driver of the same app (a checkpoint of its own, as a run moved elsewhere) writes the whole
    input, its producers fencing the stopped one's; resumed, the stopped task is fenced (its log says
    so) and commits nothing. Read read_committed, the output is the input exactly once."""
    source, output, sent = seed(bootstrap, names, 200)
    app_id, once = names("app"), tmp_path / "once"
    once.mkdir()
    env = {"EOS_PROCESSING_GUARANTEE": "exactly_once", "EOS_DATA_PATH": data_path}
    zombie = start_pipeline(
        bootstrap,
        app_id,
        source,
        output,
        tmp_path / "ckpt-a",
        tmp_path / "a.jsonl",
        env={**env, "EOS_PAUSE_AT": "after_produce", "EOS_CRASH_ONCE_DIR": str(once)},
    )
    paused = once / "paused-after_produce"
    deadline = time.monotonic() + 180
    while not (paused.exists() and paused.read_text().strip()):
        assert zombie.running(), zombie.log_tail()
        assert time.monotonic() < deadline, "no task paused within 180 s"
        time.sleep(0.05)
    pid = int(paused.read_text())
    _wait_stopped(pid)  # outputs produced, nothing of this transaction committed
    try:
        winner = start_pipeline(
            bootstrap, app_id, source, output, tmp_path / "ckpt-b", tmp_path / "b.jsonl", env=env
        )
        finish(winner)
    finally:
        os.kill(pid, signal.SIGCONT)
    zombie.wait(180)  # failed, or (a task retry) found every offset committed and wrote nothing
    log = Path(zombie.log_path).read_text(errors="replace")
    assert "this attempt is a zombie" in log, zombie.log_tail()  # the fault hit: the paused task was fenced
    assert {s["data_path"] for s in read_summaries(tmp_path / "b.jsonl")} == {data_path}
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    print(f"{data_path}: the paused task was fenced; {result}")
    assert result.exactly_once, result


def test_paused_zombie_is_fenced_after_takeover_and_writes_nothing(bootstrap, names, tmp_path):
    """F8 for real: an incarnation of a partition task is SIGSTOPped mid-transaction, another takes
    the partition over (on another host: its own state directory) and commits; the zombie is resumed
    with SIGCONT, is fenced, and neither its outputs nor its state writes ever become visible."""
    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, 1)
    testing.create_topic(bootstrap, output, 1)
    sent = testing.produce_sequence(bootstrap, source, 1, 300)
    app_id = names("app")
    app = Path(__file__).with_name("partition_task_app.py")

    def task(host: str, pause_at: int) -> DriverProcess:
        marker = tmp_path / f"{host}.paused"
        args = [
            sys.executable,
            str(app),
            bootstrap,
            app_id,
            source,
            output,
            "0",
            str(tmp_path / host),
            str(pause_at),
            str(marker),
        ]
        return DriverProcess(args, log_path=str(tmp_path / f"{host}.log")), marker

    zombie, paused = task("host-a", 150)
    deadline = time.monotonic() + 120
    while not paused.exists() and zombie.running() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert paused.exists(), zombie.log_tail()
    os.kill(zombie.proc.pid, signal.SIGSTOP)  # mid-transaction: 150 records produced, nothing committed
    try:
        winner, _ = task("host-b", -1)
        assert winner.wait(120) == 0, winner.log_tail()
    finally:
        os.kill(zombie.proc.pid, signal.SIGCONT)
    assert zombie.wait(120) != 0
    assert "fenced" in zombie.log_tail().lower()

    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    counts = testing.expected_running_counts(sent)
    result = testing.compare(testing.flatten(sent), records, hanging, running_counts=counts)
    assert result.exactly_once, result
    assert result.state_mismatches == 0
    zombie_store = tmp_path / "host-a" / app_id / f"{source}-0"
    with sqlite3.connect(zombie_store / "counts.sqlite") as conn:
        assert conn.execute("SELECT count(*) FROM kv").fetchone()[0] == 0, "the zombie wrote local state"
