"""The broker behaviour `tests/chaos/coordinator_repro.py` reproduces, with eos as the client: an eos
partition task (`tests/integration/partition_task_app.py`, the executor-side protocol in a process of
its own) is paused right after its offsets joined its transaction (`EOS_PAUSE_AT=after_send_offsets`);
the coordinator's followers are SIGSTOPped, the task resumed (it calls commit_transaction), the
coordinator SIGKILLed 0.5 s later with the task, the followers resumed and the coordinator restarted
inside broker.session.timeout.ms. The output partitions are led by C, F1, F2, C (replication factor 1,
so C's own have no other leader for its markers to go to).

Then the same task runs again from a fresh process. Where the broker committed the transaction on some
partitions (and the offset) and aborted it on others, eos must stop with CommitLostError before
skipping anything, `eos repair --execute` must copy the aborted records back, and the task run once more
must finish with every input record's output read_committed once; where the broker did not split it,
the task must finish with every input record written once.

    .venv/bin/python -m tests.chaos.coordinator_eos [--tries 3] [--seed S] [--session-timeout-ms 15000]

Prints a VERDICT line per try and exits 1 when eos skipped input whose outputs were lost (or wrote any
twice), else 0.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from eos import _names
from tests.chaos.coordinator_repro import (
    OFFSETS_PARTITIONS,
    TXN_PARTITIONS,
    count,
    describe,
    log,
    partition_for,
    wait_for,
)
from tests.support.localbroker import LocalCluster

APP = Path(__file__).resolve().parents[1] / "integration" / "partition_task_app.py"
RECORDS = 40
KEYS = 10


def _task(bootstrap, app_id, source, output, state_dir, env) -> subprocess.Popen:
    args = [sys.executable, str(APP), bootstrap, app_id, source, output, "0", str(state_dir), "-1", "unused"]
    return subprocess.Popen(
        args,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _written(bootstrap: str, output: str) -> Counter:
    """How many times each input value (`v<i>`) is in the output, read_committed to its end."""
    from eos import testing

    records, _ = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    return Counter(r.value.split(b"#")[0].decode() for r in records)


def experiment(args, attempt: int) -> tuple[str, bool]:
    """One try; returns its verdict and whether eos did what it must."""
    rng = random.Random(args.seed * 1000 + attempt)
    tag = f"{args.seed}-{attempt}-{rng.randrange(1 << 30):x}"
    home = Path(tempfile.mkdtemp(prefix="coordinator-eos-"))
    cluster = LocalCluster(
        home, size=3, overrides={"broker.session.timeout.ms": str(args.session_timeout_ms)}
    )
    stopped: list = []
    task = None
    try:
        log(f"try {attempt}: starting 3 brokers + controller under {home}")
        cluster.up()
        bootstrap = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        wait_for("3 brokers", lambda: len(admin.list_topics(timeout=5).brokers) == 3)
        # __transaction_state and __consumer_offsets exist once a transactional producer and a group
        # coordinator lookup have been made.
        warm = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"warm-{tag}", "log_level": 0})
        warm.init_transactions(60)
        probe = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{tag}", "log_level": 0})
        try:
            probe.committed([TopicPartition("x", 0)], timeout=10)
        except KafkaException:
            pass
        probe.close()
        for topic in ("__transaction_state", "__consumer_offsets"):
            wait_for(
                f"{topic} ISR of 3", lambda t=topic: all(len(v[2]) == 3 for v in describe(admin, t).values())
            )

        source = f"in-{tag}"
        for f in admin.create_topics([NewTopic(source, 1, 3)]).values():
            f.result(30)
        # An app whose transaction coordinator (for input partition 0) is not its group coordinator.
        txns, groups = describe(admin, "__transaction_state"), describe(admin, "__consumer_offsets")
        for i in range(1000):
            app_id = f"eos-repro-{tag}-{i}"
            tid = _names.transactional_id(app_id, source, 0)
            coord = txns[partition_for(tid, TXN_PARTITIONS)][0]
            if groups[partition_for(_names.input_group(app_id), OFFSETS_PARTITIONS)][0] != coord:
                break
        f1, f2 = [b for b in (1, 2, 3) if b != coord]
        output = f"out-{tag}"
        assignment = [[coord], [f1], [f2], [coord]]
        for f in admin.create_topics(
            [NewTopic(output, num_partitions=len(assignment), replica_assignment=assignment)]
        ).values():
            f.result(30)
        wait_for(
            "output leaders",
            lambda: [v[0] for _, v in sorted(describe(admin, output).items())] == [coord, f1, f2, coord],
        )
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        for i in range(RECORDS):
            producer.produce(source, f"v{i}".encode(), key=f"k{i % KEYS}".encode(), partition=0)
        assert producer.flush(30) == 0
        log(
            f"app {app_id}: transaction coordinator {coord}, followers {f1},{f2};"
            f" output led by {coord},{f1},{f2},{coord}"
        )

        once = home / "once"
        once.mkdir()
        paused = once / "paused-after_send_offsets"
        env = {"EOS_PAUSE_AT": "after_send_offsets", "EOS_CRASH_ONCE_DIR": str(once)}
        task = _task(bootstrap, app_id, source, output, home / "state", env)
        wait_for("the task paused after its offsets joined the transaction", paused.exists, timeout=120)
        pid = int(paused.read_text().strip() or task.pid)
        for b in (f1, f2):
            os.kill(cluster.node(b).pid(), signal.SIGSTOP)
            stopped.append(cluster.node(b))
        time.sleep(args.quiesce)  # the followers' pending fetches expire: nothing reaches them now
        os.kill(pid, signal.SIGCONT)  # the task calls commit_transaction
        time.sleep(args.kill_after)
        cluster.node(coord).kill()
        os.killpg(task.pid, signal.SIGKILL)
        task.wait(10)
        log(
            f"task resumed into its commit; coordinator {coord} and the task SIGKILLed"
            f" {args.kill_after}s later"
        )
        for node in stopped:
            os.kill(node.pid(), signal.SIGCONT)
        stopped.clear()
        time.sleep(args.restart_delay)
        cluster.node(coord).start()
        log(f"coordinator {coord} restarted {args.restart_delay}s after the kill; settling {args.settle}s")
        time.sleep(args.settle)
        wait_for("3 brokers", lambda: len(admin.list_topics(timeout=5).brokers) == 3, timeout=90)

        slots = [(output, p) for p in range(4)]
        rc, _ = count(bootstrap, slots, "read_committed")
        ru, _ = count(bootstrap, slots, "read_uncommitted")
        reader = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": _names.input_group(app_id), "log_level": 0}
        )
        committed = reader.committed([TopicPartition(source, 0)], timeout=60)[0].offset
        reader.close()
        split = committed == RECORDS and any(c < u for c, u in zip(rc, ru, strict=True))
        shape = " ".join(f"p{p}={rc[p]}/{ru[p]}" for p in range(4)) + f"; input offset {committed}"
        log(f"after the fault: read_committed/read_uncommitted {shape}")

        task = _task(bootstrap, app_id, source, output, home / "state", {})
        out, err = task.communicate(timeout=300)
        rc2, _ = count(bootstrap, slots, "read_committed")
        if split:
            ok = task.returncode != 0 and "CommitLostError" in err and rc2 == rc
            line = next((x for x in err.splitlines() if "CommitLostError:" in x), err[-300:])
            verdict = (
                f"{'DETECTED' if ok else 'MISSED'}: the broker split the transaction ({shape}); eos's re-run"
                f" exited {task.returncode}: {line[:400]}"
            )
            # The error's first advice: copy the aborted records back, then the task again.
            repaired = subprocess.run(
                [sys.executable, "-m", "eos.cli", "--bootstrap-server", bootstrap, "repair"]
                + ["--app", app_id, "--execute", "--timeout", "30"],
                capture_output=True,
                text=True,
                timeout=300,
            )
            log(f"eos repair exited {repaired.returncode}: {(repaired.stdout + repaired.stderr)[-600:]}")
            task = _task(bootstrap, app_id, source, output, home / "state", {})
            task.communicate(timeout=300)
            written = _written(bootstrap, output)
            whole = sorted(written.elements()) == sorted(f"v{i}" for i in range(RECORDS))
            ok = ok and repaired.returncode == 0 and task.returncode == 0 and whole
            verdict += (
                f"; REPAIRED: eos repair exited {repaired.returncode}, the task again {task.returncode},"
                f" read_committed {sum(written.values())} outputs of {RECORDS} inputs,"
                f" {sum(1 for n in written.values() if n > 1)} twice, {RECORDS - len(written)} missing"
            )
        else:
            ok = task.returncode == 0 and sum(rc2) == RECORDS
            verdict = (
                f"{'OK' if ok else 'FAILED'} (not split: {shape}): eos's re-run exited {task.returncode},"
                f" {sum(rc2)} of {RECORDS} outputs committed"
            )
        return verdict, ok
    finally:
        if task is not None and task.poll() is None:
            os.killpg(task.pid, signal.SIGKILL)
        for node in stopped:
            try:
                os.kill(node.pid(), signal.SIGCONT)
            except OSError:
                pass
        cluster.down()
        shutil.rmtree(home, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.chaos.coordinator_eos", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--tries", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--session-timeout-ms", type=int, default=15_000)
    parser.add_argument("--quiesce", type=float, default=1.5)
    parser.add_argument("--kill-after", type=float, default=0.5)
    parser.add_argument("--restart-delay", type=float, default=1.0)
    parser.add_argument("--settle", type=float, default=35.0)
    args = parser.parse_args(argv)
    failed = 0
    for attempt in range(args.tries):
        verdict, ok = experiment(args, attempt)
        print(f"VERDICT try {attempt}: {verdict}", flush=True)
        failed += not ok
    print(
        f"VERDICT: eos {'failed' if failed else 'held'} in {args.tries - failed}/{args.tries} tries",
        flush=True,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
