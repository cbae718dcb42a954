"""A transaction whose commit, or whose outputs' delivery, times out (real broker, real Spark): the
broker process is paused (SIGSTOP) as a task is about to commit, or to produce its next transaction's
outputs, long enough for the
client's call to time out, then resumed. The producer is not used again: a fresh one's
init_transactions commits the transaction where its commit reached the broker, else aborts it, and the
task goes on from the committed offset, on brokers with transactions v1 and v2 finalized
(`transaction.version`; librdkafka speaks the v1 protocol to both). Read read_committed: nothing
missing, nothing twice, no hanging transaction."""

from __future__ import annotations

import os
import signal
import time

import pytest
from conftest import finish, seed, start_pipeline

from eos import testing
from tests.support.localbroker import set_feature

#: the client's calls give up after this (EOS_OPERATION_TIMEOUT_MS); the broker stays paused longer
CALL_TIMEOUT_S = 4


@pytest.fixture(params=[2, pytest.param(1, marks=pytest.mark.long)], ids=lambda v: f"tv{v}")
def transaction_version(request, broker):
    """The session's broker with `transaction.version` finalized at the parameter, then back at 2."""
    local = broker.require_local()
    if request.param == 2:  # what the session's broker (Kafka 4) finalizes: nothing to change
        yield 2
        return
    set_feature(local.bootstrap_servers, "transaction.version", request.param)
    yield request.param
    set_feature(local.bootstrap_servers, "transaction.version", 2)


@pytest.mark.slow
@pytest.mark.parametrize(
    "point",
    [
        "after_send_offsets",  # the EndTxn of a commit in flight
        # the next transaction's produce requests (its topics known: nothing else asks the broker)
        pytest.param("after_commit", marks=pytest.mark.long),
    ],
)
def test_a_call_that_timed_out_is_settled_by_a_fresh_producer(
    broker, transaction_version, names, tmp_path, point
):
    local = broker.require_local()
    bootstrap = local.bootstrap_servers
    # One input partition: its task meets the pause in doubt; a second task's other calls (reading
    # offsets, say) would meet it too and fail past their deadline, which Spark's retry (off here) cures.
    source, output, sent = seed(bootstrap, names, 1_500, 1)
    once = tmp_path / "once"
    once.mkdir()
    env = {
        "EOS_PROCESSING_GUARANTEE": "exactly_once",
        "EOS_OPERATION_TIMEOUT_MS": str(CALL_TIMEOUT_S * 1000),
        "EOS_SIGNAL_AT": point,
        "EOS_CRASH_ONCE_DIR": str(once),
        "EOS_SPARK_MASTER": "local[2]",  # no task retry: the task itself must get through
    }
    summaries = tmp_path / "summaries.jsonl"
    flags = {"max_offsets": 500, "commit_every": 250, "stateful": True}
    proc = start_pipeline(bootstrap, names("app"), source, output, tmp_path / "ckpt", summaries, env, **flags)
    deadline = time.monotonic() + 180
    while not (once / f"reached-{point}").exists():
        assert proc.running(), f"the driver ended before {point}:\n{proc.log_tail()}"
        assert time.monotonic() < deadline, f"{point} not reached"
        time.sleep(0.02)
    os.kill(local.pid(), signal.SIGSTOP)
    try:
        (once / f"go-{point}").touch()
        time.sleep(CALL_TIMEOUT_S + 3)
    finally:
        os.kill(local.pid(), signal.SIGCONT)
    finish(proc)
    log = (tmp_path / "summaries.log").read_text()
    assert "transaction in doubt" in log, "the paused broker did not make a call of the transaction time out"
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    result = testing.compare(
        testing.flatten(sent), records, hanging, running_counts=testing.expected_running_counts(sent)
    )
    assert result.exactly_once and result.state_mismatches == 0, result
