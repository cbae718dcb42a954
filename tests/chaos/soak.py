"""`make soak`: small batches for a long time, exactly_once, and nothing may grow.

A broker of its own (free ports) and two pipelines as driver processes (examples/pipeline.py, a
micro-batch every second, Spark local mode): **stateless** through `foreachBatch(eos.sink(...))` and
**stateful**, a running count per key, through `writeStream.format("eos")` (its ledger beside the
checkpoint, kept to 600 batches so that its bound shows within the run). Input arrives all the time,
`--rate` records/s over 4 partitions. Every `--restart-minutes` the broker is stopped and started again
(SIGTERM), every `--kill-minutes` a Python worker of one of the pipelines is SIGKILLed (Spark retries
its task). Every `--sample-seconds`: each pipeline's driver (the
Python process), JVM (driver and executor in local mode) and Python workers (the daemon and its forks):
resident memory, threads and open files; the broker's the same; the app's transactional ids and their
producer ids as the broker lists them (Kafka's TransactionsCommand); the sizes of the stateful one's
state directory, ledger and Spark checkpoint.

At the end the input stops, the pipelines catch up and are stopped, and a read_committed reader compares
each output with the input: nothing missing, nothing twice, order kept, the stateful counts right.
Each series' growth is judged after a warm-up (`--warmup-minutes`): the least-squares slope per hour,
and the median of its last third against its middle third.

    python -m tests.chaos.soak [--minutes 35] [--rate 200] [--report reports/soak.json]

Exits 1 when an output is not exactly once or a series grew (see `GROWTH`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import sys
import threading
import time
from pathlib import Path

import psutil
from confluent_kafka import Producer

import eos
from eos import testing
from eos._kafka import _offsets
from eos._spark import _ledger
from eos.cli._broker import Broker, parse_tool_table
from eos.session import free_port
from tests.support.localbroker import LocalBroker
from tests.support.processes import DriverProcess, Interrupted, descendants, pyspark_python, stopping

PARTITIONS = 4
ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "examples" / "pipeline.py"
#: a series grows when its last third's median is this much above its middle third's
GROWTH = 0.25


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


class Feeder(threading.Thread):
    """Input at `rate` records/s, sequence values per partition (`eos.testing.seq_value`)."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        super().__init__(daemon=True)
        self.topic, self.rate = topic, rate
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 2})
        self.sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        self.stopped = threading.Event()

    def run(self) -> None:
        seq, started = 0, time.monotonic()
        while not self.stopped.is_set():
            due = int((time.monotonic() - started) * self.rate / PARTITIONS)
            while seq < due:
                for p in range(PARTITIONS):
                    value = testing.seq_value(self.topic, p, seq)
                    while True:
                        try:
                            self.producer.produce(self.topic, value, key=f"k{seq % 97}".encode(), partition=p)
                            break
                        except BufferError:
                            self.producer.poll(0.1)
                    self.sent[p].append(value)
                seq += 1
            self.producer.poll(0)
            time.sleep(0.05)
        if self.producer.flush(120):
            raise RuntimeError("input not delivered")


def _tree(root: int) -> dict[str, list[psutil.Process]]:
    """A driver's processes by role: its Python process, its JVM, its PySpark workers."""
    roles: dict[str, list[psutil.Process]] = {"driver": [], "jvm": [], "python_workers": []}
    workers = {p.pid for p in pyspark_python(root)}
    for p in [*descendants(root)]:
        try:
            proc = psutil.Process(p.pid)
        except psutil.NoSuchProcess:
            continue
        if p.pid in workers:
            roles["python_workers"].append(proc)
        elif "java" in p.cmdline.split(" ")[0]:
            roles["jvm"].append(proc)
    try:
        roles["driver"].append(psutil.Process(root))
    except psutil.NoSuchProcess:
        pass
    return roles


