"""The short version of `make chaos`: the same harness (standalone cluster, its own broker, real kills and
restarts) on a smaller input with fewer faults, exactly_once. `long`: `make chaos` runs it after the
harness's own long run (make test's budget is 15 minutes; what it holds of the fault list is in the
README's failure table)."""

from __future__ import annotations

import json

import pytest

from tests.chaos import figures, harness


@pytest.mark.long
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
    print(figures.table([run]))
    assert code == 0, json.loads(report.read_text())["problems"]
    for key in ("missing", "duplicated", "out_of_order", "state_mismatches", "hanging_transactions"):
        assert run[key] == 0, (key, run)
    assert run["received"] == run["records"] == 6000
    assert run["faults"].get("crash_before_produce") and run["faults"].get("crash_after_produce")
