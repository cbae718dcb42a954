"""on_error="dead_letter" where the broker refuses many outputs in one transaction (real broker, real
Spark): the output topic takes 65,536-byte record batches, bad rows return 100,000-byte outputs or make
their function raise, spread through transactions of hundreds of rows. The broker refuses each whole
record batch a big output travels in, good outputs with it, and once one delivery of a transaction
failed, librdkafka refuses every record after it ("Erroneous state") until the transaction is aborted.
Every good row's output must be written once, in order, and every bad row dead-lettered once, naming
itself: for each API, and through a driver SIGKILL."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer
from conftest import kill_after_commits, kill_after_committed, line_count, write_available

import eos
from eos import testing
from eos._kafka._admin import Admin
from tests.integration.refusals_app import SMALL_TOPIC, bad_kind, config_of, process_batch, query
from tests.support.deadletters import letters_by_input
from tests.support.processes import DriverProcess
from tests.support.summaries import read_summaries

ROOT = Path(__file__).resolve().parents[2]


def _topics(bootstrap, names, partitions, per_partition):
    source, output, dead_letters = names("in"), names("out"), names("dlq")
    testing.create_topic(bootstrap, source, partitions)
    testing.create_topic(bootstrap, output, partitions, config=SMALL_TOPIC)
    testing.create_topic(bootstrap, dead_letters, 1)
    sent = testing.produce_sequence(bootstrap, source, partitions, per_partition)
    return source, output, dead_letters, sent


def _check(bootstrap, source, output, dead_letters, sent, api):
    """Read back read_committed: the good rows' outputs exactly once, in order (with running counts that
    never counted a bad row, but pass-through); each bad row's dead letter once, naming it."""
    kinds = {
        (p, o): bad_kind(testing.parse_value(v)[2], api)
        for p, values in sent.items()
        for o, v in enumerate(values)
    }
    good = {p: [v for o, v in enumerate(values) if kinds[(p, o)] is None] for p, values in sent.items()}
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    counts = None if api == "passthrough" else testing.expected_running_counts(good)
    result = testing.compare(testing.flatten(good), records, hanging, running_counts=counts)
    assert result.exactly_once, result
    assert result.state_mismatches == 0, "a bad row's stored count survived its dead letter"

    letters = letters_by_input(bootstrap, dead_letters, source)
    for where, [letter, *_] in letters.items():
        expected = {"refused": b"eos.errors.ProduceError", "raise": b"ValueError"}.get(kinds.get(where))
        assert dict(letter.headers)["__eos.errors.exception"] == expected, (where, letter.headers)
    bad = {where for where, kind in kinds.items() if kind is not None}
    assert [where for where, found in letters.items() if len(found) > 1] == [], "a dead letter written twice"
    assert set(letters) == bad, (
        f"dead letters missing: {sorted(bad - set(letters))[:5]}, extra: {sorted(set(letters) - bad)[:5]}"
    )
    return Counter(kinds[where] for where in bad)


#: make test runs process_batch (the way the wedge was found); the other ways in run in make chaos
_LONG = pytest.mark.long


@pytest.mark.parametrize(
    "api",
    [
        "passthrough",  # the JVM data path (data_path "auto")
        pytest.param("passthrough-python", marks=_LONG),
        pytest.param("process", marks=_LONG),
        "process_batch",
        pytest.param("format_eos", marks=_LONG),
    ],
)
def test_many_refused_outputs_in_one_transaction_are_each_dead_lettered(
    spark, bootstrap, names, tmp_path, api
):
    """One input partition of 1,200 rows written in one transaction: 30 outputs refused and, but for
    pass-through, 17 rows whose function raises (`format("eos")`: with process_batch). Pass-through on
    either data path. (Before: the second refusal's transaction was redone record by record until
    librdkafka's "Erroneous state" failed the task as fatal, at every attempt.)"""
    source, output, dead_letters, sent = _topics(bootstrap, names, 1, 1_200)
    path = "python" if api == "passthrough-python" else "auto"
    api = api.removesuffix("-python")
    config = config_of(bootstrap, names("app"), output, dead_letters, commit_every=5_000, data_path=path)
    if api == "format_eos":
        _write_with_format_eos(spark, config, source, tmp_path / "ckpt")
        api = "process_batch"
    else:
        df, sink = query(spark, config, source, api)
        write_available(df, sink, tmp_path / "ckpt")
        (summary,) = sink.history
        assert summary.transactions == 1, summary
        assert summary.data_path == ("jvm" if api == "passthrough" and path == "auto" else "python"), summary
        assert summary.dead_letters == (30 if api == "passthrough" else summary.dead_letters), summary
    kinds = _check(bootstrap, source, output, dead_letters, sent, api)
    assert kinds["refused"] == 30 and (kinds["raise"] > 10) == (api != "passthrough"), kinds


def _write_with_format_eos(spark, config, source, checkpoint) -> None:
    name = eos.register(spark, "eos-refusals", process_batch=process_batch, stores={"counts": "json"})
    writer = eos.read_stream(spark, config, [source]).writeStream.format(name)
    options = {
        "kafka.bootstrap.servers": config.bootstrap_servers,
        "topic": config.output_topic,
        "eos.app.id": config.app_id,
        "eos.processing.guarantee": config.processing_guarantee,
        "eos.commit.every": config.commit_every,
        "eos.on.error": config.on_error,
        "eos.dead.letter.topic": config.dead_letter_topic,
        "eos.max.dead.letters.per.batch": config.max_dead_letters_per_batch,
        "checkpointLocation": checkpoint,
    }
    for key, value in options.items():
        writer = writer.option(key, str(value))
    writer.trigger(availableNow=True).start().awaitTermination()


