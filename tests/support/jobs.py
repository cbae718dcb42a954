"""Batch-job test helpers (tests/integration/test_batch_jobs.py, test_delta.py): a process function, here
because the workers import it by module, a job's committed parts, and a job's driver killed mid-job."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import eos
from eos._kafka import _offsets
from eos._spark._preflight import job_app_id


def slow_copy(row, state):
    """The row's key and value as they are, a millisecond per row: a part takes long enough for a test
    to kill its driver between two parts' commits."""
    time.sleep(0.001)
    return eos.Output(value=row.value, key=row.key)


def committed_parts(config: eos.Config, job_id: str, parts: int) -> int:
    """How many of the job's `parts` have a committed offset in its progress topic (the job's group)."""
    app = job_app_id(config, job_id)
    job = eos.Config(bootstrap_servers=config.bootstrap_servers, app_id=app, output_topic="unused")
    topic = f"{app}-eos-parts"
    entries = _offsets.committed_entries(job, [(topic, p) for p in range(parts)], None, False, False)
    return sum(1 for e in entries.values() if e is not None)


def kill_after_first_part(argv: list[str], config: eos.Config, job_id: str, parts: int, log: Path) -> int:
    """Run the job's driver (`argv`, output into `log`) and SIGKILL its process group (driver, JVM,
    workers) as soon as a first part of the job committed; returns the parts committed after the kill,
    asserted to be some, not all."""
    with open(log, "wb") as out:
        driver = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 240
    committed = 0
    while committed == 0:
        assert driver.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, f"no part committed: {log.read_text()[-3000:]}"
        time.sleep(0.05)
        try:
            committed = committed_parts(config, job_id, parts)
        except eos.EosError:
            committed = 0  # the progress topic does not exist yet
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    after_kill = committed_parts(config, job_id, parts)
    assert 1 <= after_kill < parts, f"the kill did not land mid-job: {after_kill} of {parts} parts committed"
    return after_kill
