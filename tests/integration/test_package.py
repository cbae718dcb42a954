"""The package as users get it: `make dist`'s wheel installed (not editable) into a fresh venv, and the
e2e pipeline run from that venv, outside the checkout, on the real broker and Spark.

The fresh venv borrows the test venv's libraries (`tests.support.venvs.fresh_venv`), so it finds
pyspark, pyarrow and confluent-kafka without downloading them again, but not the test venv's `eos`: the
only `eos` it can import is the wheel's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
import zipfile
from pathlib import Path

import pyspark
import pytest
from conftest import finish, kill_after_committed, seed

import eos
from eos import testing
from eos._spark._cache import cache_dir
from tests.support.localbroker import SASL_USERS
from tests.support.processes import DriverProcess
from tests.support.summaries import read_summaries
from tests.support.venvs import fresh_venv

ROOT = Path(__file__).resolve().parents[2]
SERVER_APP = Path(__file__).with_name("connect_server_app.py")


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


_NO_CLIENT = pytest.mark.skipif(
    int(pyspark.__version__.split(".")[0]) < 4, reason="pyspark-client exists from Spark 4.0 on"
)


def _client_venv(tmp_path: Path, dist: Path) -> tuple[Path, Path, Path]:
    """A venv with `pyspark-client` (a Spark Connect client only: no JVM, no py4j) and no full PySpark,
    and eos's wheel installed into it with its dependencies from nothing but what the venv holds (a
    wheel requiring any `pyspark` fails here, "No matching distribution found for pyspark", since
    pyspark-client's metadata is not pyspark's): its python, the pyspark-client wheel and eos's."""
    version = pyspark.__version__
    found = sorted((cache_dir() / "wheels").glob(f"pyspark_client-{version}-*.whl"))
    assert found, f"no pyspark-client {version} wheel in {cache_dir() / 'wheels'}: run make setup"
    python, _ = fresh_venv(tmp_path / "client", leave_out=("pyspark", "py4j"))
    _run(str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(found[-1]))
    (wheel,) = dist.glob("*.whl")
    _run(str(python), "-m", "pip", "install", "-q", "--no-index", str(wheel))
    return python, found[-1], wheel


_CLIENT_ENV = {"PYTHONPATH": "", "EOS_PROCESSING_GUARANTEE": "exactly_once"}


@_NO_CLIENT
def test_the_wheel_installs_beside_a_connect_only_client_and_brings_no_pyspark(tmp_path, dist):
    """eos's wheel in a venv holding `pyspark-client` only: pip lists one pyspark distribution, `import
    eos` works, a classic session is refused naming what to do; where the full PySpark is installed
    beside the client, eos names the two. (`make chaos` runs a pipeline from such a venv through a
    SIGKILL of its Connect server: the test below.)"""
    version = pyspark.__version__
    python, client, wheel = _client_venv(tmp_path, dist)
    pip_list = _run(str(python), "-m", "pip", "list", "--format", "json")
    listed = {d["name"].lower() for d in json.loads(pip_list)}
    assert {"eos-spark", "pyspark-client"} <= listed and not listed & {"pyspark", "py4j"}, sorted(listed)

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    probe = (
        "import importlib.util as u, pyspark, eos;"
        " print(pyspark.__version__, u.find_spec('py4j'), flush=True); eos.spark_session()"
    )
    done = subprocess.run(
        [str(python), "-c", probe],
        cwd=outside,
        env={**os.environ, **_CLIENT_ENV, "EOS_CACHE": str(cache_dir())},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.split() == [version, "None"], done.stdout + done.stderr[-2000:]
    assert done.returncode != 0 and "a Spark Connect client only" in done.stderr, done.stderr[-2000:]

    # the full PySpark beside pyspark-client: the two overwrote each other's files, which eos names
    both, _ = fresh_venv(tmp_path / "both")
    _run(str(both), "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(client), str(wheel))
    named = "from eos._spark import _flavour; print(_flavour.overlapping())"
    said = _run(str(both), "-c", named, cwd=outside)
    assert f"(pyspark {version}, pyspark-client {version})" in said, said


# make chaos (53 s, two Connect servers' starts). Twins in make test: the wheel beside pyspark-client
# (above); a Spark Connect server's eos process SIGKILLed mid-batch (test_format_eos), and Spark Connect
# workers killed at each crash point (test_state's Connect run)
@pytest.mark.long
@_NO_CLIENT
def test_a_connect_only_client_stays_exactly_once_through_a_sigkill_of_its_server(
    bootstrap, names, tmp_path, dist
):
    """The example pipeline runs from a venv holding `pyspark-client` and eos's wheel (no full PySpark)
    against a Spark Connect server with eos, in a process of its own. The server (the Spark driver) is
    SIGKILLed mid-batch. After a restart of both, the output is exactly once, and the re-run batch
    skipped what was committed."""
    python, _, _ = _client_venv(tmp_path, dist)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {**_CLIENT_ENV, "EOS_CACHE": str(cache_dir())}
    script = outside / "pipeline.py"
    shutil.copy(ROOT / "examples" / "pipeline.py", script)
    source, output, sent = seed(bootstrap, names, 1_500)  # three batches of 2,000
    app_id, checkpoint, summaries = names("client-app"), tmp_path / "ckpt", tmp_path / "summaries.jsonl"
    config = eos.Config(bootstrap_servers=bootstrap, app_id=app_id, output_topic=output)
    token = uuid.uuid4().hex

    def server(n: int) -> tuple[DriverProcess, str]:
        port_file = tmp_path / f"server-{n}.port"
        proc = DriverProcess(
            [sys.executable, str(SERVER_APP), str(port_file)],
            env={"SPARK_CONNECT_AUTHENTICATE_TOKEN": token},
            log_path=str(tmp_path / f"server-{n}.log"),
        )
        deadline = time.monotonic() + 300
        while not port_file.exists():
            assert proc.running(), proc.log_tail()
            assert time.monotonic() < deadline, f"no Connect server listening within 300 s: {proc.log_tail()}"
            time.sleep(0.2)
        # localhost: PySpark's client sends a token without TLS to that host alone
        return proc, f"sc://localhost:{port_file.read_text()}/;token={token}"

    def client(n: int, remote: str) -> DriverProcess:
        argv = [str(python), str(script), "--bootstrap", bootstrap, "--app-id", app_id, "--input", source]
        argv += ["--output", output, "--checkpoint", str(checkpoint), "--summaries", str(summaries)]
        argv += ["--max-offsets", "2000", "--commit-every", "100", "--remote", remote]
        return DriverProcess(argv, env=env, log_path=str(tmp_path / f"client-{n}.log"), cwd=outside)

    first, remote = server(1)
    try:
        pipeline = client(1, remote)
        # mid-batch: a batch is 2,000 records, 500 per input partition, committed every 100
        kill_after_committed(first, config, source, 4, 700)
    finally:
        first.kill()
    pipeline.kill()
    second, remote = server(2)
    try:
        finish(client(2, remote))
    finally:
        second.kill()

    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    history = read_summaries(summaries)
    skipped = sum(s["skipped"] for s in history)
    print(f"connect-only client: {len(history)} batch summaries, skipped on replay {skipped}: {result}")
    assert result.exactly_once and result.missing == 0, result
    assert skipped > 0, "the server kill did not land mid-batch: nothing was re-run"