def _usage(procs: list[psutil.Process]) -> dict[str, int]:
    rss = threads = files = 0
    for proc in procs:
        try:
            with proc.oneshot():
                rss += proc.memory_info().rss
                threads += proc.num_threads()
                files += proc.num_fds()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return {"rss_mb": round(rss / 2**20, 1), "threads": threads, "open_files": files}


def _size_mb(path: Path) -> float:
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(dirpath, name))
            except OSError:
                pass
    return round(total / 2**20, 3)


class Soak:
    def __init__(self, args) -> None:
        self.args = args
        self.home = Path(args.home)
        self.home.mkdir(parents=True, exist_ok=True)
        self.broker = LocalBroker(self.home / "broker", free_port(), free_port())
        self.bootstrap = self.broker.bootstrap_servers
        run = f"{int(time.time())}"
        self.source = f"soak-in-{run}"
        self.pipelines = {
            "stateless": {"app": f"soak-stateless-{run}", "output": f"soak-out-stateless-{run}", "flags": []},
            "stateful": {
                "app": f"soak-stateful-{run}",
                "output": f"soak-out-stateful-{run}",
                # its ledger keeps 600 batches (10 minutes here; 10,000 by default): its bound shows
                "flags": ["--stateful", "--format-eos", "--ledger-retain", "600"],
            },
        }
        self.drivers: dict[str, DriverProcess] = {}
        self.samples: list[dict] = []
        self.faults: list[dict] = []
        self.feeder: Feeder | None = None

    def start_driver(self, name: str) -> None:
        p = self.pipelines[name]
        work = self.home / name
        work.mkdir(exist_ok=True)
        argv = [sys.executable, str(PIPELINE), "--bootstrap", self.bootstrap, "--app-id", p["app"]]
        argv += ["--input", self.source, "--output", p["output"], "--checkpoint", str(work / "ckpt")]
        argv += ["--summaries", str(work / "summaries.jsonl"), "--trigger-seconds", "1", *p["flags"]]
        env = {
            "EOS_PROCESSING_GUARANTEE": "exactly_once",
            "EOS_STATE_DIR": str(work / "state"),
            "EOS_SPARK_MASTER": "local[1, 4]",
            "EOS_LOG_LEVEL": "warning",
            # the Python path, whose workers the soak kills and samples (the table's run was on it)
            "EOS_DATA_PATH": "python",
        }
        self.drivers[name] = DriverProcess(argv, env=env, log_path=str(work / "driver.log"), cwd=ROOT)

    def sample(self, elapsed_s: float) -> None:
        row: dict = {"minute": round(elapsed_s / 60, 2)}
        for name, driver in self.drivers.items():
            for role, procs in _tree(driver.proc.pid).items():
                row[f"{name}.{role}"] = _usage(procs)
        broker_pid = self.broker.pid()
        if broker_pid is not None:
            row["broker"] = _usage([psutil.Process(broker_pid)])
        row["transactions"] = self._transactions()
        work = self.home / "stateful"
        row["stateful.state_mb"] = _size_mb(work / "state")
        row["stateful.ledger_mb"] = _size_mb(Path(_ledger.location_of(str(work / "ckpt"))))
        row["stateful.checkpoint_mb"] = _size_mb(work / "ckpt")
        row["stateless.checkpoint_mb"] = _size_mb(self.home / "stateless" / "ckpt")
        self.samples.append(row)
        log(json.dumps(row))

    def _transactions(self) -> dict[str, int]:
        """The apps' transactional ids and distinct producer ids, as the broker lists them."""
        config = eos.Config(bootstrap_servers=self.bootstrap, app_id="soak", output_topic="soak")
        try:
            header, rows = parse_tool_table(Broker(config, 30).transactions(["list"]))
        except Exception as exc:  # noqa: BLE001 - a broker mid-restart: a gap in the series, logged
            log(f"transactions not listed: {exc}")
            return {}
        ids, pids = header.index("TransactionalId"), header.index("ProducerId")
        mine = [r for r in rows if r[ids].startswith("soak-")]
        return {"transactional_ids": len(mine), "producer_ids": len({r[pids] for r in mine})}

    def fault(self, kind: str, elapsed_s: float, rng: random.Random) -> None:
        if kind == "broker_restart":
            self.broker.down()
            time.sleep(3)
            self.broker.up()
            self.faults.append({"minute": round(elapsed_s / 60, 2), "fault": kind})
        else:
            name = rng.choice(sorted(self.drivers))
            workers = [
                p for p in pyspark_python(self.drivers[name].proc.pid) if "pyspark.daemon" not in p.cmdline
            ]
            workers = workers or pyspark_python(self.drivers[name].proc.pid)
            if not workers:
                log(f"no Python worker of {name} to kill")
                return
            victim = rng.choice(workers)
            os.kill(victim.pid, signal.SIGKILL)
            self.faults.append({"minute": round(elapsed_s / 60, 2), "fault": kind, "pipeline": name})
        log(f"fault: {self.faults[-1]}")

    def caught_up(self) -> bool:
        ends = {p: len(v) for p, v in self.feeder.sent.items()}
        for p in self.pipelines.values():
            config = eos.Config(bootstrap_servers=self.bootstrap, app_id=p["app"], output_topic=p["output"])
            committed = _offsets.committed(config, [(self.source, q) for q in range(PARTITIONS)])
            if any(committed.get((self.source, q)) != ends[q] for q in range(PARTITIONS)):
                return False
        return True

    def run(self) -> dict:
        args = self.args
        rng = random.Random(args.seed)
        self.broker.up()
        testing.create_topic(self.bootstrap, self.source, PARTITIONS)
        for p in self.pipelines.values():
            testing.create_topic(self.bootstrap, p["output"], PARTITIONS)
        self.feeder = Feeder(self.bootstrap, self.source, args.rate)
        self.feeder.start()
        for name in self.pipelines:
            self.start_driver(name)
        started = time.monotonic()
        next_sample = 0.0
        next_restart = args.restart_minutes * 60
        next_kill = args.kill_minutes * 60
        while (elapsed := time.monotonic() - started) < args.minutes * 60:
            for name, driver in self.drivers.items():
                if not driver.running():
                    raise RuntimeError(f"pipeline {name} ended:\n{driver.log_tail()}")
            if elapsed >= next_sample:
                self.sample(elapsed)
                next_sample += args.sample_seconds
            if elapsed >= next_restart:
                self.fault("broker_restart", elapsed, rng)
                next_restart += args.restart_minutes * 60
            if elapsed >= next_kill:
                self.fault("python_worker_kill", elapsed, rng)
                next_kill += args.kill_minutes * 60
            time.sleep(1)
        self.feeder.stopped.set()
        self.feeder.join()
        deadline = time.monotonic() + 300
        while not self.caught_up():
            if time.monotonic() > deadline:
                raise RuntimeError("the pipelines did not catch up with the input within 300 s")
            time.sleep(2)
        for driver in self.drivers.values():
            driver.kill()
        return self.verdict()

    def verdict(self) -> dict:
        results = {}
        for name, p in self.pipelines.items():
            records, hanging = testing.read_topic(
                self.bootstrap, p["output"], marker=testing.write_markers(self.bootstrap, p["output"])
            )
            counts = testing.expected_running_counts(self.feeder.sent) if name == "stateful" else None
            result = testing.compare(
                testing.flatten(self.feeder.sent), records, hanging, running_counts=counts
            )
            results[name] = {
                "records_in": sum(len(v) for v in self.feeder.sent.values()),
                "received": result.received,
                "missing": result.missing,
                "duplicated": result.duplicated,
                "out_of_order": result.out_of_order,
                "state_mismatches": result.state_mismatches,
                "hanging": list(result.hanging_partitions),
                "exactly_once": result.exactly_once and result.state_mismatches == 0,
                "batches": _batches(self.home / name),
            }
        return {"outputs": results, "growth": growth(self.samples, self.args.warmup_minutes)}


