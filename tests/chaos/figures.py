"""A chaos run's figures and what they come to: Spark's task attempts from its event log, lines counted
in executor and broker logs, an aggregate run's check put in a pass-through run's terms, the table the
harness prints, and the failures that make it exit 1."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from eos import testing
from tests.support import aggregates

#: the pipelines on the JVM data path (a run of one fails where a batch was written on another path)
JVM_PIPELINES = ("jvm", "format-jvm")


def as_comparison(check: aggregates.AggregateCheck, keys: int, hanging=()) -> testing.Comparison:
    """An aggregation run's check in the figures of a pass-through run: keys without a count are
    `missing`, a (key, count) written twice `duplicated`, a count not above the key's last one
    `out_of_order`, a last count that is not the true one a `state_mismatch`; `expected` counts keys."""
    return testing.Comparison(
        expected=keys,
        received=check.received,
        missing=check.missing,
        duplicated=check.duplicated,
        out_of_order=check.not_increasing,
        unexpected=check.unexpected,
        hanging_partitions=tuple(hanging),
        state_mismatches=check.wrong,
    )


def task_attempts(events: Path) -> dict[str, int]:
    """Spark's own record of the task attempts (the event log): retried, speculative, failed, killed."""
    out: Counter = Counter()
    for path in sorted(events.rglob("events_*")):  # rolling logs: eventlog_v2_<app>/events_<n>_<app>
        with open(path, errors="replace") as f:
            for line in f:
                if '"SparkListenerTaskEnd"' not in line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # the last line of a SIGKILLed driver's log
                info, reason = event["Task Info"], event["Task End Reason"]["Reason"]
                out["attempts"] += 1
                out["speculative"] += bool(info.get("Speculative"))
                out["retries"] += info.get("Attempt", 0) > 0 and not info.get("Speculative")
                out["failed"] += reason not in ("Success", "TaskKilled")
                out["killed"] += reason == "TaskKilled"
    return dict(out)


def grep_count(root: Path, name: str, text: str) -> int:
    """Lines containing `text` in the files called `name` under `root` (executor stderr, broker logs)."""
    count = 0
    for path in root.rglob(name):
        with open(path, errors="replace") as f:
            count += sum(1 for line in f if text in line)
    return count


COLUMNS = (
    ("guarantee", 13),
    ("pipeline", 9),
    ("records", 8),
    ("kills", 6),
    ("broker_restarts", 8),
    ("missing", 8),
    ("duplicated", 10),
    ("out_of_order", 12),
    ("state_mismatches", 8),
    ("hanging_transactions", 8),
    ("commits_lost", 6),
    ("wall_seconds", 8),
)
HEADERS = {
    "broker_restarts": "restarts",
    "state_mismatches": "state",
    "hanging_transactions": "hanging",
    "commits_lost": "lost",
}


def table(runs: list[dict]) -> str:
    lines = [" ".join(f"{HEADERS.get(c, c):>{w}}" for c, w in COLUMNS)]
    for run in runs:
        lines.append(" ".join(f"{run.get(c, 0)!s:>{w}}" for c, w in COLUMNS))
    for run in runs:
        lines.append(f"{run['guarantee']}/{run['pipeline']} faults: {run['faults']}")
        lines.append(f"    spark tasks: {run['spark_tasks']}; live: {run['live']}")
    return "\n".join(lines)


def failures(runs: list[dict], min_kills: int, min_restarts: int) -> list[str]:
    """What makes the harness fail: an exactly_once run that is not, or too few faults."""
    problems = []
    for run in runs:
        label = f"{run['guarantee']}/{run['pipeline']}"
        if run["guarantee"] == "exactly_once":
            for key in ("missing", "duplicated", "out_of_order", "unexpected", "state_mismatches"):
                if run[key]:
                    problems.append(f"{label}: {key} = {run[key]}")
            if run["hanging_transactions"]:
                problems.append(f"{label}: hanging_transactions = {run['hanging_transactions']}")
            live = run["live"]
            for key in ("duplicated", "out_of_order", "unexpected", "state_mismatches"):
                if live[key]:
                    problems.append(f"{label}: live {key} = {live[key]}")
            if not live["caught_up"]:
                problems.append(f"{label}: the live consumer never read to the end ({live['received']})")
        elif run["missing"]:
            problems.append(f"{label}: missing = {run['missing']} (at_least_once must not lose records)")
        if run.get("commits_lost"):
            problems.append(
                f"{label}: eos stopped {run['commits_lost']} time(s) on a committed transaction the broker"
                " aborted on some partition (CommitLostError in the driver logs)"
            )
        if run["pipeline"] in JVM_PIPELINES and run.get("data_paths") != ["jvm"]:
            paths = run.get("data_paths")
            problems.append(f"{label}: batches written on the data paths {paths}, not the JVM's")
        if run["crash_points_not_fired"]:
            problems.append(f"{label}: crash points armed but never reached: {run['crash_points_not_fired']}")
        if not run["finished"]:
            problems.append(f"{label}: the last incarnation did not finish")
        if run["kills"] < min_kills:
            problems.append(f"{label}: {run['kills']} hard kills, fewer than {min_kills}")
        if run["broker_restarts"] < min_restarts:
            problems.append(f"{label}: {run['broker_restarts']} broker restarts, fewer than {min_restarts}")
    return problems
