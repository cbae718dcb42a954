"""The batch summaries a driver under test leaves behind: how the tests and the chaos harness see how
far a pipeline they cannot ask (it runs in its own process, and may be SIGKILLed) has come."""

from __future__ import annotations

import json
import os


def read_summaries(path) -> list[dict]:
    """Batch summaries appended as JSON lines by `append_summary` (examples/pipeline.py --summaries,
    tests/chaos/chaos_pipeline.py)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
