"""What a stateful query restores, batch after batch, and what its state holds when its guarantee is
switched (real broker, real Spark)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import finish, group_offsets, run_query, seed, start_pipeline

import eos
from eos import testing
from eos._names import INPUT_OFFSET_HEADER
from examples.pipeline import count_per_key
from tests.support.counting import changelog_mismatches
from tests.support.summaries import read_summaries


@pytest.mark.parametrize("guarantee", [pytest.param("exactly_once", marks=pytest.mark.long), "at_least_once"])
def test_a_stateful_query_without_faults_restores_nothing_after_its_first_batch(
    spark, bootstrap, names, tmp_path, guarantee
):
    """4 partitions x 400 records, 200 a batch (8 batches), no fault: each store rolls forward from its
    checkpoint, reading nothing. (Before: at_least_once restored every store whole at every batch, 0,
    200, 400, ... 1,400 changelog records, its checkpoint after a commit being taken for a restore that
    skipped input from another offset and was cut short.)"""
    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, 4)
    testing.create_topic(bootstrap, output, 4)
    sent = testing.produce_sequence(bootstrap, source, 4, 400)
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=output,
        processing_guarantee=guarantee,
        state_dir=str(tmp_path / "state"),
    )
    sink = eos.sink(config, count_per_key, stores={"counts": "json"})
    run_query(spark, config, [source], tmp_path / "ckpt", sink=sink, maxOffsetsPerTrigger=200)
    restored = [summary.restored for summary in sink.history]
    assert len(restored) == 8 and restored == [0] * 8, restored
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    result = testing.compare(
        testing.flatten(sent), records, hanging, running_counts=testing.expected_running_counts(sent)
    )
    assert result.exactly_once and result.state_mismatches == 0, result


def _wait_for(path: Path, proc, timeout: float = 180) -> None:
    """Until `path` exists (a crash point's marker): the driver must still be running."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.running(), f"the driver ended before {path.name}:\n{proc.log_tail()}"
        assert time.monotonic() < deadline, f"{path.name} did not come within {timeout}s"
        time.sleep(0.05)


def _changelog_inputs(bootstrap: str, changelog: str) -> dict[int, list[int]]:
    """The input offsets the changelog's committed records carry, per partition."""
    records, _ = testing.read_topic(bootstrap, changelog)
    out: dict[int, list[int]] = {}
    for r in records:
        out.setdefault(r.partition, []).append(int(dict(r.headers)[INPUT_OFFSET_HEADER]))
    return out


# ~45 s each: the explicit switches in make chaos (make test has the rule in
# tests/unit/test_recovery_decisions.py, which fails on the code before too); the upgrade, an
# at_least_once app restarted on a release whose default is exactly_once (`after` None: no guarantee
# set), in make test
@pytest.mark.parametrize(
    ("before", "after", "point"),
    [
        pytest.param("at_least_once", "exactly_once", "after_produce", marks=pytest.mark.long),
        pytest.param("exactly_once", "at_least_once", "after_send_offsets", marks=pytest.mark.long),
        pytest.param("at_least_once", None, "after_produce", id="upgrade-to-the-default"),
    ],
)
def test_a_guarantee_switched_after_a_kill_mid_batch_keeps_the_state_exact(
    bootstrap, names, tmp_path, before, after, point
):
    """A running count per key (2 partitions x 600 records, 400 a batch, transactions of 100). Under
    `before` a task stops at `point` (at_least_once: its outputs and changelog records written, its
    offset not committed; exactly_once: its offsets in the open transaction) and the driver is SIGKILLed
    there; the query is restarted at once under `after` on the same checkpoint and state, runs to the
    end, then, stopped cleanly, under `before` again over 600 more records each. Every output's count
    and the changelog's final counts equal a recomputation from the input (outputs written twice only by
    at_least_once). (Before: the exactly_once restore applied the at_least_once changelog records of
    input past the committed offset, and that input was counted again, for good.)"""
    source, output, sent = seed(bootstrap, names, 600, 2)
    app_id, once, summaries = names("app"), tmp_path / "once", tmp_path / "summaries.jsonl"
    once.mkdir()
    env = {
        "EOS_STATE_DIR": str(tmp_path / "state"),
        "EOS_TRANSACTION_TIMEOUT_MS": "10000",  # at_least_once cannot fence the killed transaction
        "EOS_COMMIT_INTERVAL_MS": "5000",
    }
    flags = {"max_offsets": 400, "commit_every": 100, "stateful": True}
    changelog = f"{app_id}-{source}-counts-changelog"

    def run(guarantee: str | None, **more_env: str):
        chosen = {} if guarantee is None else {"EOS_PROCESSING_GUARANTEE": guarantee}
        return start_pipeline(
            bootstrap,
            app_id,
            source,
            output,
            tmp_path / "ckpt",
            summaries,
            {**env, **chosen, **more_env},
            **flags,
        )

    def guarantees() -> list[str]:
        return [summary["guarantee"] for summary in read_summaries(summaries)]

    proc = run(before, EOS_PAUSE_AT=point, EOS_CRASH_ONCE_DIR=str(once))
    _wait_for(once / f"paused-{point}", proc)
    if before == "at_least_once":
        # The fault hit its target: a changelog record of input at or past the committed offset.
        group = eos.Config(bootstrap_servers=bootstrap, app_id=app_id, output_topic=output)
        committed = {p: o or 0 for p, o in group_offsets(group, source, 2).items()}
        past = {
            p: [o for o in offsets if o >= committed[p]]
            for p, offsets in _changelog_inputs(bootstrap, changelog).items()
        }
        assert any(past.values()), (committed, past)
    assert proc.kill(), "the driver ended before the kill"
    ran = len(guarantees())
    finish(run(after))
    # the restart ran `after`: for the upgrade, the default is exactly_once
    assert set(guarantees()[ran:]) == {after or "exactly_once"}, guarantees()
    more = testing.produce_sequence(bootstrap, source, 2, 600, start=600)
    for partition, values in more.items():
        sent[partition].extend(values)
    finish(run(before))

    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    counts = testing.expected_running_counts(sent)
    wrong = [
        r.value
        for r in records
        if counts.get(r.value.rpartition(b"#")[0]) != int(r.value.rpartition(b"#")[2])
    ]
    written = {r.value.rpartition(b"#")[0] for r in records}
    assert (hanging, wrong[:5], len(wrong)) == ([], [], 0), "an output counted an input twice"
    assert written == set(testing.flatten(sent)), "an input never written"
    assert changelog_mismatches(bootstrap, changelog, sent) == 0
