"""No `eos` command writes a committed part or record again (issue 39, points 5 and 6), against the real
broker, each command run as a subprocess:

- `eos offsets reset` leaves the progress topic of input_mode "any" (`<app>-eos-parts`) alone unless it
  is named, and named it refuses unless told `--drop-progress`: a reset of it between a mid-batch crash
  and the restart made the re-run write every committed part again.
- `eos dlq replay` fences an earlier run of its group before it reads where the group stands: a run
  killed during its commit, whose commit completes after the restart read the group's offsets, made the
  restart copy the chunk again.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter

import psutil
import pytest
from conftest import line_count, seed, start_pipeline
from test_cli import cli, ok, one_line_error

from eos import _names, testing
from eos._core import _deadletter, _parts
from eos._kafka import _offsets, _topics
from eos.cli import EXIT_OK, EXIT_REFUSED, EXIT_USAGE
from eos.errors import ForeignOffsetError
from tests.support.aggregates import check_running_counts, key_counts, read_output

# -- offsets reset and the progress topic ----------------------------------------------------------

#: a killed part's open transaction ends after this (the reset is refused while it is open)
SHORT_TRANSACTIONS = {"EOS_TRANSACTION_TIMEOUT_MS": "10000", "EOS_COMMIT_INTERVAL_MS": "5000"}


def parts_shown(bootstrap: str, app_id: str) -> list[dict]:
    return json.loads(ok(cli(bootstrap, "parts", "show", "--app", app_id, "--json")))["parts"]


def reset_when_not_running(bootstrap: str, *args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    """`eos offsets reset ARGS`, asked again while it is refused because a killed part's transaction is
    still open (it ends after SHORT_TRANSACTIONS' timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        result = cli(bootstrap, "offsets", "reset", *args)
        if result.returncode != EXIT_REFUSED or time.monotonic() > deadline:
            return result
        time.sleep(2)


# `make chaos` (long-test): 22 s of make test's 15 minutes; the refusals it relies on run in make test below.
@pytest.mark.slow
@pytest.mark.long
def test_offsets_reset_between_a_mid_batch_crash_and_the_restart_writes_no_part_again(
    bootstrap, names, tmp_path
):
    """input_mode "any" (groupBy count, 4 parts): the driver's process group SIGKILLed while one part of
    batch 0 is stopped before producing and at least one other has committed; then `eos offsets reset
    --app A --to earliest --execute` (no --topic), then the restart on the same checkpoint. Read
    read_committed, no (key, count) may come twice: the reset must have left the parts' progress alone,
    so the re-run skips the committed parts."""
    source, output, sent = seed(bootstrap, names, 100)
    app_id, checkpoint, summaries = names("app"), tmp_path / "ckpt", tmp_path / "summaries.jsonl"
    commits, once = tmp_path / "commits.jsonl", tmp_path / "once"
    once.mkdir()
    env = {
        "EOS_PROCESSING_GUARANTEE": "exactly_once",
        "EOS_PAUSE_AT": "before_produce",
        "EOS_CRASH_ONCE_DIR": str(once),
        **SHORT_TRANSACTIONS,
    }
    flags = {"aggregate": "count", "commits": commits}
    proc = start_pipeline(bootstrap, app_id, source, output, checkpoint, summaries, env=env, **flags)
    paused = once / "paused-before_produce"
    deadline = time.monotonic() + 180
    while not (paused.exists() and paused.read_text().strip() and line_count(commits) >= 1):
        assert proc.running(), proc.log_tail()
        assert time.monotonic() < deadline, "no part paused and another committed within 180 s"
        time.sleep(0.05)
    assert proc.kill(), "the driver ended before the kill"
    before = parts_shown(bootstrap, app_id)
    committed = [p for p in before if p["batch"] == 0]
    assert committed and len(committed) < len(before), f"not a mid-batch crash: {before}"

    reset = reset_when_not_running(bootstrap, "--app", app_id, "--to", "earliest", "--execute")
    assert reset.returncode == EXIT_OK, reset.stderr
    print(reset.stdout)
    after_reset = parts_shown(bootstrap, app_id)

    proc = start_pipeline(bootstrap, app_id, source, output, checkpoint, summaries, env=env, **flags)
    assert proc.wait() == 0, proc.log_tail()
    records = read_output(bootstrap, output)
    pairs = Counter((r.key, int(r.value)) for r in records)
    duplicated = {pair: n for pair, n in pairs.items() if n > 1}
    result = check_running_counts(records, key_counts(sent))
    print(f"{len(committed)} part(s) committed before the kill; after reset and restart: {result}")
    assert not duplicated, f"{len(duplicated)} (key, count) pairs written twice, e.g. {list(duplicated)[:3]}"
    assert result.exact, result
    assert after_reset == before, "the reset changed the parts' progress"


@pytest.fixture
def progress_app(bootstrap, names):
    """An app with a committed input offset (in/0 at 5) and the progress of two parts of input_mode
    "any" (part 0 at batch 3, part 1 at batch 2), committed as its parts commit them."""
    import eos

    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, 1)
    testing.produce_sequence(bootstrap, source, 1, 10)
    config = eos.Config(
        bootstrap_servers=bootstrap, app_id=names("app"), output_topic=output, input_mode="any", parts=2
    )
    _topics.ensure_parts_topic(config)
    topic = _names.parts_topic(config.app_id)
    _offsets.commit(config, source, 0, 5)
    for part, batch in ((0, 3), (1, 2)):  # as `eos._core._parts.Progress.metadata` writes it
        progress = f";mode=any;batch={batch};part={part};parts=2;rows={7 + part};digest={'0b' * 16}"
        _offsets.commit(config, topic, part, batch + 1, metadata=_offsets.stamp(config) + progress)
    return config, source, topic


