"""eos.testing.compare, the exactly-once checker, on synthetic output histories."""

from __future__ import annotations

import pytest

from eos.testing import HistoryChecker, OutputRecord, compare, flatten, parse_value, seq_value

IN = "orders-in"


def inputs(partitions: int = 2, per_partition: int = 10) -> dict[int, list[bytes]]:
    return {p: [seq_value(IN, p, s) for s in range(per_partition)] for p in range(partitions)}


def history(*partitions: list[bytes]) -> list[OutputRecord]:
    """Output partition i holds the values of partitions[i], at offsets 0, 1, ..."""
    return [
        OutputRecord(partition=p, offset=o, key=None, value=v, headers=())
        for p, values in enumerate(partitions)
        for o, v in enumerate(values)
    ]


def counts(c) -> dict[str, int]:
    return {k: getattr(c, k) for k in ("missing", "duplicated", "out_of_order", "unexpected")}


ZERO = {"missing": 0, "duplicated": 0, "out_of_order": 0, "unexpected": 0}


def test_seq_value_round_trip():
    assert parse_value(seq_value("a|b.c", 3, 17)) == ("a|b.c", 3, 17)
    assert seq_value(IN, 0, 1) != seq_value(IN, 1, 0)


def test_flatten():
    sent = inputs(2, 3)
    assert list(flatten(sent)) == sent[0] + sent[1]


def test_perfect_history():
    sent = inputs()
    result = compare(flatten(sent), history(sent[0], sent[1]))
    assert counts(result) == ZERO
    assert result.expected == result.received == 20
    assert result.hanging_partitions == ()
    assert result.exactly_once


def test_interleaved_input_partitions_in_one_output_partition_are_in_order():
    sent = inputs()
    interleaved = [v for pair in zip(sent[0], sent[1], strict=True) for v in pair]
    result = compare(flatten(sent), history(interleaved))
    assert counts(result) == ZERO
    assert result.exactly_once


def test_offsets_not_list_order_decide_the_order():
    sent = inputs(1, 5)
    records = list(reversed(history(sent[0])))  # same offsets, listed backwards
    assert compare(flatten(sent), records).exactly_once


@pytest.mark.parametrize("dups", [[3], [0, 9], [4, 4, 4]])
def test_duplicates_counted_exactly(dups):
    sent = inputs()
    out = []
    for v in sent[0]:
        out.append(v)
        out.extend([v] * dups.count(parse_value(v)[2]))  # right after the original: order kept
    result = compare(flatten(sent), history(out, sent[1]))
    assert counts(result) == {**ZERO, "duplicated": len(dups)}
    assert result.received == 20 + len(dups)
    assert not result.exactly_once


@pytest.mark.parametrize("lost", [[0], [2, 5, 9]])
def test_losses_counted_exactly(lost):
    sent = inputs()
    out0 = [v for v in sent[0] if parse_value(v)[2] not in lost]
    result = compare(flatten(sent), history(out0, sent[1]))
    assert counts(result) == {**ZERO, "missing": len(lost)}
    assert not result.exactly_once


def test_loss_and_duplicate_of_different_records_both_counted():
    sent = inputs()
    out1 = [v for v in sent[1] if v != sent[1][4]] + [sent[1][9]]
    result = compare(flatten(sent), history(sent[0], out1))
    assert result.missing == 1
    assert result.duplicated == 1


def test_swap_within_one_output_partition_is_out_of_order():
    sent = inputs()
    out0 = list(sent[0])
    out0[4], out0[5] = out0[5], out0[4]
    result = compare(flatten(sent), history(out0, sent[1]))
    assert counts(result) == {**ZERO, "out_of_order": 1}
    assert not result.exactly_once


def test_one_input_partition_spread_over_two_output_partitions_in_order():
    sent = inputs(1, 10)
    evens, odds = sent[0][0::2], sent[0][1::2]
    # the odd ones land in output partition 0, the even ones in output partition 1
    result = compare(flatten(sent), history(odds, evens))
    assert counts(result) == ZERO
    assert result.exactly_once


