"""input_mode "any": aggregations and a non-Kafka source written exactly once through driver SIGKILLs, and
a query that is not deterministic stopped before it writes a second version of a part."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time

import pytest
from conftest import finish, kill_after_commits, line_count, seed, start_pipeline

from eos import testing
from eos._core import _parts
from tests.support.aggregates import (
    COUNT_COLUMNS,
    any_config,
    check_running_counts,
    check_windows,
    key_counts,
    read_output,
    start_counts,
    window_counts,
)
from tests.support.faults import fail_part_0_while
from tests.support.summaries import ledger_skipped, read_summaries


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind,api",
    [
        pytest.param("count", "classic", marks=pytest.mark.long),
        pytest.param("window", "classic", marks=pytest.mark.long),
        pytest.param("count", "connect", marks=pytest.mark.long),
        pytest.param("window", "format", marks=pytest.mark.long),
    ],
)
def test_aggregation_driver_sigkilled_three_times_is_exact(bootstrap, names, tmp_path, kind, api):
    """Kafka -> groupBy(key).count() (update mode) or a windowed count with a watermark (append mode) ->
    eos, the driver's process group SIGKILLed three times right after a part of a batch committed while
    its other parts were still being written, and one Python worker SIGKILLed after producing (F2, a task
    retry). Every restart re-runs the batch: the parts it committed must write nothing again."""
    source, output, sent = seed(bootstrap, names, 750)
    app_id, checkpoint, summaries = names("app"), tmp_path / "ckpt", tmp_path / "summaries.jsonl"
    commits, once = tmp_path / "commits.jsonl", tmp_path / "once"
    once.mkdir()
    env = {
        "EOS_PROCESSING_GUARANTEE": "exactly_once",
        "EOS_CRASH_AT": "after_produce",
        "EOS_CRASH_ONCE_DIR": str(once),
    }
    flags = {"aggregate": kind, "max_offsets": 1_000, "commits": commits}
    if api == "connect":
        flags["remote"] = "local"
    if api == "format":
        flags["format_eos"] = True
    rng = random.Random(os.environ.get("EOS_TEST_SEED", "7"))
    for _ in range(3):
        proc = start_pipeline(bootstrap, app_id, source, output, checkpoint, summaries, env=env, **flags)
        kill_after_commits(proc, commits, 1 if kind == "window" else rng.randint(1, 3))
    proc = start_pipeline(bootstrap, app_id, source, output, checkpoint, summaries, env=env, **flags)
    finish(proc)

    records = read_output(bootstrap, output)
    if kind == "count":
        result = check_running_counts(records, key_counts(sent))
    else:
        result = check_windows(records, window_counts(sent))
    if api == "format":
        skipped = ledger_skipped(checkpoint)
    else:
        skipped = sum(s["skipped"] for s in read_summaries(summaries))
    print(f"{kind} {api}: 3 driver kills, {line_count(commits)} part commits, skipped {skipped}: {result}")
    assert result.exact, result
    assert result.received > 0
    assert (once / "crashed-after_produce").exists(), "the worker crash point never fired"
    assert skipped > 0, "no kill landed mid-batch: no re-run found a committed part"
    if kind == "count":  # every part wrote every batch (97 keys): `eos parts show` names the last one
        shown = json.loads(
            subprocess.run(
                [sys.executable, "-m", "eos.cli", "parts", "show", "--app", app_id, "--json"]
                + ["--bootstrap-servers", bootstrap],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        assert [p["part"] for p in shown["parts"]] == [0, 1, 2, 3]
        assert {p["batch"] for p in shown["parts"]} == {2}, shown  # 3,000 records, 1,000 per batch
        assert sum(p["rows"] for p in shown["parts"]) == 97


@pytest.mark.slow
@pytest.mark.long
def test_file_source_driver_sigkilled_twice_every_line_once(bootstrap, names, tmp_path):
    """A directory of text files (one per batch) -> eos, the driver SIGKILLed twice mid-batch: every line
    exactly once, each key's lines in file order."""
    output = names("out")
    testing.create_topic(bootstrap, output, 4)
    files = tmp_path / "files"
    files.mkdir()
    expected = []
    for n in range(5):
        lines = [testing.seq_value("file", p, seq) for seq in range(n * 100, n * 100 + 100) for p in range(4)]
        expected += lines
        path = files / f"part-{n:03d}.txt"
        path.write_bytes(b"\n".join(lines) + b"\n")
        os.utime(path, (1_000_000 + n, 1_000_000 + n))  # the file source takes files oldest first
    app_id, checkpoint, summaries = names("app"), tmp_path / "ckpt", tmp_path / "summaries.jsonl"
    commits = tmp_path / "commits.jsonl"
    env = {"EOS_PROCESSING_GUARANTEE": "exactly_once"}
    flags = {"files": files, "commits": commits}
    for more in (2, 5):
        proc = start_pipeline(bootstrap, app_id, "unused", output, checkpoint, summaries, env=env, **flags)
        kill_after_commits(proc, commits, more)
    proc = start_pipeline(bootstrap, app_id, "unused", output, checkpoint, summaries, env=env, **flags)
    finish(proc)

    result = testing.verify_exactly_once(bootstrap, output, expected)
    skipped = sum(s["skipped"] for s in read_summaries(summaries))
    print(f"files: 2 driver kills, {line_count(commits)} part commits, skipped on re-run {skipped}: {result}")
    assert result.exactly_once, result
    assert skipped > 0, "no kill landed mid-batch: no re-run found a committed part"