def progress_batches(config) -> dict[int, int | None]:
    return {p: None if g is None else g.batch_id for p, g in _parts.read_progress(config, range(2)).items()}


def test_offsets_reset_leaves_the_progress_topic_alone_unless_named_and_told(bootstrap, progress_app):
    config, source, topic = progress_app
    app_id = config.app_id
    kept = {0: 3, 1: 2}
    assert progress_batches(config) == kept
    reset = ("offsets", "reset", "--app", app_id)

    # no --topic: every input topic the group committed, not the progress topic
    done = ok(cli(bootstrap, *reset, "--to", "earliest", "--execute"))
    rows = [line.split() for line in done.splitlines()]
    assert [source, "0", "5", "->", "0"] in rows
    assert not [row for row in rows if row[0] == topic], done
    assert f"{topic}: the progress of input_mode 'any' (2 part(s)) left as it is" in done, done
    assert progress_batches(config) == kept
    shifted = json.loads(ok(cli(bootstrap, *reset, "--shift", "0", "--json", "--execute")))
    assert [p["topic"] for p in shifted["partitions"]] == [source]
    assert [(s["topic"], s["partition"]) for s in shifted["skipped"]] == [(topic, 0), (topic, 1)]
    assert progress_batches(config) == kept

    # named without --drop-progress: refused, a dry run too, --to JSON too
    for args in (
        ["--to", "earliest", "--topic", topic, "--execute"],
        ["--shift", "0", "--topic", topic],
        ["--to", json.dumps({topic: {"0": -2}}), "--execute"],
    ):
        refused = cli(bootstrap, *reset, *args)
        assert refused.returncode == EXIT_USAGE, refused
        error = one_line_error(refused)
        assert f"{topic!r} is the progress topic of input_mode 'any'" in error and "--drop-progress" in error
    assert progress_batches(config) == kept
    # --drop-progress applies to the progress topic only
    stray = cli(bootstrap, *reset, "--to", "earliest", "--topic", source, "--drop-progress")
    assert stray.returncode == EXIT_USAGE and "--drop-progress" in one_line_error(stray)

    # named and told: a dry run says what it would do, --execute does it and says so
    dry = ok(cli(bootstrap, *reset, "--to", "earliest", "--topic", topic, "--drop-progress"))
    assert "would drop the progress of 2 part(s)" in dry and "dry run: nothing changed" in dry, dry
    assert progress_batches(config) == kept
    dropped = ok(cli(bootstrap, *reset, "--to", "earliest", "--topic", topic, "--drop-progress", "--execute"))
    assert "dropped the progress of 2 part(s)" in dropped and "written again in full" in dropped, dropped
    assert progress_batches(config) == {0: None, 1: None}


