"""Batch jobs written exactly once (`eos.write(df, config, job_id)`): a re-run with the same job id writes
nothing already in Kafka; a DataFrame that now yields other rows for a committed part fails with
NondeterministicBatchError and writes nothing more; the driver SIGKILLed after some parts committed and the
job run again: every row once, read_committed. Real broker, real Spark; the killed driver is
tests/integration/batch_job_app.py."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

import eos
from eos import testing
from tests.integration.test_cli import cli, ok
from tests.support.jobs import committed_parts, kill_after_first_part

ROWS = 4_000
PARTS = 4


def _table(spark, path, rows: int) -> None:
    (
        spark.range(rows)
        .selectExpr("CAST(id AS STRING) AS key", "CAST(concat('v', CAST(id AS STRING)) AS BINARY) AS value")
        .write.mode("overwrite")
        .parquet(str(path))
    )


def _output(bootstrap: str, topic: str) -> Counter:
    records, hanging = testing.read_topic(bootstrap, topic, marker=testing.write_markers(bootstrap, topic))
    assert hanging == []
    return Counter(r.value for r in records)


def _want(rows: int) -> Counter:
    return Counter(b"v%d" % i for i in range(rows))


def test_a_batch_job_is_written_once_per_job_id(spark, bootstrap, names, tmp_path):
    output, app = names("job-out"), names("job-app")
    testing.create_topic(bootstrap, output, 4)
    table = tmp_path / "table"
    _table(spark, table, ROWS)
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=app,
        output_topic=output,
        processing_guarantee="exactly_once",
        parts=PARTS,
    )
    first = eos.write(spark.read.parquet(str(table)), config, "2026-11-27")
    assert (first.records_out, first.skipped) == (ROWS, 0)
    again = eos.write(spark.read.parquet(str(table)), config, "2026-11-27")
    assert (again.records_out, again.skipped) == (0, ROWS), "a re-run writes nothing"
    assert _output(bootstrap, output) == _want(ROWS), "each row once"

    shown = json.loads(ok(cli(bootstrap, "parts", "show", "--app", app, "--job", "2026-11-27", "--json")))
    assert [p["batch"] for p in shown["parts"]] == [0] * PARTS
    assert sum(p["rows"] for p in shown["parts"]) == ROWS
    assert cli(bootstrap, "parts", "show", "--app", app, "--job", "other").returncode != 0

    # The table changed: the committed parts' rows differ, and nothing more is written.
    _table(spark, table, ROWS + 10)
    with pytest.raises(eos.NondeterministicBatchError, match="job '2026-11-27'"):
        eos.write(spark.read.parquet(str(table)), config, "2026-11-27")
    assert _output(bootstrap, output) == _want(ROWS), "nothing twice, nothing of the changed table"

    # A re-run over no rows at all (Spark plans no task): the committed parts still say what they hold.
    with pytest.raises(eos.NondeterministicBatchError, match="its first run committed"):
        eos.write(spark.read.parquet(str(table)).where("false"), config, "2026-11-27")
    assert _output(bootstrap, output) == _want(ROWS)

    for bad in ("no spaces", "2026-11-27\n", "x.job.y"):
        with pytest.raises(eos.ConfigError, match="job_id"):
            eos.write(spark.read.parquet(str(table)), config, bad)
    stream = spark.readStream.format("rate").load()
    with pytest.raises(eos.ConfigError, match="streaming DataFrame"):
        eos.write(stream, config, "x")


# Kill tests of batch jobs: `make chaos` (make long-test).
@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("table_then", ["same", "changed"])
def test_a_job_whose_driver_is_sigkilled_after_some_parts_committed_is_run_again_once(
    spark, bootstrap, names, tmp_path, table_then
):
    """Run again over the same table: every row once. Over a changed table: NondeterministicBatchError
    from a committed part, and no row twice."""
    output, app, job = names("jobkill-out"), names("jobkill-app"), "backfill-1"
    testing.create_topic(bootstrap, output, 4)
    table = tmp_path / "table"
    _table(spark, table, ROWS)
    config = eos.Config(bootstrap_servers=bootstrap, app_id=app, output_topic=output)
    argv = [sys.executable, "-m", "tests.integration.batch_job_app", bootstrap, app, output, str(table)]
    argv += [job, str(PARTS)]
    kill_after_first_part(argv, config, job, PARTS, tmp_path / "driver.log")

    if table_then == "changed":
        _table(spark, table, ROWS + 10)
        rerun = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert rerun.returncode == 3, rerun.stdout[-3000:] + rerun.stderr[-3000:]
        assert "NondeterministicBatchError" in rerun.stdout and f"job '{job}'" in rerun.stdout
        written = _output(bootstrap, output)
        assert max(written.values()) == 1, "no row twice"
        return
    rerun = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    summary = json.loads(rerun.stdout.strip().splitlines()[-1])
    assert summary["skipped"] > 0, "the re-run found committed parts and skipped them"
    assert _output(bootstrap, output) == _want(ROWS), "every row once"
    assert committed_parts(config, job, PARTS) == PARTS


def test_df_write_format_eos_is_a_batch_job_named_by_its_option(spark, bootstrap, names, tmp_path):
    output, app = names("jobfmt-out"), names("jobfmt-app")
    testing.create_topic(bootstrap, output, 4)
    table = tmp_path / "table"
    _table(spark, table, ROWS)

    def writer(**options):
        w = eos.place(spark.read.parquet(str(table)), parts=PARTS).write.format("eos").mode("append")
        options = {
            "kafka.bootstrap.servers": bootstrap,
            "topic": output,
            "eos.app.id": app,
            "eos.processing.guarantee": "exactly_once",
            **options,
        }
        for key, value in options.items():
            w = w.option(key, value)
        return w

    with pytest.raises(Exception, match="eos.job.id"):
        writer().save()
    with pytest.raises(Exception, match="append"):
        writer(**{"eos.job.id": "nightly-1"}).mode("overwrite").save()
    writer(**{"eos.job.id": "nightly-1"}).save()
    writer(**{"eos.job.id": "nightly-1"}).save()  # run again: nothing more
    assert _output(bootstrap, output) == _want(ROWS), "each row once"
    shown = json.loads(ok(cli(bootstrap, "parts", "show", "--app", app, "--job", "nightly-1", "--json")))
    assert sum(p["rows"] for p in shown["parts"]) == ROWS

    # The same job re-run through eos.write: its rows are hashed in another column order than
    # eos.place's, so the committed parts do not match; refused, nothing written twice.
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=app,
        output_topic=output,
        parts=PARTS,
        processing_guarantee="exactly_once",
    )
    with pytest.raises(eos.NondeterministicBatchError, match="job 'nightly-1'"):
        eos.write(spark.read.parquet(str(table)), config, "nightly-1")
    assert _output(bootstrap, output) == _want(ROWS)