def test_spread_over_two_output_partitions_but_reordered_in_one():
    sent = inputs(1, 10)
    evens, odds = sent[0][0::2], sent[0][1::2]
    result = compare(flatten(sent), history(odds, list(reversed(evens))))
    assert result.out_of_order == len(evens) - 1
    assert result.missing == result.duplicated == 0


@pytest.mark.parametrize(
    "extra",
    [[seq_value("other-topic", 0, 1)], [seq_value(IN, 0, 99), b"garbage", None]],
    ids=["one", "three"],
)
def test_unexpected_values_counted(extra):
    sent = inputs()
    result = compare(flatten(sent), history(sent[0] + extra, sent[1]))
    assert counts(result) == {**ZERO, "unexpected": len(extra)}
    assert not result.exactly_once


def test_hanging_partitions_fail_the_check():
    sent = inputs()
    result = compare(flatten(sent), history(sent[0], sent[1]), hanging_partitions=[1])
    assert counts(result) == ZERO
    assert result.hanging_partitions == (1,)
    assert not result.exactly_once


def test_empty_output_of_nonempty_input_is_all_missing():
    sent = inputs(2, 3)
    result = compare(flatten(sent), [])
    assert counts(result) == {**ZERO, "missing": 6}
    assert result.received == 0


# -- the incremental checker the chaos harness runs while faults are injected ----------------------------


def test_history_checker_fed_live_matches_compare_on_the_whole_history():
    sent = inputs(2, 10)
    out = history(sent[0][:5] + sent[0][3:], sent[1][::-1])  # 3 duplicates; partition 1 reversed
    checker = HistoryChecker(flatten(sent))
    for record in out:
        checker.add(record)
    live = checker.result()
    assert live == compare(flatten(sent), out)
    assert (live.duplicated, live.out_of_order, live.missing) == (2, 9, 0)
    assert not live.exactly_once


def test_history_checker_counts_running_count_mismatches():
    sent = inputs(1, 4)
    expected_counts = {v: i + 1 for i, v in enumerate(sent[0])}
    good = [v + b"#%d" % (i + 1) for i, v in enumerate(sent[0])]
    wrong = good[:2] + [sent[0][2] + b"#7"] + good[3:]
    assert compare(flatten(sent), history(good), running_counts=expected_counts).exactly_once
    result = compare(flatten(sent), history(wrong), running_counts=expected_counts)
    assert result.state_mismatches == 1 and result.missing == 0
    assert not result.exactly_once


def test_history_checker_sees_a_replayed_duplicate_with_a_doubled_count_as_both():
    """at_least_once after a crash: the replayed record is emitted again with its count advanced."""
    sent = inputs(1, 3)
    expected_counts = {v: i + 1 for i, v in enumerate(sent[0])}
    out = [sent[0][0] + b"#1", sent[0][1] + b"#2", sent[0][1] + b"#3", sent[0][2] + b"#4"]
    result = compare(flatten(sent), history(out), running_counts=expected_counts)
    assert (result.duplicated, result.state_mismatches, result.missing) == (1, 2, 0)


def test_running_counts_check_names_each_way_an_aggregation_can_be_wrong():
    from tests.support.aggregates import RunningCounts, check_running_counts

    truth = {b"a": 3, b"b": 2, b"c": 1}

    def rec(i, key, count):
        return OutputRecord(partition=0, offset=i, key=key, value=b"%d" % count, headers=())

    exact = [rec(0, b"a", 1), rec(1, b"b", 2), rec(2, b"a", 3), rec(3, b"c", 1)]
    assert check_running_counts(exact, truth).exact
    twice = check_running_counts([*exact, rec(4, b"a", 3)], truth)
    assert (twice.duplicated, twice.not_increasing) == (1, 0)
    back = check_running_counts([*exact, rec(4, b"a", 2)], truth)  # a count going back is an old version
    assert (back.not_increasing, back.wrong) == (1, 1)
    short = check_running_counts(exact[:2], truth)
    assert (short.wrong, short.missing) == (1, 1)  # a's last count is 1, not 3; c never came
    live = RunningCounts(truth)
    for r in exact[:2]:
        live.add(r)
    assert live.result(final=False).exact  # while the output is still being written: not yet judged
