"""A cluster deploy as Spark documents it for Python dependencies: `spark-submit` of the example pipeline
to a standalone cluster (a master and two workers on this machine), with eos shipped as a zip of its
wheel through `--py-files` and the Kafka connector through `--jars`, to Pythons that do not have eos;
through `foreachBatch(eos.sink(config))` and through `format("eos")` (eos's JVM provider, its jar taken
out of the zip and put on the driver's class path by `eos.register`).

40-54 s (a cluster's start-up and a venv): `make chaos` (long-test) runs it, not `make test`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import eos
from eos import testing
from eos._spark._cache import connector_jars, spark_jars_dir
from tests.chaos.cluster import StandaloneCluster, _spark_home
from tests.support.summaries import read_ledger, read_summaries
from tests.support.venvs import fresh_venv

ROOT = Path(__file__).resolve().parents[2]


def _run(*argv, cwd=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("api", ["foreachBatch", "format"])
def test_spark_submit_to_a_standalone_cluster_with_eos_as_py_files(bootstrap, names, tmp_path, dist, api):
    # eos as the cluster gets it: the wheel, zipped for --py-files (a wheel is a zip of the package).
    (wheel,) = dist.glob("*.whl")
    shipped = tmp_path / f"eos-{eos.__version__}.zip"
    shutil.copy(wheel, shipped)

    # A Python without eos for the driver and the executors: the test venv's libraries, not its eos.
    python, _ = fresh_venv(tmp_path / "node")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    assert _run(str(python), "-c", "import eos", cwd=outside).returncode != 0, (
        "the node Python has eos already"
    )

    source, output = names("dep-in"), names("dep-out")
    testing.create_topic(bootstrap, source, 4)
    testing.create_topic(bootstrap, output, 4)
    sent = testing.produce_sequence(bootstrap, source, 4, 250)
    script = outside / "pipeline.py"
    shutil.copy(ROOT / "examples" / "pipeline.py", script)
    jars = ",".join(str(j) for j in connector_jars())
    assert jars, f"no connector jars in {spark_jars_dir()}: make setup"

    cluster = StandaloneCluster(tmp_path / "cluster", workers=2, cores_per_worker=1)
    cluster.up()
    try:
        summaries = tmp_path / "summaries.jsonl"
        argv = [str(_spark_home() / "bin" / "spark-submit"), "--master", cluster.master_url]
        argv += ["--py-files", str(shipped), "--jars", jars]
        argv += [
            "--conf",
            f"spark.pyspark.python={python}",
            "--conf",
            f"spark.pyspark.driver.python={python}",
        ]
        argv += [str(script), "--bootstrap", bootstrap, "--app-id", names("dep-app"), "--input", source]
        argv += ["--output", output, "--checkpoint", str(tmp_path / "ckpt"), "--summaries", str(summaries)]
        argv += ["--max-offsets", "400"] + (["--format-eos"] if api == "format" else [])
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "EOS_SPARK_MASTER")}
        env.update(EOS_PROCESSING_GUARANTEE="exactly_once", PYTHONFAULTHANDLER="1")
        with open(tmp_path / "submit.log", "wb") as log:
            done = subprocess.run(
                argv, cwd=outside, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=600
            )
        assert done.returncode == 0, (tmp_path / "submit.log").read_text(errors="replace")[-4000:]
        apps = cluster.status().get("completedapps", []) + cluster.status().get("activeapps", [])
    finally:
        cluster.down()
    if api == "format":  # its batches are in the ledger, each attempt's partitions with their figures
        attempts = [a for b in read_ledger(tmp_path / "ckpt") for a in b["attempts"]]
        assert {a["data_path"] for a in attempts} == {"jvm"}, attempts
        history = [{"partitions": len(a["partitions"]), **_summed(a["partitions"])} for a in attempts]
    else:
        history = read_summaries(summaries)
    assert history and sum(s["records_in"] for s in history) == 1_000, history
    assert apps, "the job did not run on the standalone cluster"
    # eos's placement classes came out of the zip and ran: each task on the executor eos placed it on.
    assert any(s["placed"] == s["partitions"] > 0 for s in history), history
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    assert result.exactly_once, result


def _summed(partitions: list[dict]) -> dict:
    return {name: sum(p[name] for p in partitions) for name in ("records_in", "placed")}
