"""The `Chaos` class: what a harness run starts (a broker or a replicated cluster, a Spark standalone
cluster, the seeded input), the faults it injects from outside, and one run (a guarantee x a pipeline)
from its first driver incarnation to the figures of its verification."""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from confluent_kafka.admin import AdminClient

from eos import _names, testing
from eos.session import free_port
from eos.testing import HistoryChecker
from tests.chaos.cluster import StandaloneCluster, cpu_seconds, signal_all
from tests.chaos.faults import BROKER_FAULTS, Incarnation
from tests.chaos.figures import JVM_PIPELINES, as_comparison, grep_count, task_attempts
from tests.chaos.live import LiveChecker
from tests.support import aggregates, counting
from tests.support.localbroker import LocalBroker, LocalCluster, finalized, set_feature
from tests.support.processes import DriverProcess
from tests.support.summaries import read_summaries

#: the repository: the driver runs `python -m tests.chaos.chaos_pipeline` from here
ROOT = Path(__file__).resolve().parents[2]
PIPELINE = "tests.chaos.chaos_pipeline"
TRANSACTION_TIMEOUT_MS = 10_000
PAUSES = {"zombie_pause", "executor_pause"}
HARD_KILLS = ("python_worker_kill", "executor_kill", "driver_kill", "rerun_batch_kill")


