"""The short version of `make chaos` that `make test` runs: the same harness (standalone cluster, its own
broker, real kills and restarts) on a smaller input with fewer faults, exactly_once. (`make chaos` runs
at_least_once under the same schedule too; `test_state.py` shows its duplicates in `make test`.)"""

from __future__ import annotations

import json

import pytest

from tests.chaos import harness


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_short_chaos_run_is_exactly_once(tmp_path):
    report = tmp_path / "chaos.json"
    code = harness.main(
        [
            *("--records", "6000", "--incarnations", "2", "--externals", "2", "--max-offsets", "500"),
            *("--pipelines", "stateful", "--guarantees", "exactly_once"),
            *("--min-kills", "4", "--min-broker-restarts", "1"),
            *("--home", str(tmp_path / "home"), "--report", str(report)),
        ]
    )
    (run,) = json.loads(report.read_text())["runs"]
    print(harness.table([run]))
    assert code == 0, json.loads(report.read_text())["problems"]
    for key in ("missing", "duplicated", "out_of_order", "state_mismatches", "hanging_transactions"):
        assert run[key] == 0, (key, run)
    assert run["received"] == run["records"] == 6000
    assert run["faults"].get("crash_before_produce") and run["faults"].get("crash_after_produce")