@pytest.mark.slow
@pytest.mark.long
def test_rand_in_the_output_fails_the_rerun_naming_batch_and_part(bootstrap, names, tmp_path):
    """`rand()` in the output: the driver is SIGKILLed while one part of batch 0 is certainly unwritten
    (its task stopped itself before producing) and others committed. The re-run computes other values
    for the committed parts: it must fail naming batch 0 and such a part, and write no key twice."""
    source, output, _ = seed(bootstrap, names, 100)
    app_id, checkpoint, summaries = names("app"), tmp_path / "ckpt", tmp_path / "summaries.jsonl"
    commits, once = tmp_path / "commits.jsonl", tmp_path / "once"
    once.mkdir()
    env = {
        "EOS_PROCESSING_GUARANTEE": "exactly_once",
        "EOS_PAUSE_AT": "before_produce",
        "EOS_CRASH_ONCE_DIR": str(once),
    }
    flags = {"aggregate": "rand", "commits": commits}
    proc = start_pipeline(bootstrap, app_id, source, output, checkpoint, summaries, env=env, **flags)
    paused = once / "paused-before_produce"
    deadline = time.monotonic() + 120
    while not (paused.exists() and paused.read_text().strip() and line_count(commits) >= 1):
        assert proc.running(), proc.log_tail()
        assert time.monotonic() < deadline, "no part paused and another committed within 120 s"
        time.sleep(0.05)
    assert proc.kill(), "the driver ended before the kill"
    committed = {int(line.split('"partition": ')[1].split(",")[0]) for line in open(commits)}

    proc = start_pipeline(bootstrap, app_id, source, output, checkpoint, summaries, env=env, **flags)
    assert proc.wait() != 0, "the re-run of a batch with rand() in its output succeeded"
    log = proc.log_tail(200_000)
    named = [p for p in committed if f"NondeterministicBatchError: batch 0, part {p}:" in log]
    assert named, f"no failure naming batch 0 and a committed part {sorted(committed)}:\n{log[-4000:]}"

    records = read_output(bootstrap, output)
    keys = [r.key for r in records]
    assert len(keys) == len(set(keys)), "a key was written twice"
    assert keys, "the committed parts' records are not in the output"