def _batches(work: Path) -> int:
    """The batches a pipeline wrote: its summaries (foreachBatch), or its ledger's last (format("eos"))."""
    summaries = work / "summaries.jsonl"
    if summaries.exists():
        return sum(1 for _ in open(summaries))
    try:
        ids = _ledger.batch_ids(_ledger.location_of(str(work / "ckpt")))
    except FileNotFoundError:
        return 0
    return ids[-1] + 1 if ids else 0


def _series(samples: list[dict]) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for row in samples:
        for key, value in row.items():
            if isinstance(value, dict):
                for field, number in value.items():
                    out.setdefault(f"{key}.{field}", []).append((row["minute"], float(number)))
            elif key != "minute":
                out.setdefault(key, []).append((row["minute"], float(value)))
    return out


def growth(samples: list[dict], warmup_minutes: float) -> dict[str, dict]:
    """Per series, after the warm-up: the least-squares slope per hour, its median in the middle and the
    last third, and whether it grew (last third more than GROWTH above the middle one)."""
    out = {}
    for name, points in sorted(_series(samples).items()):
        points = [(t, v) for t, v in points if t >= warmup_minutes]
        if len(points) < 6:
            continue
        ts, vs = [t for t, _ in points], [v for _, v in points]
        t_mean, v_mean = statistics.fmean(ts), statistics.fmean(vs)
        denominator = sum((t - t_mean) ** 2 for t in ts) or 1.0
        slope = sum((t - t_mean) * (v - v_mean) for t, v in points) / denominator * 60
        third = len(vs) // 3
        middle, last = statistics.median(vs[third : 2 * third]), statistics.median(vs[2 * third :])
        grew = last > middle * (1 + GROWTH) + (
            1 if "files" in name or "threads" in name or "ids" in name else 0.01
        )
        out[name] = {
            "slope_per_hour": round(slope, 3),
            "mean": round(v_mean, 3),
            "middle_third_median": middle,
            "last_third_median": last,
            "grew": grew,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=35)
    parser.add_argument("--rate", type=int, default=200, help="input records/s")
    parser.add_argument("--sample-seconds", type=float, default=60)
    parser.add_argument("--restart-minutes", type=float, default=10, help="a broker restart every N minutes")
    parser.add_argument(
        "--kill-minutes", type=float, default=7, help="a Python worker SIGKILLed every N minutes"
    )
    parser.add_argument("--warmup-minutes", type=float, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--home", default=os.path.join(os.environ.get("EOS_CACHE", ".cache"), "soak"))
    parser.add_argument("--report", default="reports/soak.json")
    args = parser.parse_args(argv)
    soak = Soak(args)

    def stop() -> None:
        if soak.feeder is not None:
            soak.feeder.stopped.set()
        for driver in soak.drivers.values():
            driver.kill()
        soak.broker.down()

    started = time.monotonic()
    try:
        with stopping(stop):
            verdict = soak.run()
    except Interrupted as exc:
        log(f"{exc}: stopped the drivers and the broker this run started")
        return exc.exit_code
    report = {
        "minutes": args.minutes,
        "rate": args.rate,
        "faults": soak.faults,
        "samples": soak.samples,
        **verdict,
        "wall_seconds": round(time.monotonic() - started, 1),
    }
    Path(args.report).parent.mkdir(parents=True, exist_ok=True)
    Path(args.report).write_text(json.dumps(report, indent=2) + "\n")
    for name, result in verdict["outputs"].items():
        log(f"{name}: {json.dumps(result)}")
    grew = [name for name, g in verdict["growth"].items() if g["grew"]]
    for name, g in verdict["growth"].items():
        log(f"{name}: {json.dumps(g)}")
    log(f"report: {args.report}; faults: {len(soak.faults)}; grew: {grew or 'nothing'}")
    failed = grew or not all(r["exactly_once"] for r in verdict["outputs"].values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