class Chaos:
    def __init__(self, args):
        self.args = args
        self.home = Path(args.home).resolve()
        shutil.rmtree(self.home, ignore_errors=True)
        self.home.mkdir(parents=True)
        self.rng = random.Random(args.seed)
        if args.brokers > 1:
            self.broker: LocalBroker | LocalCluster = LocalCluster(self.home / "kafka", args.brokers)
            self.broker_logs = self.broker.home
        else:
            self.broker = LocalBroker(self.home / "broker", free_port(), free_port())
            self.broker_logs = self.broker.log_dir
        self.cluster = StandaloneCluster(self.home / "spark")
        self.bootstrap = self.broker.bootstrap_servers
        self.source = "chaos-in"
        self.app_id = self.output = ""
        self.stateful = False
        self.guarantee = ""
        self.sent: dict[int, list[bytes]] = {}
        self.restarts = 0
        self.live: LiveChecker | None = None
        #: every driver incarnation started, for `down` to kill whichever still runs
        self.drivers: list[DriverProcess] = []
        #: the cluster's finalized transaction.version (read at `up`)
        self.transaction_version: int | None = None

    # -- setup -----------------------------------------------------------------------------------------

    def up(self) -> None:
        self.broker.up()
        if self.args.transaction_version is not None:
            set_feature(self.bootstrap, "transaction.version", self.args.transaction_version)
        self.transaction_version = finalized(self.bootstrap, "transaction.version")
        self.cluster.up()
        testing.create_topic(self.bootstrap, self.source, self.args.partitions)
        self.sent = testing.produce_sequence(
            self.bootstrap, self.source, self.args.partitions, self.args.records // self.args.partitions
        )

    def down(self) -> None:
        """Stop everything the run started: drivers (their process groups: the driver's JVM too), the
        Spark cluster with its executors, the broker(s). Each is in a session of its own, so none of
        them would end with the harness."""
        if self.live is not None:
            self.live.stop()
        for driver in self.drivers:
            driver.kill()
        self.cluster.down()
        self.broker.down()

    def _driver(self, argv: list[str], env: dict[str, str], log_path: Path) -> DriverProcess:
        driver = DriverProcess(argv, env=env, log_path=str(log_path), cwd=ROOT)
        self.drivers.append(driver)
        return driver

    # -- faults from outside ---------------------------------------------------------------------------

    def _busy_python_worker(self, wait: float = 10.0):
        """A Python worker using CPU now (most likely inside a transaction), else any."""
        deadline = time.monotonic() + wait
        workers = []
        while time.monotonic() < deadline:
            workers = self.cluster.python_workers()
            before = {w.pid: cpu_seconds(w.pid) for w in workers}
            time.sleep(0.3)
            busy = [w for w in workers if cpu_seconds(w.pid) > before[w.pid]]
            if busy:
                return self.rng.choice(busy)
        return self.rng.choice(workers) if workers else None

    def _paused_pid(self, once: Path, timeout: float = 120) -> int | None:
        marker = once / "paused-after_produce"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if marker.exists() and marker.read_text().strip():
                return int(marker.read_text())
            time.sleep(0.1)
        return None

    def inject(self, fault: str, once: Path) -> bool:
        if fault == "python_worker_kill":
            worker = self._busy_python_worker()
            return worker is not None and signal_all([worker.pid], signal.SIGKILL) == 1
        if fault == "executor_kill":
            executors = self.cluster.executors()
            return bool(executors) and signal_all([self.rng.choice(executors).pid], signal.SIGKILL) == 1
        if fault in BROKER_FAULTS - {"broker_restart"}:
            done = self._cluster_fault(fault)
            self.restarts += done
            if self.live is not None:
                self.live.reconnect()
            return done
        if fault == "broker_restart":
            if self.restarts % 2:
                self.broker.kill()  # a crash: the broker recovers its logs on start
            else:
                self.broker.down()
            time.sleep(2)
            self.broker.up()
            self.restarts += 1
            if self.live is not None:
                self.live.reconnect()
            return True
        if fault in ("zombie_pause", "executor_pause"):
            # The incarnation was started with EOS_PAUSE_AT=after_produce: one task attempt stops itself
            # mid-transaction (outputs produced, nothing committed) and names its pid.
            paused = self._paused_pid(once)
            if paused is None:
                return False
            if fault == "zombie_pause":
                time.sleep(8)  # a speculative attempt takes the partition over and commits meanwhile
                signal_all([paused], signal.SIGCONT)
            else:
                pids = self.cluster.executor_tree()  # nothing may take over: every executor stops
                signal_all(pids, signal.SIGSTOP)
                time.sleep(TRANSACTION_TIMEOUT_MS / 1000 + 10)  # the broker aborts the open transaction
                signal_all([*pids, paused], signal.SIGCONT)
            (once / "resumed").touch()
            return True
        raise ValueError(fault)

    # -- faults of a replicated cluster -----------------------------------------------------------------

    def _leader(self, topic: str, partition: int) -> int:
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        return admin.list_topics(topic, timeout=30).topics[topic].partitions[partition].leader

    def _coordinator(self) -> tuple[int, str]:
        """The broker coordinating the app, and what it coordinates: exactly_once, the leader of the
        __transaction_state partition of one of its transactional ids; at_least_once (no transactions: on
        a fresh cluster that topic does not even exist), the leader of the __consumer_offsets partition
        of its input group. Kafka places both by the absolute value of the key's Java hash code, modulo
        the partition count."""
        if self.guarantee == "exactly_once":
            tid = f"{self.app_id}:{self.source}:{self.rng.randrange(self.args.partitions)}"
            topic, key, what = "__transaction_state", tid, "the app's transaction coordinator"
        else:
            topic, key, what = "__consumer_offsets", _names.input_group(self.app_id), "its group coordinator"
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        state = admin.list_topics(topic, timeout=30).topics[topic]
        if not state.partitions:
            raise RuntimeError(f"coordinator_kill: {topic} has no partitions yet ({state.error})")
        return state.partitions[java_abs(java_hash(key)) % len(state.partitions)].leader, what

    def _wait_full_isr(self, timeout: float = 180) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                topics = admin.list_topics(timeout=10).topics.values()
                if all(len(p.isrs) == len(p.replicas) for t in topics for p in t.partitions.values()):
                    return
            except Exception:  # noqa: BLE001 - brokers are coming back; the deadline bounds this
                pass
            time.sleep(0.5)
        log(f"  replicas still out of sync after {timeout}s")

    def _cluster_fault(self, fault: str) -> bool:
        cluster = self.broker
        assert isinstance(cluster, LocalCluster)
        if fault in ("coordinator_kill", "leader_kill"):
            if fault == "coordinator_kill":
                self._busy_python_worker()  # tasks are writing: commits are near
                victim, what = self._coordinator()
            else:
                topic = self.output
                if self.stateful and self.rng.random() < 0.5:
                    topic = f"{self.app_id}-{self.source}-counts-changelog"
                partition = self.rng.randrange(self.args.partitions)
                victim, what = self._leader(topic, partition), f"leader of {topic}/{partition}"
            if victim < 0:
                return False
            cluster.node(victim).kill()
            log(f"  {fault}: broker {victim}, {what}, SIGKILLed; started again 3 s later")
            time.sleep(3)
            cluster.node(victim).up()
        elif fault == "two_down":
            first, second = self.rng.sample(cluster.nodes, 2)
            first.kill()
            second.down()
            log(f"  two_down: brokers {first.node_id} (killed) and {second.node_id} (stopped) for 15s")
            time.sleep(15)  # below min.insync.replicas: produce, offsets and commits cannot complete
            first.start()
            second.start()
            first._wait_ready(120)
            second._wait_ready(120)
        elif fault == "rolling_restart":
            for node in cluster.nodes:
                node.down()
                node.up()
                self._wait_full_isr()
            log("  rolling_restart: every broker in turn")
        else:
            raise ValueError(fault)
        self._wait_full_isr()
        return True

    def zombies_fenced(self) -> int:
        """Task attempts eos found fenced (their executor logs say so)."""
        return grep_count(self.cluster.home, "stderr", "this attempt is a zombie")

    def timed_out_transactions(self) -> int:
        """Transactions the broker aborted because they outlived transaction.timeout.ms."""
        return grep_count(self.broker_logs, "server.log*", "due to timeout")

    # -- one run ---------------------------------------------------------------------------------------

    def run(self, guarantee: str, pipeline: str, plan: list[Incarnation]) -> dict:
        """`pipeline`: "stateless" (pass-through), "stateful" (a running count per key) through
        `foreachBatch(eos.sink(...))`, or "format": the stateful one through `format("eos")`; "jvm": the
        stateless one on the JVM data path (its rows never reach a Python worker: the schedule's Python
        worker kills SIGKILL the executor JVM that writes instead); "format-jvm": the stateless one through
        `format("eos")`, which eos's JVM provider routes to the JVM data path."""
        started = time.monotonic()
        stateful = pipeline in ("stateful", "format", "snapshots")
        aggregate = pipeline == "aggregate"
        name = f"{guarantee}-{pipeline}"
        run_dir = self.home / name
        events = run_dir / "events"
        events.mkdir(parents=True)
        app_id, output = f"chaos-{name}", f"chaos-out-{name}"
        self.app_id, self.output, self.stateful, self.guarantee = app_id, output, stateful, guarantee
        testing.create_topic(self.bootstrap, output, self.args.partitions)
        counts = testing.expected_running_counts(self.sent) if stateful else None
        checker = (
            aggregates.RunningCounts(aggregates.key_counts(self.sent))
            if aggregate
            else HistoryChecker(testing.flatten(self.sent), counts)
        )
        live = LiveChecker(self.bootstrap, output, self.args.partitions, checker)
        live.start()  # 1.
        self.live = live
        summaries = run_dir / "summaries.jsonl"
        faults: Counter = Counter()
        timed_out_before, zombies_before = self.timed_out_transactions(), self.zombies_fenced()
        restarts_before = self.restarts
        driver_failures = 0
        log(f"run {name}: {len(plan) - 1} faulty incarnations, then one to the end")

        for i, inc in enumerate(plan):  # 2. and 3.
            once = run_dir / f"once-{i}"
            once.mkdir()
            trigger = run_dir / f"rerun-{i}"
            env = {
                "EOS_PROCESSING_GUARANTEE": guarantee,
                "EOS_SPARK_MASTER": self.cluster.master_url,
                "EOS_TRANSACTION_TIMEOUT_MS": str(TRANSACTION_TIMEOUT_MS),
                "EOS_COMMIT_INTERVAL_MS": "2000",
                "EOS_STATE_DIR": str(run_dir / "state"),
                "EOS_CRASH_AT": ",".join(inc.crash_points),
                "EOS_CRASH_ONCE_DIR": str(once),
                "EOS_PAUSE_AT": "after_produce" if PAUSES & set(inc.external) else "",
                "SPARK_LOCAL_IP": "127.0.0.1",
                "PYTHONFAULTHANDLER": "1",
                "EOS_DATA_PATH": "jvm" if pipeline in JVM_PIPELINES else "python",
            }
            if pipeline == "snapshots":  # the stateful pipeline, every store snapshotted after every batch
                env["EOS_STATE_SNAPSHOT_LOCATION"] = str(run_dir / "snapshots")
                env["EOS_STATE_SNAPSHOT_INTERVAL_MS"] = "1"
            argv = [
                sys.executable,
                *("-m", PIPELINE),
                *("--bootstrap", self.bootstrap, "--app-id", app_id, "--input", self.source),
                *("--output", output, "--checkpoint", str(run_dir / "checkpoint")),
                *("--summaries", str(summaries), "--events-dir", str(events)),
                *("--max-offsets", str(self.args.max_offsets), "--rerun-trigger", str(trigger)),
                *(["--stateful"] if stateful else []),
                *(["--format-eos"] if pipeline in ("format", "format-jvm") else []),
                *(["--aggregate"] if aggregate else []),
            ]
            if stateful and "during_restore" in inc.crash_points:
                # The executors' disk is lost (a move to new hosts): every store restores from its
                # changelog, and the restore is where this incarnation's crash point fires (F6).
                shutil.rmtree(run_dir / "state", ignore_errors=True)
                faults["state_dir_lost"] += 1
            proc = self._driver(argv, env, run_dir / f"driver-{i}.log")
            batches = len(read_summaries(summaries))
            if inc.end == "finish":  # 3.
                rc = self._finish(proc)
                if rc != 0:
                    driver_failures += 1
                    log(f"  last incarnation exited {rc}; running it once more\n{proc.log_tail(3000)}")
                    proc = self._driver(argv, env, run_dir / f"driver-{i}-again.log")
                    rc = self._finish(proc)
                finished = rc == 0
                log(f"  incarnation {i}: ran to the end (exit {rc})")
                break
            # 2. Faults start once the incarnation writes batches (or once a task paused itself: that batch
            # cannot end before the pause fault releases it).
            batches = self._wait_batches(proc, summaries, batches + 1, once)
            for fault, delay in zip(inc.external, inc.delays[:-1], strict=True):
                if fault not in PAUSES:  # a paused task is dealt with at once, before speculation
                    time.sleep(delay)
                if not proc.running():
                    break
                if pipeline in JVM_PIPELINES and fault == "python_worker_kill":
                    fault = "executor_kill"  # the JVM that writes
                if self.inject(fault, once):
                    faults[fault] += 1
                batches = self._wait_batches(proc, summaries, batches + 1, once)
            if inc.end == "driver_kill":
                time.sleep(inc.delays[-1])
                if proc.kill():
                    faults["driver_kill"] += 1
            else:
                trigger.touch()
                if self._finish(proc) is None:  # the batch never ended: killed as a crash would
                    faults["driver_kill"] += 1
            reruns = (events / "rerun-kills").read_text().split() if (events / "rerun-kills").exists() else []
            faults["rerun_batch_kill"] = len(reruns)
            if proc.running():
                proc.kill()
            rc = proc.proc.returncode
            if rc not in (0, -signal.SIGKILL):
                driver_failures += 1
                log(f"  incarnation {i}: driver exited {rc}\n{proc.log_tail(2000)}")
            for marker in once.glob("crashed-*"):
                faults[marker.name.replace("crashed-", "crash_")] += 1
            log(f"  incarnation {i}: {dict(faults)}")
            if rc == 0:
                log("  the input ran out before the schedule did")
        else:
            finished = False

        # 4. verify. A transaction left open would keep the marker behind it invisible to a fresh
        # read_committed consumer past transaction.timeout.ms (the broker's abort interval is 5 s more).
        output_marker = testing.write_markers(self.bootstrap, output)
        marker_sent = time.monotonic()
        records, hanging = testing.read_topic(
            self.bootstrap, output, marker=output_marker, timeout=TRANSACTION_TIMEOUT_MS / 1000 + 5
        )
        marker_seconds = round(time.monotonic() - marker_sent, 2)
        if hanging:  # read on to the marker for the comparison; the partitions stay counted as hanging
            records, _ = testing.read_topic(self.bootstrap, output, marker=output_marker, timeout=120)
        live_behind = live.wait_marker(output_marker, 60)
        live.stop()
        self.live = None
        if aggregate:
            truth = aggregates.key_counts(self.sent)
            live_result = as_comparison(live.checker.result(final=False), len(truth))
            ordered = sorted(records, key=lambda r: (r.partition, r.offset))
            final = as_comparison(aggregates.check_running_counts(ordered, truth), len(truth), hanging)
        else:
            live_result = live.checker.result()
            final = testing.compare(testing.flatten(self.sent), records, hanging, running_counts=counts)
        changelog_mismatches = 0
        if stateful:
            changelog = f"{app_id}-{self.source}-counts-changelog"
            changelog_mismatches = counting.changelog_mismatches(self.bootstrap, changelog, self.sent)
        history = read_summaries(summaries)
        batch_ids = Counter(s["batch_id"] for s in history)
        kills = sum(n for k, n in faults.items() if k in HARD_KILLS or k.startswith("crash_"))
        # Every crash point armed in the schedule must have fired; a stateless run has nothing to restore,
        # and at_least_once sends no offsets to a transaction.
        armed = {p for inc in plan for p in inc.crash_points}
        armed -= (set() if stateful else {"during_restore"}) | (
            set() if guarantee == "exactly_once" else {"after_send_offsets"}
        )
        return {
            "guarantee": guarantee,
            "pipeline": pipeline,
            "records": final.expected,
            "received": final.received,
            "finished": finished,
            "faults": dict(sorted(faults.items())),
            "kills": kills,
            "crash_points_not_fired": sorted(p for p in armed if not faults[f"crash_{p}"]),
            "broker_restarts": self.restarts - restarts_before,
            "missing": final.missing,
            "duplicated": final.duplicated,
            "out_of_order": final.out_of_order,
            "unexpected": final.unexpected,
            "state_mismatches": final.state_mismatches + changelog_mismatches,
            "hanging_transactions": len(final.hanging_partitions),
            "marker_visible_seconds": marker_seconds,
            "live": {
                "received": live_result.received,
                "duplicated": live_result.duplicated,
                "out_of_order": live_result.out_of_order,
                "unexpected": live_result.unexpected,
                "state_mismatches": live_result.state_mismatches,
                "caught_up": not live_behind,
                "reconnects": live.reconnects,
            },
            "spark_tasks": task_attempts(events),
            "data_paths": sorted({s.get("data_path") or "?" for s in history}),
            "batches_rerun": sum(1 for n in batch_ids.values() if n > 1),
            "rows_skipped_on_rerun": sum(s["skipped"] for s in history),
            "transactions_aborted_by_eos": sum(s["aborted"] for s in history),
            "transactions_timed_out_by_broker": self.timed_out_transactions() - timed_out_before,
            "zombies_fenced": self.zombies_fenced() - zombies_before,
            "driver_failures": driver_failures,
            # Drivers that stopped on a committed transaction the broker aborted on some partition (the
            # coordinator restarted inside its session: docs/design.md): data eos would otherwise lose
            "commits_lost": grep_count(run_dir, "driver-*.log", "CommitLostError:"),
            "wall_seconds": round(time.monotonic() - started, 1),
        }

    def _finish(self, proc: DriverProcess) -> int | None:
        """The driver's exit code, or None when it had to be killed after --finish-timeout."""
        try:
            return proc.wait(self.args.finish_timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            return None

    def _wait_batches(
        self, proc: DriverProcess, summaries: Path, wanted: int, once: Path, timeout: float = 240
    ) -> int:
        deadline = time.monotonic() + timeout
        while proc.running() and time.monotonic() < deadline:
            done = len(read_summaries(summaries))
            paused = once / "paused-after_produce"
            if done >= wanted or (paused.exists() and not (once / "resumed").exists()):
                return done
            time.sleep(0.2)
        return len(read_summaries(summaries))


def java_hash(text: str) -> int:
    """java.lang.String.hashCode (32-bit, signed) of an ASCII string."""
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def java_abs(n: int) -> int:
    """Kafka's Utils.abs: Integer.MIN_VALUE maps to 0."""
    return 0 if n == -(1 << 31) else abs(n)


def log(text: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {text}", flush=True)
