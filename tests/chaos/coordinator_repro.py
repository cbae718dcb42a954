"""One Kafka transaction COMMITTED on some partitions and ABORTED on others, because a
coordinator restarted within broker.session.timeout.ms resumes leadership of its `__transaction_state`
partition at its old leader epoch, loads the log to its end (above the high watermark) and sends COMMIT
markers from a PREPARE_COMMIT that no follower has. No eos, no Spark: a 3-broker KRaft cluster
(`LocalCluster`: brokers 1-3 plus a controller of its own) and confluent_kafka clients.

 1. `__transaction_state` partition P of the transactional.id is led by broker C (the coordinator),
    replicated on F1, F2. Output partitions p0..p3 are led by C, F1, F2, C (--layout): p1, p2 with
    replication factor 3, p0, p3 (C's) with 1 by default, see below.
 2. The client (a process of its own) begins a transaction, writes 10 records to each output partition
    (flushed) and send_offsets_to_transaction for a group whose `__consumer_offsets` partition is led
    by a broker other than C.
 3. SIGSTOP F1 and F2, then wait --quiesce (1.5 s): their long-poll fetches pending in C's purgatory
    expire (replica.fetch.wait.max.ms 500), so nothing C appends next reaches them.
 4. commit_transaction(): C appends PREPARE_COMMIT to P, on its own log only.
 5. --kill-after (0.5 s) later: SIGKILL C, and SIGKILL the client (it never sees commit_transaction
    return; --client paused|alive for the other cases); SIGCONT F1, F2.
 6. --restart-delay (1 s) later: start C again. Its registration is refused
    (DUPLICATE_BROKER_REGISTRATION: its old session is still live), yet it replays the metadata log,
    becomes leader of P (and p0, p3) at leader epoch 0, loads P to its log end and sends COMMIT markers
    for the unreplicated PREPARE_COMMIT. Those for F1's and F2's partitions (and the offsets) land.
 7. broker.session.timeout.ms (--session-timeout-ms, 15 s here, Kafka's default 9 s) after C's last
    heartbeat the controller fences C; F1 or F2 leads P without the PREPARE_COMMIT, the
    transaction is Ongoing there, times out (transaction.timeout.ms 10 s) and is aborted with a bumped
    producer epoch: the partitions that had no COMMIT yet are aborted. C truncates its PREPARE_COMMIT.
 8. --settle (35 s) later: count each output partition read_committed and read_uncommitted, and read
    the group's committed offset.

REPRODUCED: some output partitions (and/or the offsets) read 10/10 committed, others 0/10.

C's own partitions never get its COMMIT while it is unregistered (its markers to itself fail: its
listener is not serving yet). With replication factor 3 for them (`--layout C,F1,F2,C`), when C is
fenced its pending markers for p0/p3 are re-routed to their new leaders and race its resignation:
sometimes they land and every partition ends committed (while P says CompleteAbort), so the split shows
in some tries only. With factor 1 (the default) they have no other leader to go to and it shows in
almost every try (8 of 9 here, Kafka 4.1.1-4.3.0): the one miss was C's marker to itself landing once
C had registered again, before its resignation took effect. Hence --tries 3 (stopping at the first).
Kafka's default session timeout 9 s also works when the restarted JVM comes up quickly enough.
`--client alive` does not show it: librdkafka retries EndTxn(commit) at the new coordinator, which
commits the transaction (Ongoing there) everywhere.

    .venv/bin/python -m tests.chaos.coordinator_repro [--tries N] [--seed S] [--layout C,F1,F2,C]
        [--client killed|paused|alive] [--stop both|one|none] [--kill-after 0.5] [--restart-delay 1]
        [--session-timeout-ms 9000]
        [--kafka-libs DIR] [--no-logs] [--keep]

`--kafka-libs DIR` runs another broker version from DIR = <cache>/kafka/<version>/libs, fetched with
`mvn -B -s docker/maven/settings.xml -f docker/maven/broker-pom.xml dependency:copy-dependencies
-DincludeScope=runtime -Dkafka.version=<version> -DoutputDirectory=DIR`. Always exits 0.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

N_PER_PARTITION = 10
TXN_PARTITIONS = 4  # transaction.state.log.num.partitions in LocalCluster's server.properties
OFFSETS_PARTITIONS = 4  # offsets.topic.num.partitions likewise


def java_hash(s: str) -> int:
    h = 0
    for unit in s.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, n: int) -> int:
    h = java_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % n


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}.{int(time.time() * 1000) % 1000:03d}] {msg}", flush=True)


def describe(admin, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, isr)"""
    md = admin.list_topics(topic=topic, timeout=10)
    t = md.topics[topic]
    if t.error is not None:
        raise RuntimeError(f"{topic}: {t.error}")
    return {p: (pm.leader, list(pm.replicas), list(pm.isrs)) for p, pm in t.partitions.items()}


