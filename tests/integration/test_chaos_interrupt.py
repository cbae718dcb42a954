"""`make chaos` interrupted: a SIGTERM to the harness (what `make` passes on when it is terminated) once
its broker, Spark master and workers, a driver and its executors run leaves none of them alive, nor
anything below them. Each was started in a session of its own, so none would end with the harness."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.support.processes import descendants

ROOT = Path(__file__).resolve().parents[2]
#: the harness's processes, by a piece of their command line
STARTED = {
    "broker": "kafka.Kafka",
    "spark master": "deploy.master.Master",
    "spark worker": "deploy.worker.Worker",
    "driver": "tests.chaos.chaos_pipeline",
    "driver JVM": "deploy.SparkSubmit",
    "executor": "CoarseGrainedExecutorBackend",
}


def alive(pid: int, created: float) -> bool:
    try:
        proc = psutil.Process(pid)
        return proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.slow
@pytest.mark.long  # a test of the chaos harness: it runs where the harness does (make chaos)
@pytest.mark.timeout(400)
def test_sigterm_stops_everything_the_chaos_harness_started(tmp_path):
    argv = [sys.executable, "-m", "tests.chaos.harness", "--records", "4000", "--incarnations", "1"]
    argv += ["--pipelines", "stateless", "--guarantees", "exactly_once"]
    argv += ["--home", str(tmp_path / "home"), "--report", str(tmp_path / "chaos.json")]
    with open(tmp_path / "harness.log", "wb") as out:
        harness = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    started: dict[int, float] = {}
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and harness.poll() is None:
            below = descendants(harness.pid)
            running = {kind for kind, text in STARTED.items() if any(text in p.cmdline for p in below)}
            if running == set(STARTED):
                break
            time.sleep(0.5)
        log = (tmp_path / "harness.log").read_text(errors="replace")
        assert running == set(STARTED), (running, log[-3000:])
        for p in descendants(harness.pid):
            try:
                started[p.pid] = psutil.Process(p.pid).create_time()
            except psutil.NoSuchProcess:
                pass
        harness.send_signal(signal.SIGTERM)
        code = harness.wait(180)
        survivors = [pid for pid, created in started.items() if alive(pid, created)]
        assert survivors == [], [" ".join(psutil.Process(pid).cmdline())[:200] for pid in survivors]
        assert code == 128 + signal.SIGTERM  # the harness's own clean-up ran to its end
    finally:
        harness.kill()
        for pid, created in started.items():
            if alive(pid, created):
                psutil.Process(pid).kill()
