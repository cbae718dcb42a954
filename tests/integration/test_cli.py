"""The `eos` command against the real broker: each command run as a subprocess, as an operator or a
script would run it, and its effect checked on the broker or on disk."""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

import eos
from eos import testing
from eos._kafka._changelog import ensure_changelog
from eos._log import get_logger
from eos._names import INPUT_OFFSET_HEADER
from eos._scope import PartitionScope
from eos.cli import EXIT_ERROR, EXIT_OK, EXIT_REFUSED, EXIT_UNKNOWN_APP, EXIT_UNREACHABLE, build_config
from eos.cli._base import CliError
from eos.cli._broker import Broker
from eos.cli._tools import MAVEN_CENTRAL
from eos.session import free_port
from eos.state._partition import PartitionState
from tests.support.localbroker import SASL_USERS

PER_PARTITION = 10
COMMITTED = {0: 4, 1: 7}


def cli(bootstrap: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EOS_") or k == "EOS_CACHE"}
    return subprocess.run(
        [sys.executable, "-m", "eos.cli", "--bootstrap-servers", bootstrap, *args],
        capture_output=True,
        text=True,
        env={**clean, **(env or {})},
        timeout=120,
    )


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == EXIT_OK, result.stderr
    return result.stdout


def one_line_error(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("eos: error: "), result.stderr
    return lines[0]


def group_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def stable_end(bootstrap: str, topic: str, partition: int) -> int:
    """Where a read_committed reader of the partition stops (the last stable offset)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, partition)
    futures = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_COMMITTED)
    return next(iter(futures.values())).result(30).offset


@pytest.fixture
def app(bootstrap, names):
    """An input topic of 2 partitions x 10 records; the group committed 4 on partition 0 (through a
    transaction, as exactly_once does) and 7 on partition 1 (Consumer.commit, as at_least_once does)."""
    app_id, topic = names("cli-app"), names("cli-in")
    testing.create_topic(bootstrap, topic, 2)
    testing.produce_sequence(bootstrap, topic, 2, PER_PARTITION)
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": app_id, "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{app_id}:{topic}:0"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.send_offsets_to_transaction(
        [TopicPartition(topic, 0, COMMITTED[0])], group.consumer_group_metadata(), 30
    )
    producer.commit_transaction(30)
    group.commit(offsets=[TopicPartition(topic, 1, COMMITTED[1])], asynchronous=False)
    group.close()
    assert group_offsets(bootstrap, app_id) == {(topic, p): o for p, o in COMMITTED.items()}
    return app_id, topic


# -- offsets ----------------------------------------------------------------------------------------


def test_offsets_show_table_and_json(bootstrap, app):
    app_id, topic = app
    table = ok(cli(bootstrap, "offsets", "show", "--app", app_id)).splitlines()
    assert table[0].split() == ["TOPIC", "PARTITION", "COMMITTED", "END", "LAG"]
    assert [line.split() for line in table[1:]] == [
        [topic, "0", "4", "10", "6"],
        [topic, "1", "7", "10", "3"],
    ]

    shown = json.loads(ok(cli(bootstrap, "offsets", "show", "--app", app_id, "--json")))
    assert shown == {
        "app": app_id,
        "partitions": [
            {"topic": topic, "partition": 0, "committed": 4, "end": 10, "lag": 6},
            {"topic": topic, "partition": 1, "committed": 7, "end": 10, "lag": 3},
        ],
    }
    # --topic names the topics (every partition, committed or not)
    missing = cli(bootstrap, "offsets", "show", "--app", app_id, "--topic", "no-such-topic-x")
    assert missing.returncode == EXIT_ERROR and "does not exist" in one_line_error(missing)


def test_offsets_reset_dry_run_then_earliest_json_and_shift(bootstrap, app):
    app_id, topic = app
    before = group_offsets(bootstrap, app_id)

    dry = ok(cli(bootstrap, "offsets", "reset", "--app", app_id, "--to", "earliest", "--dry-run"))
    assert [topic, "0", "4", "->", "0"] in [line.split() for line in dry.splitlines()]
    assert "dry run: nothing changed" in dry
    assert group_offsets(bootstrap, app_id) == before

    # without --execute a reset is a dry run, as kafka-consumer-groups --reset-offsets
    plain = ok(cli(bootstrap, "offsets", "reset", "--app", app_id, "--to", "earliest"))
    assert "dry run: nothing changed" in plain and "--execute" in plain
    assert group_offsets(bootstrap, app_id) == before

    ok(cli(bootstrap, "offsets", "reset", "--app", app_id, "--to", "earliest", "--execute"))
    assert group_offsets(bootstrap, app_id) == {(topic, 0): 0, (topic, 1): 0}

    spec = json.dumps({topic: {"1": 5}})
    done = json.loads(
        ok(cli(bootstrap, "offsets", "reset", "--app", app_id, "--to", spec, "--json", "--execute"))
    )
    assert done["partitions"] == [{"topic": topic, "partition": 1, "old": 0, "new": 5}]
    assert group_offsets(bootstrap, app_id) == {(topic, 0): 0, (topic, 1): 5}

    # 5 + 7 is clamped to the end
    ok(cli(bootstrap, "offsets", "reset", "--app", app_id, "--shift", "7", "--execute"))
    assert group_offsets(bootstrap, app_id) == {(topic, 0): 7, (topic, 1): 10}

    ok(cli(bootstrap, "offsets", "reset", "--app", app_id, "--to", "latest", "--topic", topic, "--execute"))
    assert group_offsets(bootstrap, app_id) == {(topic, 0): 10, (topic, 1): 10}

    outside = cli(
        bootstrap, "offsets", "reset", "--app", app_id, "--to", json.dumps({topic: {"0": 99}}), "--execute"
    )
    assert outside.returncode == EXIT_ERROR and "outside its log" in one_line_error(outside)
    assert group_offsets(bootstrap, app_id) == {(topic, 0): 10, (topic, 1): 10}


def test_offsets_reset_refused_while_a_consumer_is_a_member_of_the_group(bootstrap, app):
    app_id, topic = app
    member = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": app_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        member.subscribe([topic])
        deadline = time.monotonic() + 60
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.2)
        assert member.assignment(), "the consumer never joined the group"
        for args in (["--to", "earliest", "--execute"], ["--to", "earliest"]):
            refused = cli(bootstrap, "offsets", "reset", "--app", app_id, *args)
            assert refused.returncode == EXIT_REFUSED, refused.stderr
            assert "live member" in one_line_error(refused)
        # and should a member join between the checks and the change, the broker refuses it
        with pytest.raises(CliError) as refused_by_broker:
            Broker(build_config(app_id, bootstrap, 10), 10).alter(app_id, {(topic, 0): 0})
        assert refused_by_broker.value.code == EXIT_REFUSED
        assert group_offsets(bootstrap, app_id) == {(topic, p): o for p, o in COMMITTED.items()}
    finally:
        member.close()


@pytest.mark.parametrize("how", ["offsets_pending", "transaction_open"])
def test_offsets_reset_refused_while_a_transaction_is_open(bootstrap, app, how):
    """offsets_pending: a transaction (of any id) has sent offsets for the group and not committed —
    the broker's require-stable answer says so. transaction_open: a transaction of one of the app's
    transactional ids is open but has sent no offsets yet — Kafka's transaction list says so."""
    app_id, topic = app
    txn_id = f"other-{app_id}" if how == "offsets_pending" else f"{app_id}:{topic}:1"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    try:
        producer.produce(topic, b"in flight", partition=1)
        producer.flush(30)
        if how == "offsets_pending":
            group = Consumer({"bootstrap.servers": bootstrap, "group.id": app_id})
            producer.send_offsets_to_transaction(
                [TopicPartition(topic, 0, 9)], group.consumer_group_metadata(), 30
            )
            group.close()
        refused = cli(bootstrap, "offsets", "reset", "--app", app_id, "--to", "earliest", "--execute")
        assert refused.returncode == EXIT_REFUSED, refused.stderr
        assert "open transaction" in one_line_error(refused)
        assert group_offsets(bootstrap, app_id) == {(topic, p): o for p, o in COMMITTED.items()}
    finally:
        producer.abort_transaction(30)
    # once the transaction has ended, the same reset goes through
    ok(cli(bootstrap, "offsets", "reset", "--app", app_id, "--to", "earliest", "--execute"))
    assert group_offsets(bootstrap, app_id) == {(topic, 0): 0, (topic, 1): 0}


# -- transactions -----------------------------------------------------------------------------------


def test_transactions_list_shows_open_transactions_and_find_hanging_runs(bootstrap, app):
    app_id, topic = app
    mine = f"{app_id}:{topic}:0"
    other = f"other-{app_id}"
    producers = []
    for txn_id in (mine, other):
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic, b"open", partition=0)
        producer.flush(30)
        producers.append(producer)
    try:
        listed = ok(cli(bootstrap, "transactions", "list", "--app", app_id)).splitlines()
        assert listed[0].split()[:4] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
        rows = {line.split()[0]: line.split()[3] for line in listed[1:]}
        assert rows == {mine: "Ongoing"}  # the other id is filtered out...
        everything = ok(cli(bootstrap, "transactions", "list"))
        assert other in everything  # ...but is there

        hanging = ok(cli(bootstrap, "transactions", "find-hanging", "--broker-id", "1"))
        assert hanging.split()[:2] == ["Topic", "Partition"]
        assert mine not in hanging  # open, but known to its coordinator: not hanging
    finally:
        for producer in producers:
            producer.abort_transaction(30)


_ABANDONED = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import Producer
    bootstrap, topic, txn_id = sys.argv[1:4]
    settings = {"bootstrap.servers": bootstrap, "transactional.id": txn_id}
    p = Producer({**settings, "transaction.timeout.ms": 600000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"never committed", partition=0)
    p.produce(topic, b"never committed either", partition=0)
    p.flush(30)
    print("open", flush=True)
    time.sleep(600)
    """
)


def test_transactions_abort_of_an_abandoned_transaction_lets_read_committed_readers_progress(
    bootstrap, names
):
    topic = names("cli-abort")
    testing.create_topic(bootstrap, topic, 1)
    before = testing.produce_sequence(bootstrap, topic, 1, 3)[0]
    proc = subprocess.Popen(
        [sys.executable, "-c", _ABANDONED, bootstrap, topic, names("cli-zombie")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "open"
    finally:
        proc.send_signal(signal.SIGKILL)  # the producer dies with its transaction open
        proc.wait()
    # A read_committed reader is stuck at the transaction's first record, for the next 10 minutes.
    assert stable_end(bootstrap, topic, 0) == 3

    producers = ok(cli(bootstrap, "transactions", "describe-producers", "--topic", topic, "--partition", "0"))
    header, *rows = (line.split() for line in producers.splitlines())
    column = header.index("CurrentTransactionStartOffset")
    starts = [row[column] for row in rows if row[column] != "None"]  # the seeding producer has none open
    assert starts == ["3"]
    start = starts[0]

    wrong = cli(
        bootstrap, "transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset", "1"
    )
    assert wrong.returncode == EXIT_ERROR
    assert "Could not find any open transactions starting at offset 1" in one_line_error(wrong)
    assert stable_end(bootstrap, topic, 0) == 3

    ok(cli(bootstrap, "transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset", start))
    records, hanging = testing.read_topic(
        bootstrap, topic, marker=testing.write_markers(bootstrap, topic), timeout=30
    )
    assert hanging == []  # the marker after the aborted transaction is visible: readers progress
    assert [r.value for r in records] == before


# -- state ------------------------------------------------------------------------------------------


_HOLD_LOCK = textwrap.dedent(
    """
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("locked", flush=True)
    time.sleep(600)
    """
)


def _restore(config, topic, partition):
    """What a task does at start: open the partition's stores (restoring them from the changelog)."""
    scope = PartitionScope(config, topic, partition, 0, None, get_logger(test="cli"))
    state = PartitionState(scope, {"counts": eos.StoreSpec()})
    state.open(100)  # the input of every changelog record committed
    state.close()
    return state


def test_state_show_and_wipe(bootstrap, names, tmp_path):
    topic, app_id = names("cli-st-in"), names("cli-st-app")
    testing.create_topic(bootstrap, topic, 2)
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=app_id,
        output_topic=topic,
        processing_guarantee="exactly_once",
        state_dir=str(tmp_path / "state"),
    )
    changelog = ensure_changelog(config, topic, "counts").name
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, key in enumerate([b"a", b"b", b"c", b"a"]):  # 3 keys, 4 changelog records, on partition 0
        producer.produce(changelog, b"%d" % i, key, partition=0, headers=[(INPUT_OFFSET_HEADER, b"%d" % i)])
    assert producer.flush(30) == 0
    for partition in (0, 1):
        _restore(config, topic, partition)
    (tmp_path / "state" / app_id / f"{topic}-1" / "counts.checkpoint").unlink()  # as after a crash

    args = ["state", "show", "--app", app_id, "--state-dir", str(tmp_path / "state")]
    shown = json.loads(ok(cli(bootstrap, *args, "--json")))
    assert [
        {k: s[k] for k in ("partition", "store", "keys", "checkpoint", "local", "changelog_end")}
        for s in shown["stores"]
    ] == [
        {"partition": 0, "store": "counts", "keys": 3, "checkpoint": 4, "local": 4, "changelog_end": 4},
        {"partition": 1, "store": "counts", "keys": 0, "checkpoint": None, "local": 0, "changelog_end": 0},
    ]
    assert all(s["changelog"] == changelog and not s["locked"] for s in shown["stores"])
    table = ok(cli(bootstrap, *args)).splitlines()
    assert table[0].split() == [
        "TOPIC",
        "PARTITION",
        "STORE",
        "KEYS",
        "CHECKPOINT",
        "LOCAL",
        "CHANGELOG_END",
        "LOCKED",
    ]
    assert table[1].split() == [topic, "0", "counts", "3", "4", "4", "4", "no"]
    assert table[2].split() == [topic, "1", "counts", "0", "none", "(unclean)", "0", "0", "no"]

    directory = tmp_path / "state" / app_id / f"{topic}-0"
    wipe = [
        "state",
        "wipe",
        "--app",
        app_id,
        "--topic",
        topic,
        "--partition",
        "0",
        "--state-dir",
        str(tmp_path / "state"),
    ]
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(directory / "counts.lock")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        locked = json.loads(ok(cli(bootstrap, *args, "--json")))["stores"][0]
        assert locked["locked"] is True
        refused = cli(bootstrap, *wipe)
        assert refused.returncode == EXIT_REFUSED
        assert "locked by a running process" in one_line_error(refused)
        assert (directory / "counts.checkpoint").exists() and (directory / "counts.sqlite").exists()
    finally:
        holder.kill()
        holder.wait()

    assert "restores it from " + changelog in ok(cli(bootstrap, *wipe))
    assert not (directory / "counts.checkpoint").exists() and not (directory / "counts.sqlite").exists()
    after = json.loads(ok(cli(bootstrap, *args, "--json")))["stores"][0]
    assert (after["checkpoint"], after["keys"]) == (None, None)
    # The next run finds no checkpoint and restores the store from its changelog.
    state = _restore(config, topic, 0)
    assert state.restored == 4
    again = json.loads(ok(cli(bootstrap, *args, "--json")))["stores"][0]
    assert (again["keys"], again["checkpoint"]) == (3, 4)


# -- unknown apps, unreachable brokers, security ----------------------------------------------------


def test_unknown_app_exits_3(bootstrap, names, tmp_path):
    app_id = names("cli-nobody")
    for args in (
        ["offsets", "show", "--app", app_id],
        ["offsets", "reset", "--app", app_id, "--to", "earliest", "--execute"],
        ["state", "show", "--app", app_id, "--state-dir", str(tmp_path)],
        ["state", "wipe", "--app", app_id, "--topic", "t", "--partition", "0", "--state-dir", str(tmp_path)],
    ):
        result = cli(bootstrap, *args)
        assert result.returncode == EXIT_UNKNOWN_APP, (args, result.stderr)
        assert f"unknown app '{app_id}'" in one_line_error(result)


def test_unreachable_broker_exits_4_within_the_timeout(tmp_path):
    nowhere = f"127.0.0.1:{free_port()}"
    for args in (
        ["offsets", "show", "--app", "any-app"],
        ["offsets", "reset", "--app", "any-app", "--to", "earliest", "--execute"],
        ["transactions", "list"],
        ["state", "show", "--app", "any-app", "--state-dir", str(tmp_path)],
    ):
        result = cli(nowhere, *args, "--timeout", "1")
        assert result.returncode == EXIT_UNREACHABLE, (args, result.stderr)
        assert "no Kafka broker at " + nowhere in one_line_error(result)  # and no client log noise


def test_security_settings_from_the_environment_reach_the_cli_clients(broker, app):
    """EOS_KAFKA_* reach the Python admin client and Kafka's Java tool alike (the SASL listener)."""
    local = broker.require_local()
    app_id, topic = app
    env = {
        "EOS_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "EOS_KAFKA_SASL_MECHANISM": "PLAIN",
        "EOS_KAFKA_SASL_USERNAME": "admin",
        "EOS_KAFKA_SASL_PASSWORD": SASL_USERS["admin"],
    }
    sasl = local.sasl_bootstrap_servers
    shown = json.loads(ok(cli(sasl, "offsets", "show", "--app", app_id, "--json", env=env)))
    assert [p["committed"] for p in shown["partitions"]] == [4, 7]
    # Kafka's Java tool gets them through its --command-config file (else it would time out)
    listed = ok(cli(sasl, "transactions", "list", "--app", app_id, env=env))
    assert f"{app_id}:{topic}:0" in listed  # the fixture's committed transaction

    wrong = cli(sasl, "offsets", "show", "--app", app_id, env={**env, "EOS_KAFKA_SASL_PASSWORD": "wrong"})
    assert wrong.returncode == EXIT_ERROR
    assert "refused the credentials" in one_line_error(wrong) and "wrong" not in wrong.stderr
    # no credentials at all: the SASL listener never answers a plaintext client
    plain = cli(sasl, "offsets", "show", "--app", app_id, "--timeout", "2")
    assert plain.returncode == EXIT_UNREACHABLE, plain.stderr


def test_command_config_file_as_for_kafkas_tools_reaches_both_clients(broker, app, tmp_path):
    """A kafka-consumer-groups style --command-config (Java names, the JAAS line) works for eos's own
    clients (translated for librdkafka) and for Kafka's Java tool (passed on as written)."""
    local = broker.require_local()
    app_id, topic = app
    password = SASL_USERS["admin"]
    config = tmp_path / "client.properties"
    config.write_text(
        "# as for kafka-consumer-groups.sh --command-config\n"
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        f'    username="admin" password="{password}";\n'
    )
    sasl = local.sasl_bootstrap_servers
    shown = ok(cli(sasl, "offsets", "show", "--app", app_id, "--json", "--command-config", str(config)))
    assert [p["committed"] for p in json.loads(shown)["partitions"]] == [4, 7]
    listed = cli(sasl, "--command-config", str(config), "transactions", "list", "--app", app_id)
    assert f"{app_id}:{topic}:0" in ok(listed)
    assert password not in shown + listed.stdout + listed.stderr

    wrong = tmp_path / "wrong.properties"
    wrong.write_text(config.read_text().replace(password, "not-the-password"))
    refused = cli(sasl, "offsets", "show", "--app", app_id, "--command-config", str(wrong))
    assert refused.returncode == EXIT_ERROR and "refused the credentials" in one_line_error(refused)
    assert "not-the-password" not in refused.stderr


def test_offsets_reset_to_datetime(bootstrap, names):
    """The first offset at or after the time, per partition; past every record: the end of the log."""
    app_id, topic = names("cli-time"), names("cli-time-in")
    testing.create_topic(bootstrap, topic, 1)
    base = 1_700_000_000_000  # record timestamps base, base + 1 s, ..., base + 9 s
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce(topic, b"%d" % i, partition=0, timestamp=base + i * 1000)
    producer.flush(30)
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": app_id, "enable.auto.commit": False})
    group.commit(offsets=[TopicPartition(topic, 0, 9)], asynchronous=False)
    group.close()

    def at(ms: int) -> str:
        moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"

    dry = ok(cli(bootstrap, "offsets", "reset", "--app", app_id, "--to-datetime", at(base + 4_500)))
    assert [topic, "0", "9", "->", "5"] in [line.split() for line in dry.splitlines()]
    assert group_offsets(bootstrap, app_id) == {(topic, 0): 9}
    ok(cli(bootstrap, "offsets", "reset", "--app", app_id, "--to-datetime", at(base + 4_500), "--execute"))
    assert group_offsets(bootstrap, app_id) == {(topic, 0): 5}
    ok(cli(bootstrap, "offsets", "reset", "--app", app_id, "--to-datetime", at(base - 60_000), "--execute"))
    assert group_offsets(bootstrap, app_id) == {(topic, 0): 0}
    ok(cli(bootstrap, "offsets", "reset", "--app", app_id, "--to-datetime", at(base + 60_000), "--execute"))
    assert group_offsets(bootstrap, app_id) == {(topic, 0): 10}


def _maven_central_answers() -> bool:
    try:
        with urllib.request.urlopen(
            f"{MAVEN_CENTRAL}/org/apache/kafka/kafka-tools/maven-metadata.xml", timeout=10
        ):
            return True
    except OSError:
        return False


def test_transactions_from_a_pip_install_fetch_kafkas_tools_jars_on_first_use(bootstrap, app, tmp_path):
    """With no jars of `make setup` (EOS_CACHE elsewhere), `eos transactions` downloads the tools jars it
    needs from Maven Central, checked against their SHA-1, once."""
    if not _maven_central_answers():
        pytest.skip(f"{MAVEN_CENTRAL} does not answer from this machine")
    app_id, topic = app
    env = {"EOS_CACHE": str(tmp_path / "cache")}
    first = cli(bootstrap, "transactions", "list", "--app", app_id, env=env)
    assert f"{app_id}:{topic}:0" in ok(first)
    assert "fetching Kafka" in first.stderr and "kafka-tools-" in first.stderr
    jars = sorted(p.name for p in (tmp_path / "cache" / "kafka-tools").glob("*/*.jar"))
    assert len(jars) == 9 and any(j.startswith("kafka-clients-") for j in jars), jars
    again = cli(bootstrap, "transactions", "list", "--app", app_id, env=env)
    assert f"{app_id}:{topic}:0" in ok(again) and "fetching" not in again.stderr
