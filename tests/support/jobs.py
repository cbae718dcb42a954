"""A process function for batch-job tests (tests/integration/test_batch_jobs.py), here because the
workers import it by module."""

from __future__ import annotations

import time

import eos


def slow_copy(row, state):
    """The row's key and value as they are, a millisecond per row: a part takes long enough for a test
    to kill its driver between two parts' commits."""
    time.sleep(0.001)
    return eos.Output(value=row.value, key=row.key)