def wait_for(what: str, cond, timeout: float = 60.0, every: float = 0.5):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = cond()
            if last:
                return last
        except Exception as exc:  # noqa: BLE001 - retried until the deadline
            last = exc
        time.sleep(every)
    raise RuntimeError(f"timed out waiting for {what} (last: {last!r})")


def count(bootstrap: str, slots: list[tuple[str, int]], isolation: str) -> tuple[list[int], list[tuple]]:
    """Records in each output partition as a consumer of this isolation level reads them, and the
    partition's (low, high) offsets: with read_committed, high is the last stable offset."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}-{time.time()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": 0,
        }
    )
    try:
        ends = [c.get_watermark_offsets(TopicPartition(t, p), timeout=10, cached=False) for t, p in slots]
        c.assign([TopicPartition(t, p, 0) for t, p in slots])
        counts = dict.fromkeys(slots, 0)
        idle_until = time.monotonic() + 5
        while time.monotonic() < idle_until:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            counts[(m.topic(), m.partition())] += 1
            idle_until = time.monotonic() + 3
        return [counts[slot] for slot in slots], ends
    finally:
        c.close()


def key_lines(server_log: Path, since: str, txn_partition: str, topic: str, limit: int = 40) -> list[str]:
    """The lines that tell the story: registration, leadership and loading of the coordinator's
    partition, markers, fencing, truncation, aborts."""
    wanted = re.compile(
        r"DUPLICATE_BROKER_REGISTRATION|Successfully registered|Fencing broker|"
        rf"(Leader|Follower) ({re.escape(txn_partition)}|{re.escape(topic)}\S*-\d) |"
        rf"(Loading|Completed loading) transaction metadata from {re.escape(txn_partition)}|"
        r"Sending txn markers|TransactionCoordinatorFenced|[Aa]bort|timed out|"
        rf"Truncating (partition )?({re.escape(txn_partition)}|{re.escape(topic)}\S*-\d)|"
        rf"partition=({re.escape(txn_partition)}|{re.escape(topic)}\S*-\d).*Truncating"
    )
    out = []
    try:
        lines = server_log.read_text(errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        if not line.startswith("[") or line[1:24] < since or "has no effect" in line:
            continue
        if wanted.search(line):
            out.append(re.sub(r" \((kafka|org\.apache|state\.change)[^)]*\)$", "", line)[:330])
    return out[-limit:]


def _dump_log_segments(libs: Path, *args: str) -> subprocess.CompletedProcess:
    """kafka-dump-log: kafka.tools.DumpLogSegments up to Kafka 4.2, org.apache.kafka.tools's from 4.3."""
    for main in ("kafka.tools.DumpLogSegments", "org.apache.kafka.tools.DumpLogSegments"):
        out = subprocess.run(
            ["java", "-cp", f"{libs}/*", main, *args], capture_output=True, text=True, timeout=120
        )
        if "Could not find or load main class" not in out.stderr:
            break
    return out


def dump_txn_log(libs: Path, data_dir: Path, partition: str) -> str:
    pdir = data_dir / partition
    files = sorted(str(f) for f in pdir.glob("*.log"))
    if not files:
        return f"(no {partition} on this broker)"
    out = _dump_log_segments(
        libs, "--transaction-log-decoder", "--print-data-log", "--files", ",".join(files)
    )
    states = [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    ]
    rows, epoch = [], "?"
    for line in out.stdout.splitlines():
        m = re.search(r"partitionLeaderEpoch: (-?\d+)", line)
        if m:
            epoch = m.group(1)
        m = re.search(r"\| offset: (\d+) .*payload: (\{.*\})\s*$", line)
        if m:
            try:
                data = json.loads(m.group(2))["data"]
            except ValueError:
                rows.append(line[:200])
                continue
            parts = ",".join(
                f"{t['topic']}{t['partitionIds']}" for t in data.get("transactionPartitions") or []
            )
            rows.append(
                f"  offset {m.group(1)} leaderEpoch {epoch}: producerEpoch {data['producerEpoch']} "
                f"{states[data['transactionStatus']]} [{parts}]"
            )
    return "\n".join(rows) or (out.stdout[-1500:] + out.stderr[-500:])


