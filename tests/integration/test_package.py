"""The package as users get it: `make dist`'s wheel installed (not editable) into a fresh venv, and the
e2e pipeline run from that venv, outside the checkout, on the real broker and Spark.

The fresh venv borrows the test venv's libraries (`tests.support.venvs.fresh_venv`), so it finds
pyspark, pyarrow and confluent-kafka without downloading them again, but not the test venv's `eos`: the
only `eos` it can import is the wheel's.
"""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

import eos
from eos import testing
from eos._spark._cache import cache_dir
from tests.support.localbroker import SASL_USERS
from tests.support.processes import DriverProcess
from tests.support.summaries import read_summaries
from tests.support.venvs import fresh_venv

ROOT = Path(__file__).resolve().parents[2]


def _run(*argv, cwd=None) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{argv}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done.stdout


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv_and_runs_the_pipeline_exactly_once(
    bootstrap, names, tmp_path, dist
):
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in dist.iterdir())
    wheel = wheels[0]
    assert wheel.name.startswith(f"eos_spark-{eos.__version__}-"), wheel.name
    with zipfile.ZipFile(wheel) as z:
        names_in_wheel = set(z.namelist())
        secrets = [pw.encode() for pw in SASL_USERS.values()]
        leaked = [n for n in names_in_wheel if any(pw in z.read(n) for pw in secrets)]
    assert not leaked, f"the test broker's SASL passwords are in the wheel: {leaked}"
    assert "eos/py.typed" in names_in_wheel
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names_in_wheel), sorted(names_in_wheel)[:5]
    assert not [n for n in names_in_wheel if n.startswith(("tests/", "bench/", "examples/"))]

    venv = tmp_path / "fresh"
    python, site = fresh_venv(venv)
    _run(str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel))

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    where = _run(str(python), "-c", "import eos; print(eos.__file__)", cwd=outside).strip()
    assert where.startswith(str(site)), where
    meta = _run(
        str(python),
        "-c",
        "from importlib.metadata import metadata as m; d = m('eos-spark');"
        " print(d['Version'], d.get('License-Expression'), d['Requires-Python'])",
        cwd=outside,
    ).split()
    assert meta == [eos.__version__, "Apache-2.0", ">=3.10"], meta
    assert "offsets" in _run(str(venv / "bin" / "eos"), "--help", cwd=outside)

    # The e2e, from the installed package: the example pipeline copied out of the checkout.
    script = outside / "pipeline.py"
    shutil.copy(ROOT / "examples" / "pipeline.py", script)
    source, output = names("pkg-in"), names("pkg-out")
    testing.create_topic(bootstrap, source, 2)
    testing.create_topic(bootstrap, output, 2)
    sent = testing.produce_sequence(bootstrap, source, 2, 200)
    summaries = tmp_path / "summaries.jsonl"
    argv = [str(python), str(script), "--bootstrap", bootstrap, "--app-id", names("pkg-app")]
    argv += ["--input", source, "--output", output, "--checkpoint", str(tmp_path / "ckpt")]
    argv += ["--summaries", str(summaries), "--max-offsets", "200"]
    # The connector jars `make setup` fetched (the wheel's eos has no .cache beside it): without them
    # spark.jars.packages goes through Ivy, which fails on a ~/.m2 holding a pom without its jar.
    env = {"PYTHONPATH": "", "EOS_CACHE": str(cache_dir())}
    proc = DriverProcess(argv, env=env, log_path=str(tmp_path / "pipeline.log"), cwd=outside)
    assert proc.wait() == 0, proc.log_tail()
    assert read_summaries(summaries), proc.log_tail()
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    assert result.exactly_once, result
