"""Delta Lake as a source, for real (Delta's jars from Maven Central, `make long-test` fetches them): a Delta
table streamed into Kafka in input_mode "any" with the driver SIGKILLed twice mid-batch, and a version of
a table written with `eos.write` with the driver SIGKILLed after some parts committed and the job run
again. Each read back read_committed against the table's rows. The Delta processes are
tests/integration/delta_app.py and examples/pipeline.py (`--delta`)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest
from conftest import finish, kill_after_commits, line_count, start_pipeline

import eos
from eos import testing
from tests.integration.delta_app import KEYS, rows
from tests.support import delta
from tests.support.jobs import committed_parts, kill_after_first_part
from tests.support.summaries import read_summaries


def _seed(tmp_path, versions: int, per_key: int, spread: int = 0) -> str:
    table = str(tmp_path / "table")
    argv = [sys.executable, "-m", "tests.integration.delta_app", "seed", table, str(versions), str(per_key)]
    argv += [str(spread)] if spread else []
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return table


@pytest.mark.slow
@pytest.mark.long
def test_a_delta_table_streamed_through_two_driver_sigkills_writes_every_row_once(bootstrap, names, tmp_path):
    """Five table versions, a file each, a batch each (maxFilesPerTrigger 1), 4 parts a batch: the driver
    SIGKILLed after 2 and then 5 more part commits (so mid-batch), then run to the end. Every row once,
    each key's rows in table order, and a re-run found committed parts to skip."""
    versions, per_key = 5, 100
    table = _seed(tmp_path, versions, per_key)
    output = names("delta-out")
    testing.create_topic(bootstrap, output, 4)
    app_id, checkpoint, summaries = names("app"), tmp_path / "ckpt", tmp_path / "summaries.jsonl"
    commits = tmp_path / "commits.jsonl"
    env = {"EOS_PROCESSING_GUARANTEE": "exactly_once"}
    jars = ",".join(str(j) for j in delta.jars())
    flags = {"delta": table, "delta_jars": jars, "commits": commits}
    for more in (2, 5):
        proc = start_pipeline(bootstrap, app_id, "unused", output, checkpoint, summaries, env=env, **flags)
        kill_after_commits(proc, commits, more)
    proc = start_pipeline(bootstrap, app_id, "unused", output, checkpoint, summaries, env=env, **flags)
    finish(proc)

    expected = [value.encode() for version in range(versions) for _, value in rows(version, per_key)]
    result = testing.verify_exactly_once(bootstrap, output, expected)
    history = read_summaries(summaries)
    skipped = sum(s["skipped"] for s in history)
    print(f"delta: 2 driver kills, {line_count(commits)} part commits, skipped on re-run {skipped}: {result}")
    assert result.exactly_once, result
    assert result.missing == 0 and result.received == len(expected)
    assert skipped > 0, "no kill landed mid-batch: no re-run found a committed part"


@pytest.mark.slow
@pytest.mark.long
def test_a_delta_version_written_by_eos_write_through_a_driver_sigkill_is_written_once(
    bootstrap, names, tmp_path
):
    """Version 3 of a five-version table (4,000 of its 5,000 rows) written by `eos.write`, the driver and
    its workers SIGKILLed once the first of 4 parts committed; the job run again: every row of that
    version once, none of the version after it, and the re-run skipped the committed parts."""
    parts, per_key, version, spread = 4, 250, 3, 50
    table = _seed(tmp_path, 5, per_key, spread)  # 200 keys: every part gets rows
    output, app, job = names("delta-job-out"), names("delta-job-app"), "delta-v3"
    testing.create_topic(bootstrap, output, 4)
    config = eos.Config(bootstrap_servers=bootstrap, app_id=app, output_topic=output)
    argv = [sys.executable, "-m", "tests.integration.delta_app", "write", bootstrap, app, output, table]
    argv += [str(version), job, str(parts)]
    after_kill = kill_after_first_part(argv, config, job, parts, tmp_path / "driver.log")

    rerun = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    summary = json.loads(rerun.stdout.strip().splitlines()[-1])
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    written = Counter(r.value for r in records)
    want = Counter(value.encode() for v in range(version + 1) for _, value in rows(v, per_key, spread))
    missing, twice = sum((want - written).values()), sum(n - 1 for n in written.values() if n > 1)
    print(
        f"delta job: killed after {after_kill} parts, re-run skipped {summary['skipped']}: missing {missing},"
        f" twice {twice}, not in version {version} {len(set(written) - set(want))}"
    )
    assert hanging == []
    assert summary["skipped"] > 0, "the re-run found committed parts and skipped them"
    assert written == want, f"missing {missing}, twice {twice}"
    assert len(want) == (version + 1) * per_key * KEYS
    assert committed_parts(config, job, parts) == parts