@pytest.mark.long  # ~50 s: make chaos (make test runs the same refusals in-session for every API)
@pytest.mark.parametrize("api", ["process_batch", "passthrough"])
def test_refused_outputs_are_dead_lettered_once_through_a_driver_kill(bootstrap, names, tmp_path, api):
    """process_batch (or pass-through, on the JVM data path) over 4 partitions x 1,500 rows, 2,400 rows a
    batch, transactions of 400 rows, each with a few outputs the broker refuses (and, but for
    pass-through, a few rows that raise); the driver is SIGKILLed after a few transactions committed,
    mid-batch, then run again on the same checkpoint."""
    source, output, dead_letters, sent = _topics(bootstrap, names, 4, 1_500)
    app_id, checkpoint = names("app"), tmp_path / "ckpt"
    commits, summaries = tmp_path / "commits.jsonl", tmp_path / "summaries.jsonl"
    argv = [sys.executable, "-m", "tests.integration.refusals_app", bootstrap, app_id, source, output]
    argv += [dead_letters, str(checkpoint), str(commits), str(summaries), api]

    def driver() -> DriverProcess:
        return DriverProcess(argv, log_path=str(tmp_path / "driver.log"), cwd=ROOT)

    if api == "passthrough":  # no on_commit: the input records the group committed say how far it got
        config = config_of(bootstrap, app_id, output, dead_letters)
        kill_after_committed(driver(), config, source, 4, 1_200)
        before = letters_by_input(bootstrap, dead_letters, source)
        assert before, "no transaction holding dead letters committed before the kill"
    else:
        kill_after_commits(driver(), commits, 3)
        committed = line_count(commits)
        before = [json.loads(line) for line in commits.read_text().splitlines()[:committed]]
        # transactions holding dead letters had committed before the kill
        assert any(commit["dead_letters"] for commit in before), before
    assert driver().wait() == 0, (tmp_path / "driver.log").read_text()[-4000:]
    kinds = _check(bootstrap, source, output, dead_letters, sent, api)
    assert kinds["refused"] >= 100 and kinds["raise"] >= (0 if api == "passthrough" else 60), kinds
    # The kill hit its target: the batch the committed transactions were part of was run again, skipping them.
    history = read_summaries(summaries)
    assert sum(s["skipped"] for s in history) > 0, "no kill landed mid-batch"
    assert {s["data_path"] for s in history} == {"jvm" if api == "passthrough" else "python"}


@pytest.mark.parametrize("data_path", ["python", "jvm"])
def test_a_task_cancelled_mid_transaction_leaves_no_transaction_open(
    spark, bootstrap, names, tmp_path, data_path
):
    """Input partition 0's first record is refused (above message.max.bytes), failing the batch while
    partition 1's task is still writing its one transaction, one record per request: Spark cancels that
    task. Its transaction must not stay open until transaction.timeout.ms (10 minutes here), holding
    every read_committed consumer of the output back. The JVM writer's task aborts it (its thread is
    interrupted, which the Kafka client's abort refuses unless cleared); a Python task's worker is
    killed by Spark, and the sink fences the batch's partitions once the job failed. What is committed
    is a prefix of the input, once."""
    ROWS = 200_000  # noqa: N806 - far more than partition 1's task writes before partition 0's fails
    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, 2)
    testing.create_topic(bootstrap, output, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "queue.buffering.max.messages": 1_000_000})
    producer.produce(source, b"x" * 3_000, b"big", partition=0)
    for i in range(ROWS):
        producer.produce(source, b"v%d" % i, b"k%d" % i, partition=1)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=output,
        processing_guarantee="exactly_once",
        data_path=data_path,
        commit_every=1_000_000,  # partition 1's rows: one transaction
        transaction_timeout_ms=600_000,
        # a record per request, one request at a time: partition 1's task outlasts partition 0's
        producer={"message.max.bytes": 1_000, "batch.size": 1, "max.in.flight.requests.per.connection": 1},
    )
    summaries: list = []
    query = (
        eos.read_stream(spark, config, [source])
        .writeStream.foreachBatch(eos.sink(config, on_batch=summaries.append))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception) as failed:
        query.awaitTermination()
    assert f"input record {source}/0@0" in str(failed.value), str(failed.value)[-2000:]
    assert summaries == []

    admin = Admin(config, timeout=10)
    tp = (output, 0)
    deadline = time.monotonic() + 60
    while True:
        end = admin.log_offsets([tp], "latest")[tp]
        stable = admin.log_offsets([tp], "latest", committed_only=True)[tp]
        if stable == end or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    print(f"{data_path}: output log end {end}, last stable offset {stable}, {len(records)} committed")
    assert len(records) < ROWS, "partition 1's task was not cut short"
    assert end - len(records) > 10, "partition 1's task had no transaction open when it was cancelled"
    assert stable == end and not hanging, "the cancelled task's transaction is still open"
    assert [r.value for r in records] == [b"v%d" % i for i in range(len(records))]  # what it committed: once
