"""The batch summaries a driver under test leaves behind: how the tests and the chaos harness see how
far a pipeline they cannot ask (it runs in its own process, and may be SIGKILLed) has come."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def read_summaries(path) -> list[dict]:
    """Batch summaries appended as JSON lines by `append_summary` (examples/pipeline.py --summaries,
    tests/chaos/chaos_pipeline.py)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def read_ledger(checkpoint) -> list[dict]:
    """Every batch of a `format("eos")` query's ledger, as `eos ledger show --json` prints it."""
    out = subprocess.run(
        [sys.executable, "-m", "eos.cli", "ledger", "show", "--checkpoint-location", str(checkpoint)]
        + ["--last", "0", "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [json.loads(line) for line in out.splitlines()]


def ledger_skipped(checkpoint) -> int:
    """Rows the ledger's attempts found already written (skipped), over every batch."""
    return sum(p["skipped"] for b in read_ledger(checkpoint) for a in b["attempts"] for p in a["partitions"])
