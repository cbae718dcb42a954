"""Which executor each input partition's task is placed on (eos._spark._affinity.assign, task_groups)."""

from __future__ import annotations

from collections import Counter

from eos._spark._affinity import Affinity, assign, task_groups

TPS = [("in", p) for p in range(8)]
E0, E1, E2 = "executor_h0_0", "executor_h1_1", "executor_h2_2"
ONE_EACH = {E0: 1, E1: 1, E2: 1}


def test_first_batch_spreads_the_partitions_evenly():
    chosen = assign(TPS, {}, ONE_EACH)
    assert sorted(Counter(chosen.values()).values()) == [2, 3, 3]


def test_partitions_stay_where_they_ran_while_their_executor_is_alive():
    last = {tp: [E0, E1, E2][tp[1] % 3] for tp in TPS}
    assert assign(TPS, last, {E2: 1, E0: 1, E1: 1}) == last


def test_a_lost_executors_partitions_go_to_the_others_and_no_other_partition_moves():
    last = {tp: [E0, E1, E2][tp[1] % 3] for tp in TPS}
    chosen = assign(TPS, last, {E0: 1, E2: 1})
    assert {tp: e for tp, e in chosen.items() if last[tp] != E1} == {
        tp: e for tp, e in last.items() if e != E1
    }
    assert sorted(Counter(chosen.values()).values()) == [4, 4]


def test_an_executor_that_joins_takes_its_share_and_only_that_moves():
    last = {tp: [E0, E2][tp[1] % 2] for tp in TPS}
    chosen = assign(TPS, last, ONE_EACH)
    moved = [tp for tp in TPS if chosen[tp] != last[tp]]
    assert len(moved) == 2 and {chosen[tp] for tp in moved} == {E1}
    assert sorted(Counter(chosen.values()).values()) == [2, 3, 3]


def test_partitions_spark_retried_on_one_executor_move_on_before_the_ones_it_held():
    # E1 died mid-batch; Spark retried its task (partitions 1, 4, 7) on E0, which now runs six.
    held = {tp: [E0, E1, E2][tp[1] % 3] for tp in TPS}
    affinity = Affinity()
    affinity.ran([{"topic": t, "partition": p, "executor": e} for (t, p), e in held.items()])
    affinity.ran([{"topic": "in", "partition": p, "executor": E0} for p in (1, 4, 7)])
    chosen = assign(TPS, affinity.last, {E0: 1, E2: 1}, affinity.arrived)
    assert all(chosen[tp] == e for tp, e in held.items() if e != E1)
    assert sorted(Counter(chosen.values()).values()) == [4, 4]


def test_a_task_without_an_executor_leaves_the_memory_alone():
    affinity = Affinity()
    affinity.ran([{"topic": "in", "partition": 0, "executor": E0}])
    affinity.ran([{"topic": "in", "partition": 0, "executor": None}])
    assert affinity.last == {("in", 0): E0}


def test_no_executor_alive_places_nothing():
    assert assign(TPS, {}, {}) == {}


def test_groups_keep_to_each_executors_share_of_the_cores():
    executors = [E0, E1, E0, E1, E0, E1, E0]
    assert task_groups(executors, {E0: 1, E1: 1}) == [(E0, [0, 2, 4, 6]), (E1, [1, 3, 5])]
    assert task_groups(executors, {E0: 2, E1: 2}) == [(E0, [0, 2]), (E0, [4, 6]), (E1, [1, 3]), (E1, [5])]
    assert task_groups(executors, {E0: 8, E1: 8}) == [
        (e, [i]) for e in (E0, E1) for i, x in enumerate(executors) if x == e
    ]


def test_a_batch_that_reads_a_few_partitions_moves_none(monkeypatch):
    # Balance is over every partition the query ran: a batch with 0, 1, 2, 3, 4 and 7 alone (E1 holds
    # three of them, E2 one) is no reason to move one.
    held = {tp: [E0, E1, E2][tp[1] % 3] for tp in TPS}
    affinity = Affinity()
    affinity.ran([{"topic": t, "partition": p, "executor": e} for (t, p), e in held.items()])
    asked = []

    class Jvm:
        sc = type("Sc", (), {"defaultParallelism": 3})()

        def executors(self):
            return ONE_EACH

    monkeypatch.setattr("eos._spark._affinity._Jvm.of", lambda session: Jvm())
    session = type("Session", (), {"sparkContext": Jvm.sc})()
    batch = [("in", p) for p in (0, 1, 2, 3, 4, 7)]
    placement = affinity.plan(session, batch, log=None)
    for executor, members in placement.groups:
        asked += [(batch[i], executor) for i in members]
    assert dict(asked) == {tp: held[tp] for tp in batch}


def test_executors_with_more_slots_take_more_partitions():
    chosen = assign(TPS, {}, {E0: 1, E1: 3})
    assert Counter(chosen.values()) == {E0: 2, E1: 6}
    groups = task_groups([chosen[tp] for tp in TPS], {E0: 1, E1: 3})
    assert Counter(e for e, _ in groups) == {E0: 1, E1: 3}  # one wave: no executor over its slots


def test_a_batch_without_partitions_is_not_placed():
    # (a batch whose every range is empty: Spark plans no partition, and coalesce(0) is refused)
    assert Affinity().plan(object(), [], log=None) is None
