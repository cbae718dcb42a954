"""Spark Declarative Pipelines (PySpark 4.1+): a pipeline whose sink is `format("eos")`
(`dp.create_sink`), run by Spark's own runner (`spark-pipelines run`, which starts a Spark Connect server
in its JVM), SIGKILLed mid-run with its JVM and run again, then once more with nothing new: every input
record once, in order per input partition, read back read_committed. `make matrix` runs it on its newest
Spark (PySpark 4.0 has no pipelines: skipped there). The definitions are tests/integration/pipelines/."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from conftest import kill_after_committed, records_committed

import eos
from eos import testing
from eos._spark._affinity import _jar_path
from eos._spark._cache import connector_jars
from tests.support.processes import DriverProcess
from tests.support.summaries import ledger_skipped, read_ledger

pyspark = pytest.importorskip("pyspark")
if int(pyspark.__version__.split(".")[0]) < 4 or pyspark.__version__.startswith("4.0"):
    pytest.skip(
        f"Declarative Pipelines need PySpark 4.1+ (this is {pyspark.__version__})", allow_module_level=True
    )

DEFINITIONS = Path(__file__).parent / "pipelines" / "eos_sink.py"
PARTITIONS, PER_PARTITION, BATCH = 4, 1_500, 100


def _pipeline(tmp_path: Path) -> Path:
    """The pipeline's folder: its spec and its definitions."""
    root = tmp_path / "pipeline"
    (root / "transformations").mkdir(parents=True)
    shutil.copy(DEFINITIONS, root / "transformations" / DEFINITIONS.name)
    spec = root / "spark-pipeline.yml"
    spec.write_text(
        "name: eos_copy\n"
        f"storage: file://{tmp_path / 'storage'}\n"
        "libraries:\n"
        "  - glob:\n"
        "      include: transformations/**\n"
    )
    return spec


def _run(spec: Path, env: dict[str, str], log: Path) -> DriverProcess:
    runner = Path(pyspark.__file__).parent / "bin" / "spark-pipelines"
    jars = [str(j) for j in connector_jars()]
    jar = _jar_path()
    assert jar is not None, "eos's jar is not built: make setup"
    argv = [str(runner), "--jars", ",".join([*jars, str(jar)]), "--conf", "spark.ui.enabled=false"]
    argv += ["run", "--spec", str(spec)]
    python = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    return DriverProcess(argv, env={**env, **python}, log_path=str(log), cwd=spec.parent, stdout_too=True)


@pytest.mark.slow
@pytest.mark.long
def test_a_declarative_pipeline_with_an_eos_sink_sigkilled_mid_run_writes_every_record_once(
    bootstrap, names, tmp_path
):
    source, output = names("sdp-in"), names("sdp-out")
    testing.create_topic(bootstrap, source, PARTITIONS)
    testing.create_topic(bootstrap, output, PARTITIONS)
    sent = testing.produce_sequence(bootstrap, source, PARTITIONS, PER_PARTITION)
    app = names("sdp-app")
    config = eos.Config(bootstrap_servers=bootstrap, app_id=app, output_topic=output)
    spec = _pipeline(tmp_path)
    env = {"EOS_SDP_BOOTSTRAP": bootstrap, "EOS_SDP_APP": app, "EOS_SDP_SOURCE": source}
    env |= {"EOS_SDP_OUTPUT": output, "EOS_SDP_BATCH": str(BATCH)}
    log = tmp_path / "runner.log"
    total = PARTITIONS * PER_PARTITION

    runner = _run(spec, env, log)
    kill_after_committed(runner, config, source, PARTITIONS, 1_000)
    at_kill = records_committed(config, source, PARTITIONS)
    assert at_kill < total, f"the run ended before the kill: {at_kill} of {total} committed"

    for _ in range(2):  # to the end, then once more with nothing new
        runner = _run(spec, env, log)
        assert runner.wait() == 0, runner.log_tail()
    assert records_committed(config, source, PARTITIONS) == total

    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    # the runner's checkpoint (handed to the sink as `file:/...`), where eos keeps its ledger
    checkpoint = tmp_path / "storage" / "_checkpoints" / "eos_out" / "to_kafka" / "0"
    assert not (spec.parent / "file:").exists(), "eos's ledger went to a folder 'file:' in the runner's cwd"
    assert len(read_ledger(checkpoint)) == total // BATCH, "the ledger holds every batch"
    skipped = ledger_skipped(checkpoint)
    print(f"declarative pipeline: killed at {at_kill} of {total} committed, skipped {skipped}: {result}")
    assert result.exactly_once, result
    assert result.missing == 0 and result.received == total
    assert skipped > 0, "no kill landed between eos's commit and Spark's: no re-run found rows to skip"