def _client(conn, conf: dict) -> None:
    """The transactional producer, in a process of its own so that it can be SIGKILLed or SIGSTOPped
    like a crashed or paused application. Driven by the parent over `conn`."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    producer = Producer(conf)
    producer.init_transactions(60)
    conn.send(("initialized",))
    _, slots, group = conn.recv()
    producer.begin_transaction()
    for topic, p in slots:
        for i in range(N_PER_PARTITION):
            producer.produce(topic, value=f"{p}-{i}".encode(), partition=p)
    if producer.flush(30) != 0:
        conn.send(("error", "records not delivered"))
        return
    group_md = Consumer({"bootstrap.servers": conf["bootstrap.servers"], "group.id": group, "log_level": 0})
    producer.send_offsets_to_transaction(
        [TopicPartition(*slots[0], N_PER_PARTITION)], group_md.consumer_group_metadata(), 30
    )
    group_md.close()
    conn.send(("open",))
    _, timeout = conn.recv()
    conn.send(("committing",))
    t0 = time.monotonic()
    try:
        producer.commit_transaction(timeout)
        outcome = "returned OK"
    except KafkaException as exc:
        e = exc.args[0]
        outcome = (
            f"raised {e.name()} (retriable={e.retriable()} abortable={e.txn_requires_abort()} "
            f"fatal={e.fatal()}): {e.str()}"
        )
    conn.send(("done", f"{outcome} after {time.monotonic() - t0:.1f}s"))


def _expect(conn, what: str, timeout: float = 90.0):
    if not conn.poll(timeout):
        raise RuntimeError(f"the client did not report {what!r} within {timeout:.0f}s")
    msg = conn.recv()
    if msg[0] != what:
        raise RuntimeError(f"the client reported {msg!r}, not {what!r}")
    return msg


def dump_markers(libs: Path, data_dir: Path, partition: str) -> str:
    """The transaction markers (control records) of one partition's log."""
    files = sorted(str(f) for f in (data_dir / partition).glob("*.log"))
    if not files:
        return "(no replica here)"
    out = _dump_log_segments(libs, "--print-data-log", "--files", ",".join(files))
    rows, head = [], ""
    for line in out.stdout.splitlines():
        if line.startswith("baseOffset"):
            head = line
        m = re.search(r"endTxnMarker: (\w+) coordinatorEpoch: (\d+)", line)
        if m and "isControl: true" in head:
            fields = dict(re.findall(r"(\w+): (-?\d+)", head))
            get = fields.get
            stamp = time.strftime("%H:%M:%S", time.localtime(int(get("CreateTime")) / 1000))
            rows.append(
                f"offset {get('baseOffset')} {m.group(1)} producerEpoch {get('producerEpoch')} "
                f"coordinatorEpoch {m.group(2)} leaderEpoch {get('partitionLeaderEpoch')} at {stamp}"
            )
    return "; ".join(rows) or "no markers"


