"""The short version of `make chaos` that CI runs: the same harness (standalone cluster, its own broker,
real kills and restarts) on a smaller input with fewer faults, in both guarantees."""

from __future__ import annotations

import json

import pytest

from tests.chaos import harness


@pytest.mark.timeout(1200)
def test_short_chaos_run_is_exactly_once_and_at_least_once_shows_duplicates(tmp_path):
    report = tmp_path / "chaos.json"
    code = harness.main(
        [
            *("--records", "6000", "--incarnations", "2", "--externals", "2", "--max-offsets", "500"),
            *("--pipelines", "stateful", "--guarantees", "exactly_once,at_least_once"),
            *("--min-kills", "4", "--min-broker-restarts", "1"),
            *("--home", str(tmp_path / "home"), "--report", str(report)),
        ]
    )
    runs = {r["guarantee"]: r for r in json.loads(report.read_text())["runs"]}
    print(harness.table(list(runs.values())))
    assert code == 0, json.loads(report.read_text())["problems"]
    eos_run, alo_run = runs["exactly_once"], runs["at_least_once"]
    for key in ("missing", "duplicated", "out_of_order", "state_mismatches", "hanging_transactions"):
        assert eos_run[key] == 0, (key, eos_run)
    assert eos_run["received"] == eos_run["records"] == 6000
    assert eos_run["faults"].get("crash_before_produce") and eos_run["faults"].get("crash_after_produce")
    # The same schedule without transactions: the kill after produce re-sends outputs, and the checker
    # says so (it can fail); nothing is lost.
    assert alo_run["missing"] == 0
    assert alo_run["duplicated"] > 0, alo_run