def test_the_advice_of_a_foreign_progress_offset_drops_that_parts_progress_only(bootstrap, progress_app):
    """kafka-consumer-groups --reset-offsets (no eos stamp) on the progress topic: the part's progress is
    refused as foreign, and its message advises dropping that one part's progress with
    `--drop-progress`; followed, part 0 has no progress (it writes its batch again) and part 1 keeps its
    own. (Before, it advised `--topic <progress topic> --shift 0`, which the CLI now refuses.)"""
    from confluent_kafka import Consumer, TopicPartition

    config, _, topic = progress_app
    kept = _parts.read_progress(config, [1])[1]
    group = Consumer({"bootstrap.servers": config.bootstrap_servers, "group.id": config.app_id})
    group.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)
    group.close()
    with pytest.raises(ForeignOffsetError) as foreign:
        _parts.read_progress(config, [0])
    advice = re.search(r"`eos (offsets reset [^`]+)`", str(foreign.value)).group(1)
    assert "--drop-progress" in advice and "--topic" not in advice, advice
    followed = cli(bootstrap, *shlex.split(advice))
    assert followed.returncode == 0, followed
    assert _parts.read_progress(config, [0])[0] is None
    assert _parts.read_progress(config, [1])[1] == kept


# -- dlq replay: fence, then read where the group stands -------------------------------------------

DEAD_LETTERS = 1_500  # two replay chunks (eos.cli._dlq.REPLAY_CHUNK)


def _dead_letters(bootstrap: str, names) -> tuple[str, str, list[bytes]]:
    """A dead-letter topic of 2 partitions holding DEAD_LETTERS dead letters (eos's error headers and an
    input header), and an empty replay target."""
    dlq, target = names("dlq"), names("retry")
    testing.create_topic(bootstrap, dlq, 2)
    testing.create_topic(bootstrap, target, 2)
    from eos._kafka._writes import PlainProducer

    producer = PlainProducer(bootstrap, {"enable.idempotence": True, "linger.ms": 20})
    values = [b"dead-%d" % i for i in range(DEAD_LETTERS)]
    for i, value in enumerate(values):
        headers = [
            (_deadletter.KIND, b"ProcessError"),
            (_deadletter.EXCEPTION, b"ValueError"),
            ("trace", b"t"),
        ]
        producer.produce(dlq, value, b"k%d" % (i % 7), partition=i % 2, headers=headers)
    assert producer.flush(30) == 0
    return dlq, target, values


def _copies(bootstrap: str, target: str) -> Counter:
    records, hanging = testing.read_topic(bootstrap, target, marker=testing.write_markers(bootstrap, target))
    assert not hanging, f"partitions {hanging} of {target} end in an open transaction"
    return Counter(r.value for r in records)


