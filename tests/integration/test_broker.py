"""The broker is a real, transactional Kafka broker, and it survives a restart with its data."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import Producer

from eos import testing


def test_read_committed_sees_only_committed_transactions(bootstrap, names):
    topic = names("txn")
    testing.create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": names("tid")})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"committed-1")
    producer.produce(topic, b"committed-2")
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"aborted-1")
    producer.flush(30)  # the aborted records must reach the log, not be purged
    producer.abort_transaction(30)

    committed, _ = testing.read_topic(bootstrap, topic, isolation="read_committed", timeout=30)
    uncommitted, _ = testing.read_topic(bootstrap, topic, isolation="read_uncommitted", timeout=30)

    assert [r.value for r in committed] == [b"committed-1", b"committed-2"]
    assert [r.value for r in uncommitted] == [b"committed-1", b"committed-2", b"aborted-1"]


def _localbroker(action: str, local) -> subprocess.CompletedProcess:
    """The same command `make broker-up` / `make broker-down` run."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.support.localbroker",
            action,
            "--home",
            str(local.home),
            "--port",
            str(local.port),
            "--controller-port",
            str(local.controller_port),
            *(["--sasl-port", str(local.sasl_port)] if local.sasl_port else []),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


# `make chaos` (long-test) only: it tests the test broker's launcher, not eos (9 s; a clean clone of
# 154be98 took 16 min 42 s on a slow day).
@pytest.mark.long
def test_broker_restart_keeps_data_and_up_is_idempotent(broker, names):
    local = broker.require_local()
    topic = names("durable")
    testing.create_topic(broker.bootstrap_servers, topic, 2)
    sent = testing.produce_sequence(broker.bootstrap_servers, topic, 2, 50)
    pid_before = local.pid()

    again = _localbroker("up", local)
    assert again.returncode == 0, again.stderr
    assert "already up" in again.stdout
    assert local.pid() == pid_before

    down = _localbroker("down", local)
    assert down.returncode == 0, down.stderr
    assert local.pid() is None
    assert subprocess.run(["kill", "-0", str(pid_before)], capture_output=True).returncode != 0

    up = _localbroker("up", local)
    assert up.returncode == 0, up.stderr
    assert local.pid() not in (None, pid_before)

    records, unfinished = testing.read_topic(broker.bootstrap_servers, topic, timeout=60)
    assert unfinished == []
    assert sorted(r.value for r in records) == sorted(testing.flatten(sent))
