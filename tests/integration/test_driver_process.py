"""The pipeline as its own driver process: a guarantee switched by environment alone, a Python worker
killed between produce and offset commit (F2), and the whole driver SIGKILLed mid-stream."""

from __future__ import annotations

import os
import random
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from conftest import finish, seed, start_pipeline

from eos import testing
from eos.testing import read_summaries

PARTITIONS = 4


def _log_end_offsets(bootstrap, topic) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-end-offsets"})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)
        )
    finally:
        consumer.close()


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


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_worker_killed_after_produce_before_offsets(bootstrap, names, tmp_path, guarantee):
    """F2 for real: the Python worker SIGKILLs itself after its outputs are flushed and before the
    offsets are sent/committed. Spark retries the task."""
    source, output, sent = seed(bootstrap, names, 2_500)
    once = tmp_path / "once"
    once.mkdir()
    summaries = tmp_path / "summaries.jsonl"
    proc = start_pipeline(
        bootstrap,
        names("app"),
        source,
        output,
        tmp_path / "ckpt",
        summaries,
        env={
            "EOS_PROCESSING_GUARANTEE": guarantee,
            "EOS_CRASH_AT": "after_produce",
            "EOS_CRASH_ONCE_DIR": str(once),
        },
        max_offsets=4_000,
    )
    finish(proc)
    assert (once / "crashed-after_produce").exists(), "the crash point never fired"

    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    print(f"{guarantee}: worker killed after produce -> {result}")
    assert result.missing == 0
    if guarantee == "exactly_once":
        assert result.exactly_once, result
    else:
        assert result.duplicated > 0, "at_least_once re-sends the killed transaction's outputs"


def test_driver_sigkilled_three_times_stays_exactly_once(bootstrap, names, tmp_path):
    source, output, sent = seed(bootstrap, names, 5_000)
    app_id, checkpoint, summaries = names("app"), tmp_path / "ckpt", tmp_path / "summaries.jsonl"
    env = {"EOS_PROCESSING_GUARANTEE": "exactly_once"}
    rng = random.Random(os.environ.get("EOS_TEST_SEED", "7"))
    kills = 0
    for _ in range(3):
        before = len(read_summaries(summaries))
        proc = start_pipeline(
            bootstrap, app_id, source, output, checkpoint, summaries, env=env, max_offsets=1_000
        )
        # Kill once the driver is writing batches, at a random moment within one.
        deadline = time.monotonic() + 180
        while len(read_summaries(summaries)) <= before and proc.running() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(rng.uniform(0.0, 2.0))
        if proc.kill():  # driver, its JVM and its Python workers
            kills += 1
    assert kills == 3
    proc = start_pipeline(
        bootstrap, app_id, source, output, checkpoint, summaries, env=env, max_offsets=1_000
    )
    finish(proc)

    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    history = read_summaries(summaries)
    print(
        f"3 driver kills, {len(history)} batch summaries, skipped on replay "
        f"{sum(s['skipped'] for s in history)}: {result}"
    )
    assert result.exactly_once, result