def _replay(bootstrap: str, dlq: str, target: str, env: dict[str, str]) -> subprocess.Popen:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EOS_") or k == "EOS_CACHE"}
    argv = [sys.executable, "-m", "eos.cli", "--bootstrap-servers", bootstrap, "--timeout", "30"]
    argv += ["dlq", "replay", "--topic", dlq, "--to", target, "--execute"]
    return subprocess.Popen(
        argv, env={**clean, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _wait_stopped(proc: subprocess.Popen, marker, timeout: float = 60) -> None:
    """Until `proc` has stopped itself (SIGSTOP) at the pause point whose marker file is `marker`."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the replay ended (exit {proc.returncode}) before its pause point:\n{out}{err}")
        if marker.exists() and psutil.Process(proc.pid).status() == psutil.STATUS_STOPPED:
            return
        assert time.monotonic() < deadline, f"no pause at {marker.name} within {timeout}s"
        time.sleep(0.05)


def _ended(proc: subprocess.Popen) -> tuple[int, str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out + err


def test_dlq_replay_sigkilled_between_send_offsets_and_commit_copies_each_once(bootstrap, names, tmp_path):
    """The first chunk's copies and offsets sent, the replay SIGKILLed before its commit: the restart
    aborts that transaction (it fences the killed run) and copies every dead letter once."""
    dlq, target, values = _dead_letters(bootstrap, names)
    once = tmp_path / "once"
    once.mkdir()
    crash = {"EOS_CRASH_AT": "replay_after_send_offsets", "EOS_CRASH_ONCE_DIR": str(once)}
    code, output = _ended(_replay(bootstrap, dlq, target, crash))
    assert code == -signal.SIGKILL, output
    code, output = _ended(_replay(bootstrap, dlq, target, {}))
    assert code == EXIT_OK and f"replayed {DEAD_LETTERS} dead letters" in output, output
    copies = _copies(bootstrap, target)
    assert copies == Counter(values), f"{sum(copies.values())} copies of {len(values)} dead letters"


@pytest.mark.parametrize("zombie_commits", ["before_the_restart_fences", "after_the_restart_fenced"])
def test_dlq_replay_killed_during_its_commit_and_restarted_copies_each_once(
    bootstrap, names, tmp_path, zombie_commits
):
    """A replay stopped between its first chunk's send_offsets and its commit, and a restart of it. The
    stopped run then finishes its commit (the request was on its way when it was killed) and is SIGKILLed
    at once; `before_the_restart_fences`: while the restart has started and not yet fenced it (read-only
    so far), `after_the_restart_fenced`: after the restart ran. Either way each dead letter is in the
    target once: the restart reads the group's offsets only once it has fenced every earlier run."""
    dlq, target, values = _dead_letters(bootstrap, names)
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir()
    second_dir.mkdir()
    first = _replay(
        bootstrap,
        dlq,
        target,
        {
            "EOS_PAUSE_AT": "replay_after_send_offsets",
            "EOS_CRASH_AT": "replay_after_commit",
            "EOS_CRASH_ONCE_DIR": str(first_dir),
        },
    )
    _wait_stopped(first, first_dir / "paused-replay_after_send_offsets")
    if zombie_commits == "before_the_restart_fences":
        second = _replay(
            bootstrap,
            dlq,
            target,
            {"EOS_PAUSE_AT": "replay_before_fence", "EOS_CRASH_ONCE_DIR": str(second_dir)},
        )
        _wait_stopped(second, second_dir / "paused-replay_before_fence")
        os.kill(first.pid, signal.SIGCONT)
        code, output = _ended(first)
        assert code == -signal.SIGKILL, f"the first run did not commit its chunk and die: {output}"
        os.kill(second.pid, signal.SIGCONT)
        code, restart = _ended(second)
        assert code == EXIT_OK, restart
        restart_copied = DEAD_LETTERS - 1_000  # the first chunk is the first run's
    else:
        code, restart = _ended(_replay(bootstrap, dlq, target, {}))
        assert code == EXIT_OK, restart
        restart_copied = DEAD_LETTERS
        os.kill(first.pid, signal.SIGCONT)
        code, output = _ended(first)
        assert code != EXIT_OK and code != -signal.SIGKILL, f"the fenced run committed: {output}"
    copies = _copies(bootstrap, target)
    twice = sum(1 for n in copies.values() if n > 1)
    print(f"{zombie_commits}: {sum(copies.values())} copies of {len(values)} dead letters, {twice} twice")
    assert copies == Counter(values), f"{sum(copies.values())} copies of {len(values)}, {twice} copied twice"
    assert f"replayed {restart_copied} dead letters" in restart, restart
