"""Batch-job test helpers (tests/integration/test_batch_jobs.py, test_delta.py): a process function, here
because the workers import it by module, and a job's committed parts."""

from __future__ import annotations

import time

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
