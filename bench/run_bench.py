"""`make bench`: what exactly-once costs, measured side by side in one run on one local broker.

Kafka -> Kafka throughput over the same pre-loaded input, for Spark's own `.format("kafka")` sink
(the baseline), eos at_least_once, eos exactly_once, eos exactly_once with a stateful `process`, a
plain confluent-kafka transactional loop (no Spark) and Quix Streams exactly-once; every row runs
`--runs` times, interleaved, and each eos row's read_committed output count must equal the input
count. Also: end-to-end latency at a 1 s trigger, transaction commit times, the peak RSS of the
Python workers at 1x and 10x batch size, and the changelog restore rate of a 1,000,000-key store.

    python -m bench.run_bench [--records 2000000] [--runs 3] [--batch 200000] [--out reports]

Writes `reports/bench.json` and `reports/bench.png` and prints the tables. Environment knobs (as
`make bench` passes them): BENCH_RECORDS, BENCH_RUNS, BENCH_BATCH, BENCH_RESTORE_KEYS,
BENCH_LATENCY_SECONDS, BENCH_LATENCY_RATE, BENCH_PROFILE (py-spy the workers of one eos run).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from functools import partial
from pathlib import Path

import attrs
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

import eos
from bench import bench_report as report
from eos import testing
from eos.session import free_port
from examples.pipeline import append_summary, count_per_key, count_per_key_batch
from tests.support.localbroker import LocalBroker
from tests.support.processes import (
    Interrupted,
    descendants,
    processes,
    pyspark_python,
    signal_all,
    stopping,
    threads_and_rss,
)

#: the repository: the Python rows run `python -m bench.run_bench` from here
ROOT = Path(__file__).resolve().parents[1]
PARTITIONS = 4
VALUE_BYTES = 100
KEYS = 10_000
#: eos's default, for the eos rows and the plain transactional loop alike
COMMIT_EVERY = attrs.fields(eos.Config).commit_every.default


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# -- data ---------------------------------------------------------------------------------------------


def fill_input(bootstrap: str, topic: str, records: int) -> None:
    """`records` values of VALUE_BYTES bytes, keys k0..k9999, round-robin over PARTITIONS."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000})
    pad = b"x" * VALUE_BYTES
    for i in range(records):
        value = (b"%012d|" % i + pad)[:VALUE_BYTES]
        while True:
            try:
                producer.produce(topic, value, b"k%d" % (i % KEYS), partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError("input not delivered")


def count_committed(bootstrap: str, topic: str, timeout: float = 300) -> int:
    """Records a read_committed consumer sees in `topic`, read to the end of every partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-count-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.max.bytes": 52_428_800,
        }
    )
    try:
        parts = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
        consumer.assign([TopicPartition(topic, p, 0) for p in parts if ends[p] > 0])
        waiting = {p for p in parts if ends[p] > 0}
        count = 0
        deadline = time.monotonic() + timeout
        while waiting and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 0.5):
                err = msg.error()
                if err is None:
                    count += 1
                elif err.code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= ends[msg.partition()]:
                        waiting.discard(msg.partition())
                else:
                    raise KafkaException(err)
        if waiting:
            raise TimeoutError(f"{topic}: partitions {sorted(waiting)} not read to the end in {timeout}s")
        return count
    finally:
        consumer.close()


def wait_for_group_coordinators(bootstrap: str, topic: str, timeout: float = 120) -> None:
    """Commit an offset for a few groups until each succeeds: __consumer_offsets exists and is loaded.

    Before that, an admin ListConsumerGroupOffsets (eos._kafka._offsets.committed) can get an OffsetFetch
    error that librdkafka 2.12.1 handles by touching the consumer-group state an admin client does not have:
    a segfault in rd_kafka_cgrp_op (seen here, right after a fresh broker started).
    """
    deadline = time.monotonic() + timeout
    for i in range(8):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-coordinator-{i}"})
        try:
            while True:
                try:
                    consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
                    break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        finally:
            consumer.close()


def delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        for f in admin.delete_topics([topic], operation_timeout=30).values():
            f.result(60)
    except Exception as exc:  # noqa: BLE001 - disk hygiene only
        log(f"could not delete {topic}: {exc}")


# -- executor-side helpers (pickled by value: this file runs as __main__) --------------------------------


@contextlib.contextmanager
def patched(module, name: str, value):
    """`module.name` replaced by `value` for the block (a bench row's variant of the sink)."""
    original = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, original)


class CommitLog:
    """`on_commit`: one JSON line per committed transaction, from whichever worker committed it."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, commit) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps({"s": commit.seconds, "records": commit.records, "pid": os.getpid()}) + "\n")


# -- worker memory ------------------------------------------------------------------------------------


class WorkerRss:
    """Samples the RSS of this process's PySpark Python workers (its descendants running pyspark)."""

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> WorkerRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def peak_mib(self) -> float:
        return round(self.peak_kib / 1024, 1)

    def _run(self) -> None:
        while not self._stop.is_set():
            for proc in pyspark_python(os.getpid()):
                usage = threads_and_rss(proc.pid)
                if usage is not None:
                    self.peak_kib = max(self.peak_kib, usage[1] // 1024)
            self._stop.wait(self.interval)


# -- profiles ---------------------------------------------------------------------------------------


def _worker_daemons() -> list[int]:
    """pids of the pyspark.daemon processes under this process (the parents of its Python workers,
    which the daemon forks with its own command line)."""
    table = processes()
    return [
        p.pid
        for p in descendants(os.getpid(), table)
        if "pyspark.daemon" in p.cmdline and p.ppid in table and table[p.ppid].cmdline != p.cmdline
    ]


class Profiler:
    """py-spy over the Python workers of one run (BENCH_PROFILE=<row>): collapsed stacks, then the
    functions with the most samples (self and inclusive)."""

    def __init__(self, row: str, out_dir: Path) -> None:
        self.path = out_dir / f"profile-{row}.txt"
        self.procs = []
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        for i, pid in enumerate(_worker_daemons()):
            argv = [
                spy,
                "record",
                "--pid",
                str(pid),
                "--subprocesses",
                "--rate",
                "100",
                "--nonblocking",
                "--function",
            ]
            argv += ["--format", "raw", "--output", f"{self.path}.{i}"]
            self.procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        if not self.procs:
            log("profile: no pyspark.daemon found (workers start with the first Python task)")

    def stop(self, seconds: float) -> dict:
        for proc in self.procs:
            proc.send_signal(signal.SIGINT)
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        stacks: list[tuple[list[str], int]] = []
        for i in range(len(self.procs)):
            part = Path(f"{self.path}.{i}")
            if part.exists():
                for line in part.read_text().splitlines():
                    stack, _, count = line.rpartition(" ")
                    if stack and count.isdigit():
                        stacks.append((stack.split(";"), int(count)))
                part.unlink()
        with open(self.path, "w") as f:
            for frames, count in stacks:
                f.write(";".join(frames) + f" {count}\n")
        summary = report.profile_summary(stacks, seconds, rate=100)
        log(f"profile: {summary['samples']} samples in {self.path}; top self: {summary['top_self'][:5]}")
        return summary


# -- the rows -----------------------------------------------------------------------------------------


class Bench:
    def __init__(self, args, bootstrap: str, work: Path) -> None:
        self.args = args
        self.bootstrap = bootstrap
        self.work = work
        self.spark = None
        self.connect = None
        self.input_topic = "bench-in"
        self.commit_seconds: dict[str, list[float]] = {}
        #: the next eos run is profiled (an extra run after the rounds: py-spy slows the workers)
        self.profiling = False
        #: runs keep their batches' progress (rows and durations): `--split`
        self.keep_progress = False

    def session(self, connect: bool = False):
        """One JVM for both APIs: the local Spark Connect server runs in the classic session's JVM, so
        the classic and the Connect rows share executors, Python workers and JIT warmth."""
        if self.spark is None:
            self.connect = eos.spark_session("eos-bench", remote="local")
            self.spark = eos.spark_session("eos-bench")
        return self.connect if connect else self.spark

    def config(self, row: str, guarantee: str, **kw) -> eos.Config:
        return eos.Config(
            bootstrap_servers=self.bootstrap,
            app_id=f"{row}-{uuid.uuid4().hex[:8]}",
            output_topic=kw.pop("output_topic", None),
            processing_guarantee=guarantee,
            commit_every=COMMIT_EVERY,
            state_dir=str(self.work / "state"),
            **kw,
        )

    def new_output(self, row: str) -> str:
        topic = f"bench-out-{row}-{uuid.uuid4().hex[:6]}"
        testing.create_topic(self.bootstrap, topic, PARTITIONS)
        return topic

    def run_row(self, row: str, rnd: int) -> dict:
        out = self.new_output(row)
        try:
            fn = getattr(self, f"row_{row}")
            result = fn(out)
            seen = count_committed(self.bootstrap, out)
            result.update(round=rnd, output_count=seen, input_count=self.args.records)
            expected = self.expected_output(row)
            ok = seen == expected
            if not ok:
                result["error"] = f"output has {seen} records (read_committed), expected {expected}"
            result["records_per_s"] = self.args.records / result["seconds"] if ok else None
            return result
        except Exception as exc:  # noqa: BLE001 - a broken row is reported, the others still run
            log(f"{row} failed: {type(exc).__name__}: {exc}")
            return {"round": rnd, "records_per_s": None, "error": f"{type(exc).__name__}: {exc}"[:2000]}
        finally:
            delete_topic(self.bootstrap, out)

    def expected_output(self, row: str) -> int:
        """Output records a row must leave: one per input record, or for the aggregation rows one per
        key and batch (each batch of >= KEYS records holds every key: keys are i % KEYS)."""
        if row.startswith("agg_"):
            assert self.args.batch >= KEYS, "the aggregation rows need batches of at least KEYS records"
            return KEYS * -(-self.args.records // self.args.batch)
        return self.args.records

    # Spark rows: same session, same source options, availableNow with the same batch size.

    def _source(self, config: eos.Config, batch: int | None = None, connect: bool = False):
        return eos.read_stream(
            self.session(connect), config, [self.input_topic], maxOffsetsPerTrigger=batch or self.args.batch
        )

    def _run_query(self, writer, profile: str | None = None) -> dict:
        ckpt = self.work / f"ckpt-{uuid.uuid4().hex[:8]}"
        with WorkerRss() as rss:
            spy = Profiler(profile, Path(self.args.out)) if profile else None
            t0 = time.perf_counter()
            query = writer.option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start()
            query.awaitTermination()
            seconds = time.perf_counter() - t0
        shutil.rmtree(ckpt, ignore_errors=True)
        result = {"seconds": seconds, "worker_rss_peak_mib": rss.peak_mib}
        if self.keep_progress:
            result["progress"] = report.first_marked(
                [report.batch_point(p) for p in query.recentProgress if p.numInputRows]
            )
        if spy is not None:
            result["profile"] = spy.stop(seconds)
        return result

    def row_spark_kafka_sink(self, out: str) -> dict:
        config = self.config("spark-sink", "at_least_once", output_topic=out)
        df = self._source(config).select("key", "value")
        writer = (
            df.writeStream.format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("topic", out)
        )
        return self._run_query(writer)

    def _aggregation(self, config: eos.Config):
        """Rows 7 and 7e: the running count per key, in update mode, as the value."""
        counts = self._source(config).groupBy("key").count()
        return counts.selectExpr("key", "CAST(CAST(count AS STRING) AS BINARY) AS value")

    def row_agg_spark_kafka_sink(self, out: str) -> dict:
        config = self.config("agg-spark-sink", "at_least_once", output_topic=out)
        writer = (
            self._aggregation(config)
            .writeStream.format("kafka")
            .outputMode("update")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("topic", out)
        )
        return self._run_query(writer)

    def row_agg_eos_exactly_once(self, out: str) -> dict:
        # One part per core, as a deployment would set it: more parts than cores run in waves.
        parts = os.cpu_count() or 2
        config = self.config("agg-eos", "exactly_once", output_topic=out, input_mode="any", parts=parts)
        summaries = self.work / f"summaries-{uuid.uuid4().hex[:8]}.jsonl"
        sink = eos.sink(config, on_batch=partial(append_summary, str(summaries)))
        writer = self._aggregation(config).writeStream.outputMode("update").foreachBatch(sink)
        result = self._run_query(writer, "agg_eos_exactly_once" if self.profiling else None)
        history = [json.loads(line) for line in summaries.read_text().splitlines() if line]
        summaries.unlink()
        result.update(batches=len(history), transactions=sum(s["transactions"] for s in history))
        return result

    def _eos_row(
        self,
        row: str,
        out: str,
        guarantee: str,
        batch: int | None = None,
        stateful: str | None = None,
        connect: bool = False,
        **settings,
    ) -> dict:
        """`stateful`: None, "rows" (process, one row at a time) or "batch" (process_batch); `settings`:
        more Config fields."""
        config = self.config(row, guarantee, output_topic=out, **settings)
        commits = self.work / f"commits-{uuid.uuid4().hex[:8]}.jsonl"
        summaries = self.work / f"summaries-{uuid.uuid4().hex[:8]}.jsonl"
        kw = {}
        if stateful == "rows":
            kw = {"process": count_per_key, "stores": {"counts": "json"}}
        elif stateful == "batch":
            kw = {"process_batch": count_per_key_batch, "stores": {"counts": "json"}}
        sink = eos.sink(
            config, on_commit=CommitLog(str(commits)), on_batch=partial(append_summary, str(summaries)), **kw
        )
        profile = row if self.profiling else None
        source = self._source(config, batch, connect)
        result = self._run_query(source.writeStream.foreachBatch(sink), profile)
        seconds, history = [], []
        if commits.exists():
            seconds = [json.loads(line)["s"] for line in commits.read_text().splitlines() if line]
            commits.unlink()
        if summaries.exists():
            history = [json.loads(line) for line in summaries.read_text().splitlines() if line]
            summaries.unlink()
        self.commit_seconds.setdefault(row, []).extend(seconds)
        result.update(
            batches=len(history),
            transactions=sum(s["transactions"] for s in history),
            regrouped_batches=sum(1 for s in history if s["regrouped"]),
            commit_p50_ms=_ms(report.percentile(seconds, 50)),
            commit_p99_ms=_ms(report.percentile(seconds, 99)),
        )
        return result

    def row_eos_at_least_once(self, out: str) -> dict:
        return self._eos_row("eos_at_least_once", out, "at_least_once")

    def row_eos_exactly_once(self, out: str) -> dict:
        return self._eos_row("eos_exactly_once", out, "exactly_once")

    def row_eos_exactly_once_loop(self, out: str) -> dict:
        """Row 3 with one confluent-kafka produce() per record instead of the Arrow columns handed to
        librdkafka whole: what eos/_kafka/_rdkafka.py is worth."""
        return self._eos_row("eos_exactly_once_loop", out, "exactly_once", arrow_produce=False)

    def row_eos_exactly_once_stateful(self, out: str) -> dict:
        return self._eos_row("eos_exactly_once_stateful", out, "exactly_once", stateful="rows")

    def row_eos_exactly_once_stateful_batch(self, out: str) -> dict:
        return self._eos_row("eos_exactly_once_stateful_batch", out, "exactly_once", stateful="batch")

    def row_eos_exactly_once_connect(self, out: str) -> dict:
        return self._eos_row("eos_exactly_once_connect", out, "exactly_once", connect=True)

    def row_eos_exactly_once_regrouped(self, out: str) -> dict:
        """Row 3 regrouped (shuffle and sort), its rows checked against eos_input: what a batch pays that
        the Kafka source split, or a shuffled or filtered query under Spark Connect."""
        from eos._core import _input

        sink = importlib.import_module("eos.sink")  # the module (`eos.sink` is the function)

        def regrouped(lineage, dtypes):
            return _input.Provenance(column=_input.INPUT_COLUMN), True

        with patched(sink, "input_provenance", regrouped):
            return self._eos_row("eos_exactly_once_regrouped", out, "exactly_once")

    def row_eos_exactly_once_input_column(self, out: str) -> dict:
        """Row 3 with the rows checked against eos_input (as Connect and format("eos") check them), not
        against the lineage, and not regrouped: the cost of carrying and comparing the column."""
        from eos._core import _input

        sink = importlib.import_module("eos.sink")  # the module (`eos.sink` is the function)

        def by_column(lineage, dtypes):
            return _input.Provenance(column=_input.INPUT_COLUMN), False

        with patched(sink, "input_provenance", by_column):
            return self._eos_row("eos_exactly_once_input_column", out, "exactly_once")

    def row_eos_exactly_once_unchecked(self, out: str) -> dict:
        """Row 3 with no input-coordinate check at all (eos before step 0): what rows 3 and 3i cost
        more is the check's cost."""
        import attrs

        sink = importlib.import_module("eos.sink")

        def unchecked(**fields):
            return attrs.evolve(job(**fields), provenance=None)

        job = sink.Job
        with patched(sink, "Job", unchecked):
            return self._eos_row("eos_exactly_once_unchecked", out, "exactly_once")

    def row_eos_exactly_once_format(self, out: str) -> dict:
        """Row 3 written with `df.writeStream.format("eos")` instead of `foreachBatch(eos.sink(...))`."""
        config = self.config("eos_exactly_once_format", "exactly_once", output_topic=out)
        writer = self._source(config).writeStream.format("eos")
        options = {
            "kafka.bootstrap.servers": self.bootstrap,
            "topic": out,
            "eos.app.id": config.app_id,
            "eos.processing.guarantee": "exactly_once",
            "eos.commit.every": str(COMMIT_EVERY),
            "eos.state.dir": config.state_dir,
        }
        for key, value in options.items():
            writer = writer.option(key, value)
        return self._run_query(writer, "eos_exactly_once_format" if self.profiling else None)

    def row_eos_exactly_once_10x_batch(self, out: str) -> dict:
        return self._eos_row("eos_exactly_once_10x_batch", out, "exactly_once", batch=10 * self.args.batch)

    # -- the cost split --------------------------------------------------------------------------------

    def split(self) -> dict:
        """Spark's sink and eos exactly_once over the same input at each of `--split-batches` records per
        trigger, interleaved: every batch's rows and durations (Spark's own progress), then per sink a
        line fitted through them: a cost per batch and a cost per record (`bench_report.cost_split`)."""
        rows = ("spark_kafka_sink", "eos_exactly_once")
        sizes = self.args.split_batches
        most = -(-self.args.records // min(sizes))
        self.session().conf.set("spark.sql.streaming.numRecentProgressUpdates", str(max(100, most + 10)))
        saved, self.keep_progress = self.args.batch, True
        runs: list[dict] = []
        try:
            for rnd in range(self.args.runs):
                order = [(size, row) for size in sizes for row in rows]
                for size, row in order if rnd % 2 == 0 else reversed(order):
                    self.args.batch = size
                    res = self.run_row(row, rnd)
                    runs.append({"row": row, "batch_records": size, **res})
                    in_batches = sum(b["triggerExecution"] for b in res.get("progress", [])) / 1000
                    rate = report.fmt_rate(res.get("records_per_s"))
                    log(
                        f"split round {rnd} {row} at {size:,}/trigger: {rate}"
                        f" records/s, {len(res.get('progress', []))} batches, {in_batches:.1f}s of"
                        f" {res.get('seconds', 0):.1f}s in batches"
                        + (f" ERROR {res['error'][:300]}" if "error" in res else "")
                    )
        finally:
            self.args.batch, self.keep_progress = saved, False
        fits = {
            row: report.cost_split(
                [b for r in runs if r["row"] == row and "error" not in r for b in r.get("progress", [])]
            )
            for row in rows
        }
        return {"batch_records": sizes, "runs": runs, "fits": fits}

    # Python rows: their own process each, so nothing of the Spark driver is shared.

    def _child(self, kind: str, out: str) -> dict:
        argv = [sys.executable, "-m", "bench.run_bench", kind, self.bootstrap, self.input_topic, out]
        argv.append(str(self.args.records))
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=3600, cwd=ROOT)
        if proc.returncode != 0:
            raise RuntimeError(f"{kind} exited {proc.returncode}: {proc.stderr[-1500:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def row_python_loop_exactly_once(self, out: str) -> dict:
        return self._child("--child-loop", out)

    def row_quixstreams_exactly_once(self, out: str) -> dict:
        if self.args.quix_unavailable:
            raise RuntimeError(self.args.quix_unavailable)
        return self._child("--child-quix", out)

    def warm_up(self, max_runs: int = 6) -> list[dict]:
        """JVM, Python workers and connections warmed before the first measured run (not counted).

        Spark's sink is JIT-compiled as it runs: the baseline rose from 90k to 188k records/s over the
        three rounds of an earlier bench, and from 202k to 333k after a warm-up on a fifth of the input.
        So it runs on the whole input until two runs in a row agree within 5 % (at least 3, at most
        `max_runs`), then every eos path runs once; every warm-up run is reported."""
        done: list[dict] = []

        def once(row: str) -> float:
            out = self.new_output(f"warm-{row}")
            try:
                seconds = getattr(self, f"row_{row}")(out)["seconds"]
            finally:
                delete_topic(self.bootstrap, out)
            rate = self.args.records / seconds
            done.append({"row": row, "records_per_s": rate})
            log(f"warm-up {row}: {rate:,.0f} records/s")
            return rate

        rates: list[float] = []
        while len(rates) < max_runs:
            rates.append(once("spark_kafka_sink"))
            if len(rates) >= 3 and abs(rates[-1] - rates[-2]) <= 0.05 * max(rates[-2:]):
                break
        for row in (
            "eos_exactly_once",
            "eos_exactly_once_connect",
            "eos_exactly_once_stateful_batch",
            "eos_exactly_once_format",
        ):
            once(row)
        self.commit_seconds.clear()
        return done

    # -- latency ---------------------------------------------------------------------------------------

    def latency(self, row: str) -> dict:
        """A 1 s trigger under a steady input rate: produce time (in the value) -> visible read_committed."""
        topic_in = f"bench-lat-in-{uuid.uuid4().hex[:6]}"
        testing.create_topic(self.bootstrap, topic_in, PARTITIONS)
        out = self.new_output(f"lat-{row}")
        guarantee = "exactly_once" if row == "eos_exactly_once" else "at_least_once"
        config = self.config(f"lat-{row}", guarantee, output_topic=out)
        df = eos.read_stream(self.session(), config, [topic_in])
        if row == "spark_kafka_sink":
            writer = (
                df.select("key", "value")
                .writeStream.format("kafka")
                .option("kafka.bootstrap.servers", self.bootstrap)
                .option("topic", out)
            )
        else:
            writer = df.writeStream.foreachBatch(eos.sink(config))
        ckpt = self.work / f"ckpt-lat-{uuid.uuid4().hex[:8]}"
        query = writer.option("checkpointLocation", str(ckpt)).trigger(processingTime="1 second").start()
        samples: list[float] = []
        stop = threading.Event()
        reader = threading.Thread(
            target=_read_latencies, args=(self.bootstrap, out, samples, stop), daemon=True
        )
        reader.start()
        try:
            time.sleep(5)  # the query's first (empty) batches
            rate, seconds, warmup = self.args.latency_rate, self.args.latency_seconds, 5.0
            producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
            t0 = time.monotonic()
            sent, warm_index = 0, int(rate * warmup)
            pad = b"x" * VALUE_BYTES
            while (elapsed := time.monotonic() - t0) < seconds + warmup:
                due = int(elapsed * rate)
                while sent < due:
                    value = (b"%020d|%d|" % (time.time_ns(), 1 if sent >= warm_index else 0) + pad)[
                        :VALUE_BYTES
                    ]
                    producer.produce(topic_in, value, b"k%d" % (sent % KEYS), partition=sent % PARTITIONS)
                    sent += 1
                producer.poll(0)
                time.sleep(0.002)
            producer.flush(30)
            expected = sent - warm_index
            deadline = time.monotonic() + 60
            while len(samples) < expected and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            stop.set()
            query.stop()
            reader.join(10)
            shutil.rmtree(ckpt, ignore_errors=True)
            delete_topic(self.bootstrap, topic_in)
            delete_topic(self.bootstrap, out)
        result = report.latency_summary(samples)
        result.update(expected=expected, rate_per_s=rate, seconds=seconds, guarantee=guarantee)
        return result

    # -- restore ---------------------------------------------------------------------------------------

    def restore(self) -> dict:
        """A store of `restore_keys` keys rebuilt from its changelog into an empty state directory,
        per state mode, interleaved."""
        from eos._core._scope import PartitionScope
        from eos._kafka._changelog import ensure_changelog
        from eos._log import get_logger
        from eos._names import INPUT_OFFSET_HEADER
        from eos.state._partition import PartitionState

        keys = self.args.restore_keys
        order = list(range(keys))
        if self.args.restore_order == "random":  # keys as a hash spreads them, not in their B-tree order
            random.Random(7).shuffle(order)
        source = f"bench-restore-in-{uuid.uuid4().hex[:6]}"
        testing.create_topic(self.bootstrap, source, 1)
        base = self.config("restore", "exactly_once", output_topic=source)
        changelog = ensure_changelog(base, source, "big").name
        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "transactional.id": f"{changelog}-filler", "linger.ms": 20}
        )
        producer.init_transactions(30)
        t0 = time.perf_counter()
        for start in range(0, keys, 50_000):
            producer.begin_transaction()
            for i in order[start : start + 50_000]:
                while True:
                    try:
                        producer.produce(
                            changelog, b"%d" % i, b"key%d" % i, partition=0,
                            headers=[(INPUT_OFFSET_HEADER, b"%d" % i)],
                        )  # fmt: skip
                        break
                    except BufferError:
                        producer.poll(0.05)
            producer.commit_transaction(60)
        log(f"restore: changelog of {keys:,} keys written in {time.perf_counter() - t0:.1f}s")
        modes: dict[str, list[float]] = {"wipe": [], "transactional": []}
        for _ in range(self.args.runs):
            for mode in modes:
                state_dir = self.work / f"restore-{mode}-{uuid.uuid4().hex[:6]}"
                config = attrs.evolve(base, state_mode=mode, state_dir=str(state_dir))
                state = PartitionState(
                    PartitionScope(config, source, 0, 0, None, get_logger(bench="restore")),
                    {"big": eos.StoreSpec()},
                )
                t = time.perf_counter()
                state.open(None)
                seconds = time.perf_counter() - t
                restored = state.restored
                state.close()
                shutil.rmtree(state_dir, ignore_errors=True)
                if restored != keys:
                    raise RuntimeError(f"restore ({mode}) read {restored} records, expected {keys}")
                modes[mode].append(keys / seconds)
                log(f"restore {mode}: {keys / seconds:,.0f} records/s")
        delete_topic(self.bootstrap, changelog)
        delete_topic(self.bootstrap, source)
        return {
            "keys": keys,
            "modes": {
                m: {"records_per_s": v, "median_records_per_s": report.median(v)} for m, v in modes.items()
            },
        }


def measured(what: str, fn) -> dict:
    """`fn()`, or its error: a broken measurement after the rounds must not take their results with it
    (a restore that failed once lost a whole run's report)."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - reported in bench.json and the log
        log(f"{what} failed: {type(exc).__name__}: {exc}")
        return {"error": f"{type(exc).__name__}: {exc}"[:2000]}


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


def _read_latencies(bootstrap: str, topic: str, samples: list[float], stop: threading.Event) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-lat-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 10,
        }
    )
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            for msg in consumer.consume(1000, 0.1):
                if msg.error() is None:
                    now = time.time_ns()
                    value = msg.value()
                    produced, _, rest = value.partition(b"|")
                    if rest[:1] == b"1":
                        samples.append((now - int(produced)) / 1e6)
    finally:
        consumer.close()


# -- child processes: the rows without Spark ------------------------------------------------------------


def child_loop(bootstrap: str, topic_in: str, topic_out: str, records: int) -> dict:
    """Row 5: one Python process, consume -> produce -> send_offsets -> commit every COMMIT_EVERY records."""
    group = f"bench-loop-{uuid.uuid4().hex[:8]}"
    t0 = time.perf_counter()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": group,
            "linger.ms": 5,
            "partitioner": "murmur2_random",
        }
    )
    producer.init_transactions(30)
    consumer.assign([TopicPartition(topic_in, p, 0) for p in range(PARTITIONS)])
    done, in_txn, commits = 0, 0, []
    producer.begin_transaction()
    while done < records:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is not None:
                raise KafkaException(msg.error())
            while True:
                try:
                    producer.produce(topic_out, msg.value(), msg.key())
                    break
                except BufferError:
                    producer.poll(0.05)
            done += 1
            in_txn += 1
            if in_txn >= COMMIT_EVERY or done == records:
                t = time.perf_counter()
                producer.send_offsets_to_transaction(
                    consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
                )
                producer.commit_transaction(60)
                commits.append(time.perf_counter() - t)
                in_txn = 0
                if done < records:
                    producer.begin_transaction()
        producer.poll(0)
    seconds = time.perf_counter() - t0
    consumer.close()
    return {
        "seconds": seconds,
        "transactions": len(commits),
        "commit_p50_ms": _ms(report.percentile(commits, 50)),
        "commit_p99_ms": _ms(report.percentile(commits, 99)),
    }


def child_quix(bootstrap: str, topic_in: str, topic_out: str, records: int) -> dict:
    """Row 6: Quix Streams' exactly-once Application, pass-through, its defaults otherwise."""
    import logging

    from quixstreams import Application

    t0 = time.perf_counter()
    app = Application(
        broker_address=bootstrap,
        consumer_group=f"bench-quix-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        processing_guarantee="exactly-once",
        loglevel=logging.WARNING,
        auto_create_topics=False,
        use_changelog_topics=False,
    )
    src = app.topic(topic_in, key_deserializer="bytes", value_deserializer="bytes")
    dst = app.topic(topic_out, key_serializer="bytes", value_serializer="bytes")
    app.dataframe(src).to_topic(dst)
    app.run(count=records, collect=False)
    return {"seconds": time.perf_counter() - t0}


# -- main ------------------------------------------------------------------------------------------------


def machine_facts() -> dict:
    import confluent_kafka
    import pyspark

    facts = {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "pyspark": pyspark.__version__,
        "confluent_kafka": confluent_kafka.version(),
        "librdkafka": confluent_kafka.libversion()[0],
        "kafka_broker": "4.1.1 (KRaft, single node, local jars)",
        "eos": _git_head(),
    }
    try:
        with open("/proc/meminfo") as f:
            facts["memory_gib"] = round(int(f.readline().split()[1]) / 1024 / 1024, 1)
        with open("/proc/cpuinfo") as f:
            facts["cpu"] = next(
                (ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), None
            )
    except OSError:
        pass
    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
        facts["java"] = java
    except (OSError, IndexError):
        pass
    try:
        from importlib.metadata import version

        facts["quixstreams"] = version("quixstreams")
    except Exception:  # noqa: BLE001 - not installed
        pass
    return facts


def _git_head() -> str | None:
    try:
        return subprocess.run(
            ["git", "-C", str(Path(__file__).parent), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return None


def quix_problem() -> str | None:
    """Why Quix Streams cannot run here, if it cannot (checked in a child: the driver never imports it)."""
    proc = subprocess.run([sys.executable, "-c", "import quixstreams"], capture_output=True, text=True)
    if proc.returncode != 0:
        return f"not installable/importable: {proc.stderr.strip().splitlines()[-1] if proc.stderr else ''}"
    return None


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] in ("--child-loop", "--child-quix"):
        kind, bootstrap, topic_in, topic_out, records = sys.argv[1:6]
        fn = child_loop if kind == "--child-loop" else child_quix
        print(json.dumps(fn(bootstrap, topic_in, topic_out, int(records))))
        return 0
    os.environ.setdefault("EOS_LOG_LEVEL", "warning")  # driver and workers: no per-batch info lines
    env = os.environ.get
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=int(env("BENCH_RECORDS") or 2_000_000))
    parser.add_argument("--runs", type=int, default=int(env("BENCH_RUNS") or 3))
    parser.add_argument(
        "--batch", type=int, default=int(env("BENCH_BATCH") or 200_000), help="maxOffsetsPerTrigger"
    )
    parser.add_argument("--restore-keys", type=int, default=int(env("BENCH_RESTORE_KEYS") or 1_000_000))
    parser.add_argument(
        "--restore-order",
        choices=("sequential", "random"),
        default=env("BENCH_RESTORE_ORDER") or "sequential",
        help="the order the changelog holds the keys in (sequential: key0, key1, ...)",
    )
    parser.add_argument("--latency-seconds", type=float, default=float(env("BENCH_LATENCY_SECONDS") or 30))
    parser.add_argument("--latency-rate", type=int, default=int(env("BENCH_LATENCY_RATE") or 2000))
    parser.add_argument("--rows", default=env("BENCH_ROWS") or ",".join(r for r, _ in report.ROWS))
    parser.add_argument("--skip", default=env("BENCH_SKIP") or "", help="comma list: split,latency,restore")
    parser.add_argument(
        "--split-batches",
        type=lambda text: [int(n) for n in text.split(",")],
        default=env("BENCH_SPLIT_BATCHES") or "20000,200000,2000000",
        help="records per trigger for the cost split (comma list)",
    )
    parser.add_argument(
        "--profile",
        default=env("BENCH_PROFILE") or "eos_exactly_once",
        help="eos row to run once more under py-spy, uncounted ('none': no profile)",
    )
    parser.add_argument("--out", default=env("BENCH_OUT") or "reports")
    args = parser.parse_args()
    args.quix_unavailable = quix_problem()
    if args.profile == "none":
        args.profile = ""
    rows = [r for r in args.rows.split(",") if r]
    skip = set(args.skip.split(","))
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="eos-bench-", dir=os.environ.get("EOS_CACHE")))
    broker = LocalBroker(home=work / "kafka", port=free_port(), controller_port=free_port())
    started = time.time()
    log(f"broker on {broker.bootstrap_servers}, work dir {work}")
    result: dict = {
        "params": {
            "records": args.records,
            "value_bytes": VALUE_BYTES,
            "partitions": PARTITIONS,
            "keys": KEYS,
            "runs": args.runs,
            "batch_records": args.batch,
            "commit_every": COMMIT_EVERY,
            "restore_keys": args.restore_keys,
            "restore_order": args.restore_order,
            "latency_seconds": args.latency_seconds,
            "latency_rate_per_s": args.latency_rate,
        },
        "machine": machine_facts(),
    }
    bench: Bench | None = None

    def stop() -> None:
        """The Spark sessions, the broker (in a session of its own: it would outlive this process), then
        whatever else still runs below this process: a Spark JVM still starting when a signal came has
        no session to stop yet, and did not end when its stdin closed (seen here)."""
        try:
            if bench is not None and bench.connect is not None:
                bench.connect.stop()
            if bench is not None and bench.spark is not None:
                bench.spark.stop()
        finally:
            broker.down()
            shutil.rmtree(work, ignore_errors=True)
            signal_all([p.pid for p in descendants(os.getpid())], signal.SIGKILL)

    try:
        with stopping(stop):
            broker.up()
            bench = Bench(args, broker.bootstrap_servers, work)
            testing.create_topic(broker.bootstrap_servers, bench.input_topic, PARTITIONS)
            wait_for_group_coordinators(broker.bootstrap_servers, bench.input_topic)
            t0 = time.perf_counter()
            fill_input(broker.bootstrap_servers, bench.input_topic, args.records)
            log(f"input: {args.records:,} records of {VALUE_BYTES} B in {time.perf_counter() - t0:.1f}s")
            bench.session()
            result["warm_up"] = bench.warm_up()
            log("warmed up")
            runs: dict[str, list[dict]] = {r: [] for r in rows}
            for rnd in range(args.runs):
                order = rows if rnd % 2 == 0 else list(reversed(rows))  # interleaved, and alternating
                for row in order:
                    res = bench.run_row(row, rnd)
                    runs[row].append(res)
                    rate = res.get("records_per_s")
                    log(
                        f"round {rnd} {row}: {report.fmt_rate(rate)} records/s"
                        + (f" ({res['seconds']:.1f}s)" if "seconds" in res else "")
                        + (
                            f" rss {res.get('worker_rss_peak_mib')} MiB"
                            if res.get("worker_rss_peak_mib")
                            else ""
                        )
                        + (f" ERROR {res['error'][:300]}" if "error" in res else "")
                    )
            result["runs"] = runs
            if args.profile:
                log(f"profile: an extra, uncounted run of {args.profile} under py-spy")
                kept = list(bench.commit_seconds.get(args.profile, []))
                bench.profiling = True
                extra = bench.run_row(args.profile, -1)
                bench.profiling = False
                bench.commit_seconds[args.profile] = kept  # py-spy slowed the extra run's commits
                result["profile"] = {
                    "row": args.profile,
                    **extra.get("profile", {"error": extra.get("error")}),
                }
            result["throughput"] = report.summarize_throughput(runs)
            result["commit_ms"] = {
                row: {
                    "commits": len(s),
                    "p50_ms": _ms(report.percentile(s, 50)),
                    "p99_ms": _ms(report.percentile(s, 99)),
                }
                for row, s in bench.commit_seconds.items()
            }
            for row in ("python_loop_exactly_once",):
                if row in runs:
                    ok = [r for r in runs[row] if r.get("commit_p50_ms") is not None]
                    if ok:
                        result["commit_ms"][row] = {
                            "p50_ms": report.median(r["commit_p50_ms"] for r in ok),
                            "p99_ms": report.median(r["commit_p99_ms"] for r in ok),
                            "note": "median over runs of each run's percentile",
                        }
            rss1 = report.median(r.get("worker_rss_peak_mib") for r in runs.get("eos_exactly_once", []))
            rss10 = report.median(
                r.get("worker_rss_peak_mib") for r in runs.get("eos_exactly_once_10x_batch", [])
            )
            result["rss"] = {
                "batch_1x_records": args.batch,
                "batch_10x_records": 10 * args.batch,
                "worker_peak_mib_1x": rss1,
                "worker_peak_mib_10x": rss10,
                "ratio_10x_over_1x": report.ratio(rss10, rss1),
                "per_row_median_peak_mib": {
                    row: report.median(r.get("worker_rss_peak_mib") for r in rr) for row, rr in runs.items()
                },
            }
            if "split" not in skip:
                log(f"cost split: records per trigger {args.split_batches}")
                result["split"] = measured("split", bench.split)
            if "latency" not in skip:
                result["latency"] = {}
                for row in ("spark_kafka_sink", "eos_at_least_once", "eos_exactly_once"):
                    rate = f"{args.latency_rate}/s for {args.latency_seconds:.0f}s"
                    log(f"latency {row}: {rate} at a 1 s trigger")
                    result["latency"][row] = measured(f"latency {row}", lambda row=row: bench.latency(row))
                    log(f"latency {row}: {result['latency'][row]}")
            if "restore" not in skip:
                result["restore"] = measured("restore", bench.restore)
    except Interrupted as exc:
        log(f"{exc}: stopped the Spark session and the broker")
        return exc.exit_code
    result["targets"] = report.targets(result)
    result["elapsed_s"] = round(time.time() - started, 1)
    notes = {
        row: runs[row][0]["error"][:80]
        for row in runs
        if runs[row] and all(r.get("records_per_s") is None for r in runs[row])
    }
    table = report.throughput_table(result["throughput"], notes)
    extra = report.extra_table(result)
    result["table"] = table
    (out_dir / "bench.json").write_text(json.dumps(result, indent=2, default=str))
    report.plot(result, str(out_dir / "bench.png"))
    print()
    print(table)
    print()
    print(extra)
    print()
    print(report.targets_table(result["targets"]))
    if "split" in result:
        print()
        print(report.split_table(result["split"]))
    if result.get("profile", {}).get("top_self"):
        print()
        print(report.profile_table(result["profile"]))
    print(f"\nwrote {out_dir / 'bench.json'} and {out_dir / 'bench.png'} in {result['elapsed_s']:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