@pytest.mark.parametrize("kind", ["count", "rand"])
def test_a_batch_failed_after_some_parts_committed_runs_again_once(spark, bootstrap, names, tmp_path, kind):
    """In one session, no process killed: part 0 of batch 0 fails on every attempt while parts 1-3
    commit, so the query stops; the query restarted on the same checkpoint re-runs batch 0 in a new
    execution (Spark draws a new seed for rand() in each). A count must come out exactly once, the
    committed parts skipped; rand() in the value must fail the re-run naming batch 0 and a committed part,
    with no key written twice. (`make long-test` does both with real driver SIGKILLs.)"""
    import eos

    source, output, sent = seed(bootstrap, names, 50)
    marker = tmp_path / "fail-part-0"
    marker.touch()
    config = any_config(bootstrap, names("app"), output_topic=output)
    value = "CAST(count AS STRING)" if kind == "count" else "concat(CAST(count AS STRING), '|', rand())"

    def start():
        sink = eos.sink(config, process_batch=fail_part_0_while(str(marker)))
        columns = ("key", f"CAST({value} AS BINARY) AS value")
        return sink, start_counts(spark, config, source, tmp_path / "ckpt", columns, sink=sink)

    _, query = start()
    with pytest.raises(Exception, match="part 0 fails"):
        query.awaitTermination()
    committed = {p for p, progress in _parts.read_progress(config, range(4)).items() if progress is not None}
    assert committed == {1, 2, 3}, committed
    marker.unlink()
    sink, query = start()
    if kind == "count":
        query.awaitTermination()
        assert sink.history[0].batch_id == 0 and sink.history[0].skipped > 0
        result = check_running_counts(read_output(bootstrap, output), key_counts(sent))
        assert result.exact and result.received == len(key_counts(sent)), result
    else:
        with pytest.raises(Exception, match=r"NondeterministicBatchError: batch 0, part [123]:"):
            query.awaitTermination()
        keys = [r.key for r in read_output(bootstrap, output)]
        assert keys and len(keys) == len(set(keys)), "a key was written twice"


def test_a_batch_re_run_with_more_parts_keeps_its_first_placement(spark, bootstrap, names, tmp_path):
    """What eos's own advice leads to (PartTooLargeError: raise `parts`): part 0 of batch 0 fails on every
    attempt while parts 1-3 commit; the query is restarted with parts=8. The re-run must place batch 0
    as its first run did (4 parts: the committed ones write nothing, part 0 writes once), and the next
    batch is written in 8 parts. Before, the re-run wrote parts 5-7 (old parts 1-3's rows again) and part
    0, then failed, and neither setting could finish the batch."""
    import attrs

    import eos

    source, output, sent = seed(bootstrap, names, 50)
    marker = tmp_path / "fail-part-0"
    marker.touch()
    four = any_config(bootstrap, names("app"), output_topic=output, parts=4)
    eight = attrs.evolve(four, parts=8)

    def run(config):
        sink = eos.sink(config, process_batch=fail_part_0_while(str(marker)))
        start_counts(spark, config, source, tmp_path / "ckpt", sink=sink).awaitTermination()
        return sink

    with pytest.raises(Exception, match="part 0 fails"):
        run(four)
    committed = {p for p, progress in _parts.read_progress(four, range(4)).items() if progress is not None}
    assert committed == {1, 2, 3}, committed
    marker.unlink()

    sink = run(eight)
    assert [s.batch_id for s in sink.history] == [0]
    assert sink.history[0].partitions == 4 and sink.history[0].skipped > 0
    progress = _parts.read_progress(eight, range(8))
    assert {p for p, v in progress.items() if v is not None} == {0, 1, 2, 3}
    assert {progress[p].placement for p in range(4)} == {_parts.RowPlacement(4, "key")}
    result = check_running_counts(read_output(bootstrap, output), key_counts(sent))
    assert result.exact and result.received == len(key_counts(sent)), result

    # The next batch is placed as configured now: 8 parts.
    more = testing.produce_sequence(bootstrap, source, 4, 50, start=50)
    sink = run(eight)
    assert [s.batch_id for s in sink.history] == [1] and sink.history[0].partitions == 8
    progress = _parts.read_progress(eight, range(8))
    assert {progress[p].batch_id for p in range(8) if progress[p] is not None} == {1}
    totals = key_counts({p: sent[p] + more[p] for p in sent})
    result = check_running_counts(read_output(bootstrap, output), totals)
    assert result.exact, result