def experiment(args, attempt: int) -> str:
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from eos._spark._cache import kafka_libs
    from tests.support.localbroker import LocalCluster

    rng = random.Random(args.seed * 1000 + attempt)
    tag = f"{args.seed}-{attempt}-{rng.randrange(1 << 30):x}"
    home = Path(tempfile.mkdtemp(prefix="coordinator-repro-"))
    # broker.session.timeout.ms is the window in which the restarted coordinator acts unfenced.
    cluster = LocalCluster(
        home, size=3, overrides={"broker.session.timeout.ms": str(args.session_timeout_ms)}
    )
    stopped: list = []
    client = None
    verdict = "NOT RUN"
    try:
        log(f"try {attempt}: starting 3 brokers + controller under {home} (libs {kafka_libs()})")
        cluster.up()
        bootstrap = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        wait_for("3 brokers", lambda: len(admin.list_topics(timeout=5).brokers) == 3)

        # The transactional.id and its coordinator. init_transactions creates __transaction_state.
        txn_id = f"repro-txn-{tag}"
        txn_p = partition_for(txn_id, TXN_PARTITIONS)
        conf = {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": args.txn_timeout_ms,
            "message.timeout.ms": args.txn_timeout_ms,
            "linger.ms": 0,
            "log_level": 7 if args.client_debug else 0,
            **({"debug": "eos,protocol"} if args.client_debug else {}),
        }
        ctx = multiprocessing.get_context("spawn")
        conn, child_conn = ctx.Pipe()
        client = ctx.Process(target=_client, args=(child_conn, conf), daemon=True)
        client.start()
        _expect(conn, "initialized")

        def txn_state_ok():
            d = describe(admin, "__transaction_state")
            leader, replicas, isr = d[txn_p]
            return (leader, replicas, isr) if len(isr) == 3 and leader in (1, 2, 3) else None

        coord, replicas, isr = wait_for("__transaction_state ISR of 3", txn_state_ok)
        followers = [b for b in replicas if b != coord]
        f1, f2 = followers
        log(f"transactional.id {txn_id} -> __transaction_state-{txn_p}: leader {coord}, isr {isr}")

        # A group whose __consumer_offsets partition is led by a broker other than the coordinator.
        probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "log_level": 0})
        try:  # FindCoordinator(group) creates __consumer_offsets
            probe.committed([TopicPartition("x", 0)], timeout=10)
        except KafkaException:
            pass
        wait_for(
            "__consumer_offsets ISR of 3",
            lambda: all(len(v[2]) == 3 for v in describe(admin, "__consumer_offsets").values()),
        )
        probe.close()
        offsets_md = describe(admin, "__consumer_offsets")
        want_group_leader = {"other": lambda b: b != coord, "coord": lambda b: b == coord}[args.group_on]
        group = next(
            g
            for g in (f"repro-group-{tag}-{i}" for i in range(1000))
            if want_group_leader(offsets_md[partition_for(g, OFFSETS_PARTITIONS)][0])
        )
        group_p = partition_for(group, OFFSETS_PARTITIONS)
        log(f"group {group} -> __consumer_offsets-{group_p}: leader {offsets_md[group_p][0]}")

        # The output partitions: RF 3 unless --layout says otherwise, leaders as it says.
        names = {"C": coord, "F1": f1, "F2": f2}
        tokens = [x.split(":") for x in args.layout.split(",")]  # "C:1": led by C, replication factor 1
        leaders = [names[t[0]] for t in tokens]
        assignment = [
            ([lead] + [b for b in (coord, f1, f2) if b != lead])[: int(t[1]) if len(t) > 1 else 3]
            for lead, t in zip(leaders, tokens, strict=True)
        ]
        # Kafka wants one replication factor per topic: partitions of factor 1 get a topic of their own.
        topic = f"repro-out-{tag}"
        names_by_rf = {3: topic, 2: f"{topic}-rf2", 1: f"{topic}-rf1"}
        slots: list[tuple[str, int]] = []
        per_topic: dict[str, list[list[int]]] = {}
        for replicas in assignment:
            name = names_by_rf[len(replicas)]
            per_topic.setdefault(name, []).append(replicas)
            slots.append((name, len(per_topic[name]) - 1))
        for f in admin.create_topics(
            [NewTopic(t, num_partitions=len(a), replica_assignment=a) for t, a in per_topic.items()]
        ).values():
            f.result(30)

        def placed():
            md = {t: describe(admin, t) for t in per_topic}
            return all(
                md[t][p][0] == leaders[i] and len(md[t][p][2]) == len(assignment[i])
                for i, (t, p) in enumerate(slots)
            )

        wait_for("output partitions led as assigned, full ISR", placed)
        names_of = [f"{t}-{p}" for t, p in slots]
        log(
            f"output {names_of}: replicas {assignment} (coordinator {coord}, followers {f1},{f2}); "
            f"each slot below is one of these partitions, in this order"
        )

        # The transaction.
        conn.send(("go", slots, group))
        _expect(conn, "open")
        log("produced 10 records to each partition, offsets sent; transaction open")

        to_stop = {"both": [f1, f2], "one": [f1], "none": []}[args.stop]
        for b in to_stop:
            os.kill(cluster.node(b).pid(), signal.SIGSTOP)
            stopped.append(cluster.node(b))
        log(f"SIGSTOP brokers {to_stop}")
        # A stopped follower's long-poll fetch still sits in the coordinator's purgatory: appending
        # PREPARE_COMMIT now would complete it and the response would wait in the follower's socket
        # buffer, to be read on SIGCONT. Let those fetches expire (replica.fetch.wait.max.ms, 500 ms).
        time.sleep(args.quiesce)

        conn.send(("commit", args.commit_timeout))
        _expect(conn, "committing")
        time.sleep(args.kill_after)
        now = time.time()
        kill_stamp = f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(now))},{int(now * 1000) % 1000:03d}"
        cluster.node(coord).kill()
        log(f"SIGKILL coordinator {coord} ({args.kill_after}s after commit_transaction())")
        if args.client == "killed":
            os.kill(client.pid, signal.SIGKILL)
            log("SIGKILL the client (it never learns the outcome of commit_transaction)")
        elif args.client == "paused":
            os.kill(client.pid, signal.SIGSTOP)
            log("SIGSTOP the client")
        for node in stopped:
            os.kill(node.pid(), signal.SIGCONT)
        stopped.clear()
        log(f"SIGCONT brokers {to_stop}")
        time.sleep(args.restart_delay)
        cluster.node(coord).start()
        log(f"restarted coordinator {coord} ({args.restart_delay}s after the kill)")

        outcome = "killed before it returned" if args.client == "killed" else "never returned"
        deadline = time.monotonic() + args.settle
        if args.client == "paused":
            time.sleep(args.settle)
            os.kill(client.pid, signal.SIGCONT)
            log("SIGCONT the client")
            deadline = time.monotonic() + 15
        if args.client != "killed":
            if conn.poll(max(0.0, deadline - time.monotonic())):
                outcome = conn.recv()[1]
            log(f"commit_transaction: {outcome}")
        else:
            time.sleep(args.settle)
        wait_for("broker back", lambda: len(admin.list_topics(timeout=5).brokers) == 3, timeout=60)
        wait_for(
            "output partitions have a leader",
            lambda: all(v[0] in (1, 2, 3) for t in per_topic for v in describe(admin, t).values()),
        )
        rc, ends_rc = count(bootstrap, slots, "read_committed")
        ru, ends_ru = count(bootstrap, slots, "read_uncommitted")
        parts = len(slots)
        reader = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "log_level": 0,
                "isolation.level": "read_committed",
            }
        )
        try:
            committed = reader.committed([TopicPartition(*slots[0])], timeout=20)[0].offset
        except KafkaException as exc:
            committed = f"error {exc}"
        reader.close()
        md = {t: describe(admin, t) for t in per_topic}
        md_after = [md[t][p] for t, p in slots]
        for p in range(parts):
            log(
                f"  p{p} = {names_of[p]}: leader before {leaders[p]} after {md_after[p][0]}; "
                f"read_committed {rc[p]} (LSO {ends_rc[p][1]}), "
                f"read_uncommitted {ru[p]} (HWM {ends_ru[p][1]})"
            )
        log(f"  group {group} committed offset for {names_of[0]}: {committed} (sent {N_PER_PARTITION})")

        committed_parts = [p for p in range(parts) if rc[p] == N_PER_PARTITION]
        lost_parts = [p for p in range(parts) if rc[p] == 0 and ru[p] == N_PER_PARTITION]
        offsets_in = committed == N_PER_PARTITION
        split = (committed_parts or offsets_in) and lost_parts
        counts = " ".join(f"p{p}={rc[p]}/{ru[p]}" for p in range(parts))
        verdict = (
            f"{'REPRODUCED' if split else 'NOT REPRODUCED'}: read_committed/read_uncommitted {counts}; "
            f"group offset {committed} (expected {N_PER_PARTITION} or none); commit_transaction "
            f"{outcome}"
        )
        if split:
            verdict += (
                f" -- one transaction COMMITTED on partitions {committed_parts}"
                f"{' and the consumer offsets' if offsets_in else ''}, ABORTED on {lost_parts}"
            )
        if args.logs:
            partition = f"__transaction_state-{txn_p}"
            for node in cluster.nodes:
                lines = key_lines(node.log_dir / "server.log", kill_stamp, partition, topic)
                print(f"----- broker {node.node_id} key log lines since the kill -----")
                print("\n".join(lines))
            lines = key_lines(cluster.controller.log_dir / "server.log", kill_stamp, partition, topic, 20)
            print("----- controller -----\n" + "\n".join(lines))
    finally:
        if client is not None and client.is_alive():
            os.kill(client.pid, signal.SIGKILL)
            client.join(5)
        for node in stopped:
            try:
                os.kill(node.pid(), signal.SIGCONT)
            except Exception:  # noqa: BLE001
                pass
        cluster.down()  # every JVM this try started, also on failure
        try:
            if args.logs and "md_after" in locals():
                for node in cluster.nodes:
                    print(f"----- broker {node.node_id}: __transaction_state-{txn_p} (DumpLogSegments) -----")
                    print(dump_txn_log(kafka_libs(), node.home / "data", f"__transaction_state-{txn_p}"))
                print("----- output partitions: markers in the final leader's log -----")
                for p in range(parts):
                    leader = cluster.node(md_after[p][0])
                    print(
                        f"  p{p} = {names_of[p]} (broker {leader.node_id}): "
                        + dump_markers(kafka_libs(), leader.home / "data", names_of[p])
                    )
        finally:
            if args.keep:
                log(f"kept {home}")
            else:
                shutil.rmtree(home, ignore_errors=True)
    return verdict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.chaos.coordinator_repro",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--tries", type=int, default=3, help="fresh clusters to try (stops at the first repro)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--stop",
        choices=["both", "one", "none"],
        default="both",
        help="coordinator followers SIGSTOPped before commit_transaction",
    )
    parser.add_argument("--kill-after", type=float, default=0.5, help="s from commit_transaction to SIGKILL")
    parser.add_argument(
        "--quiesce",
        type=float,
        default=1.5,
        help="s between SIGSTOP and commit_transaction (> replica.fetch.wait.max.ms)",
    )
    parser.add_argument("--restart-delay", type=float, default=1.0, help="s from SIGKILL to restart")
    parser.add_argument(
        "--session-timeout-ms",
        type=int,
        default=15000,
        help="broker.session.timeout.ms (Kafka's default 9000 leaves a restarted JVM little time on a busy "
        "machine to come up before the controller fences its old session)",
    )
    parser.add_argument("--settle", type=float, default=35.0, help="s to wait after the restart")
    parser.add_argument(
        "--layout",
        default="C:1,F1,F2,C:1",
        help="leaders of the output partitions: C (the coordinator), F1, F2 (its followers), replication "
        "factor 3, or with a suffix :1, 1 (in a topic of its own). C,F1,F2,C is all RF 3 (racy, see above)",
    )
    parser.add_argument(
        "--group-on",
        choices=["other", "coord"],
        default="other",
        help="the group's __consumer_offsets leader: not the coordinator, or it",
    )
    parser.add_argument(
        "--client",
        choices=["killed", "paused", "alive"],
        default="killed",
        help="the producer at the coordinator's kill: SIGKILLed too (a crashed application), SIGSTOPped "
        "for --settle s (a paused one), or left retrying",
    )
    parser.add_argument("--txn-timeout-ms", type=int, default=10000)
    parser.add_argument("--commit-timeout", type=float, default=60.0)
    parser.add_argument("--kafka-libs", type=Path, help="<cache>/kafka/<version>/libs of another Kafka")
    parser.add_argument("--no-logs", dest="logs", action="store_false", help="skip broker log excerpts")
    parser.add_argument("--client-debug", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the cluster's directory")
    parser.add_argument("--all", action="store_true", help="run every try even after a repro")
    args = parser.parse_args(argv)
    if args.kafka_libs:
        libs = args.kafka_libs.resolve()
        os.environ["EOS_CACHE"] = str(libs.parents[2])
        os.environ["EOS_BROKER_VERSION"] = libs.parent.name
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so `finally` stops the JVMs

    from eos._spark._cache import kafka_libs

    version = next((j.name[len("kafka_2.13-") : -4] for j in kafka_libs().glob("kafka_2.13-*.jar")), "?")
    verdicts = []
    for attempt in range(1, args.tries + 1):
        try:
            verdict = experiment(args, attempt)
        except Exception as exc:  # noqa: BLE001 - a failed try is reported, not raised
            verdict = f"ERROR: {type(exc).__name__}: {exc}"
        verdicts.append(verdict)
        print(f"VERDICT try {attempt} (Kafka {version}): {verdict}", flush=True)
        if verdict.startswith("REPRODUCED") and not args.all:
            break
    n = sum(v.startswith("REPRODUCED") for v in verdicts)
    print(
        f"VERDICT (Kafka {version}): {'REPRODUCED' if n else 'NOT REPRODUCED'} in {n}/{len(verdicts)} tries",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
