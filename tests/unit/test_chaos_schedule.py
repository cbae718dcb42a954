"""The chaos harness's pure parts: the fault schedule and the verdict on a run's figures."""

from __future__ import annotations

from eos._crash import POINTS
from tests.chaos import faults, figures, runner


def test_schedule_arms_every_crash_point_and_every_external_fault():
    plan = faults.schedule(seed=1, incarnations=7)
    assert plan[-1].end == "finish" and not plan[-1].crash_points and not plan[-1].external
    armed = {p for inc in plan for p in inc.crash_points}
    assert armed == set(POINTS)
    assert {f for inc in plan for f in inc.external} == set(faults.EXTERNAL)
    assert sum(f == "broker_restart" for inc in plan for f in inc.external) >= 3
    assert {inc.end for inc in plan[:-1]} == {"driver_kill", "rerun_batch"}
    for inc in plan[:-1]:
        assert len(inc.delays) == len(inc.external) + 1
        # A task pauses itself early in the incarnation: the pause fault must be the first to act.
        assert not (set(inc.external[1:]) & {"zombie_pause", "executor_pause"})


def test_cluster_schedule_has_every_cluster_fault_and_no_single_broker_restart():
    plan = faults.schedule(seed=1, incarnations=8, cluster=True)
    external = [f for inc in plan for f in inc.external]
    assert "broker_restart" not in external
    assert set(external) == set(faults.CLUSTER_EXTERNAL)
    assert external.count("coordinator_kill") >= 2
    assert sum(f in faults.BROKER_FAULTS for f in external) >= 3
    for inc in plan[:-1]:
        assert not (set(inc.external[1:]) & {"zombie_pause", "executor_pause"})


def test_transaction_coordinator_placement_uses_javas_string_hash():
    # Values of java.lang.String.hashCode, as Kafka's TransactionStateManager uses them.
    assert runner.java_hash("") == 0
    assert runner.java_hash("hello") == 99162322
    assert runner.java_hash("polygenelubricants") == -(1 << 31)  # Integer.MIN_VALUE
    assert runner.java_abs(-(1 << 31)) == 0 and runner.java_abs(-7) == 7


def test_schedule_is_a_function_of_the_seed():
    assert faults.schedule(5, 4) == faults.schedule(5, 4)
    assert faults.schedule(5, 4) != faults.schedule(6, 4)


def run(**overrides):
    base = {
        "guarantee": "exactly_once",
        "pipeline": "stateful",
        "records": 100,
        "received": 100,
        "finished": True,
        "faults": {"driver_kill": 3},
        "kills": 25,
        "crash_points_not_fired": [],
        "broker_restarts": 3,
        "missing": 0,
        "duplicated": 0,
        "out_of_order": 0,
        "unexpected": 0,
        "state_mismatches": 0,
        "hanging_transactions": 0,
        "live": {
            "received": 100,
            "duplicated": 0,
            "out_of_order": 0,
            "unexpected": 0,
            "state_mismatches": 0,
            "caught_up": True,
        },
        "spark_tasks": {},
        "wall_seconds": 1.0,
    }
    return {**base, **overrides}


def test_a_clean_exactly_once_run_passes():
    assert figures.failures([run()], min_kills=20, min_restarts=3) == []


def test_every_exactly_once_defect_fails_the_run():
    for key in (
        "missing",
        "duplicated",
        "out_of_order",
        "unexpected",
        "state_mismatches",
        "hanging_transactions",
    ):
        problems = figures.failures([run(**{key: 1})], 20, 3)
        assert problems == [f"exactly_once/stateful: {key} = 1"]
    live = {**run()["live"], "duplicated": 2}
    assert figures.failures([run(live=live)], 20, 3) == ["exactly_once/stateful: live duplicated = 2"]
    behind = {**run()["live"], "caught_up": False, "received": 25}
    assert figures.failures([run(live=behind)], 20, 3) == [
        "exactly_once/stateful: the live consumer never read to the end (25)"
    ]


def test_at_least_once_may_duplicate_but_not_lose():
    alo = run(guarantee="at_least_once", duplicated=40, state_mismatches=80)
    assert figures.failures([alo], 20, 3) == []
    assert figures.failures([run(guarantee="at_least_once", missing=1)], 20, 3) != []


def test_too_few_faults_or_an_unfinished_run_fail():
    problems = figures.failures([run(kills=19, broker_restarts=2, finished=False)], 20, 3)
    assert len(problems) == 3
    problems = figures.failures([run(crash_points_not_fired=["during_restore"])], 20, 3)
    assert problems == ["exactly_once/stateful: crash points armed but never reached: ['during_restore']"]


def test_table_has_a_row_per_run():
    text = figures.table([run(), run(guarantee="at_least_once", duplicated=7)])
    rows = text.splitlines()
    assert "duplicated" in rows[0] and rows[2].split()[:2] == ["at_least_once", "stateful"]
    assert rows[2].split()[6] == "7"