def test_part_columns_the_output_lacks_is_refused_naming_the_setting(spark, bootstrap, names, tmp_path):
    """`part_columns` naming a column the written output does not have: a ConfigError naming the setting
    before any part writes (before: Spark's UNRESOLVED_COLUMN from inside eos)."""
    source, output, _ = seed(bootstrap, names, 5)
    config = any_config(bootstrap, names("app"), output_topic=output, part_columns="customer")
    query = start_counts(spark, config, source, tmp_path / "ckpt")
    with pytest.raises(Exception, match=r"invalid config 'part_columns': names 'customer'"):
        query.awaitTermination()
    assert all(v is None for v in _parts.read_progress(config, range(4)).values())
    assert read_output(bootstrap, output) == []


def test_a_map_column_beside_the_output_is_placed_and_written(spark, bootstrap, names, tmp_path):
    """A `process_batch` query whose rows carry a map column: eos hashes every column it hands over, and
    Spark refuses to hash a map (before: DATATYPE_MISMATCH.HASH_MAP_TYPE from inside eos)."""
    source, output, sent = seed(bootstrap, names, 20)
    config = any_config(bootstrap, names("app"), output_topic=output)
    columns = (*COUNT_COLUMNS, "map('n', count, 'm', 1) AS m")
    start_counts(
        spark,
        config,
        source,
        tmp_path / "ckpt",
        columns,
        process_batch=lambda batch, state: batch.select(["key", "value"]),
    ).awaitTermination()
    result = check_running_counts(read_output(bootstrap, output), key_counts(sent))
    assert result.exact and result.received == len(key_counts(sent)), result


def test_process_with_topic_and_partition_columns_routes_each_row(spark, bootstrap, names, tmp_path):
    """input_mode="any" with `process=` and `output_topic_column` / `output_partition_column`: each
    row's outputs go where its columns say (a part writes through the same Writer as an input partition;
    before, a part ignored both columns and failed for want of an output topic)."""
    import eos

    source, output, sent = seed(bootstrap, names, 10)
    other = names("other")
    testing.create_topic(bootstrap, other, 4)
    config = any_config(bootstrap, names("app"), output_topic_column="dest", output_partition_column="p")
    columns = (
        *COUNT_COLUMNS,
        f"IF(substring(CAST(key AS STRING), -1) = '0', '{other}', '{output}') AS dest",
        "CAST(2 AS INT) AS p",
    )
    start_counts(
        spark,
        config,
        source,
        tmp_path / "ckpt",
        columns,
        process=lambda row, state: [eos.Output(value=row.value, key=row.key)],
    ).awaitTermination()
    main, side = read_output(bootstrap, output), read_output(bootstrap, other)
    keys = key_counts(sent)
    assert sorted(r.key for r in side) == sorted(k for k in keys if k.endswith(b"0"))
    assert sorted(r.key for r in main) == sorted(k for k in keys if not k.endswith(b"0"))
    assert {r.partition for r in main + side} == {2}


@pytest.mark.long
def test_a_part_open_past_the_transaction_timeout_inside_one_arrow_batch_is_too_large(
    spark, bootstrap, names, tmp_path
):
    """A part whose one transaction outlives transaction_timeout_ms in the middle of one Arrow batch (a
    `process` that stalls after the first row's output was produced, on every attempt): the broker aborts
    it and fences the producer; the query fails with PartTooLargeError naming what bounds a part (before:
    the producer's fenced error, as if the attempt were a zombie). `long`: four attempts of 8 s."""
    import eos

    source, output, _ = seed(bootstrap, names, 10)
    config = any_config(
        bootstrap,
        names("app"),
        output_topic=output,
        parts=1,
        transaction_timeout_ms=2_000,
        commit_interval_ms=500,
    )
    calls = []

    def process(row, state):
        calls.append(1)
        if len(calls) == 2:  # after the first row's output was produced
            time.sleep(8)  # the broker aborts it within 2 s + its 5 s check
        return [eos.Output(value=row.value, key=row.key)]

    query = start_counts(spark, config, source, tmp_path / "ckpt", process=process)
    with pytest.raises(Exception, match=r"PartTooLargeError: batch 0, part 0: its transaction has been open"):
        query.awaitTermination()
    assert read_output(bootstrap, output) == []
