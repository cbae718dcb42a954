"""The rows `make bench` compares (`bench_report.ROWS`), a `row_<name>` method each, on one `Bench`: its
Spark session, broker and work directory. Every row reads the same input and writes a fresh output topic,
whose read_committed count must be what the row promises. Also the warm-up before the measured rounds and
the cost split, which reruns two rows at several batch sizes."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from functools import partial
from pathlib import Path

import eos
from bench import bench_report as report
from bench._commit_log import CommitLog
from bench._common import COMMIT_EVERY, KEYS, PARTITIONS, log, ms
from bench._kafka import count_committed, delete_topic
from bench._measure import Profiler, worker_rss
from eos import testing
from examples.pipeline import append_summary, count_per_key, count_per_key_batch

#: the repository: the Python rows run `python -m bench.run_bench` from here
ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def patched(module, name: str, value):
    """`module.name` replaced by `value` for the block (a bench row's variant of the sink)."""
    original = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, original)


_CONNECT_MODE = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE")


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
            self._connect_mode = {k: os.environ[k] for k in _CONNECT_MODE if k in os.environ}
        # PySpark's Connect switch is one per process (eos.spark_session(remote="local") turns it on):
        # on for the Connect rows, off for the classic ones.
        for name, value in self._connect_mode.items():
            if connect:
                os.environ[name] = value
            else:
                os.environ.pop(name, None)
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
        if row.startswith("bare_"):
            return 0
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
        with worker_rss() as rss:
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

    def row_spark_kafka_sink(self, out: str, batch: int | None = None) -> dict:
        config = self.config("spark-sink", "at_least_once", output_topic=out)
        df = self._source(config, batch).select("key", "value")
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
        result.update(
            batches=len(history),
            transactions=sum(s["transactions"] for s in history),
            **report.batch_steps(history),
        )
        return result

    def _eos_row(
        self,
        row: str,
        out: str,
        guarantee: str,
        batch: int | None = None,
        stateful: str | None = None,
        connect: bool = False,
        spark_conf: dict[str, str] | None = None,
        **settings,
    ) -> dict:
        """`stateful`: None, "rows" (process, one row at a time) or "batch" (process_batch); `spark_conf`:
        session settings for this row only (a streaming query copies them when it starts); `settings`:
        more Config fields."""
        settings.setdefault("data_path", "python")  # the Python path's rows stay there; 3j, 2j ask for "jvm"
        config = self.config(row, guarantee, output_topic=out, **settings)
        commits = self.work / f"commits-{uuid.uuid4().hex[:8]}.jsonl"
        summaries = self.work / f"summaries-{uuid.uuid4().hex[:8]}.jsonl"
        kw = {}
        if stateful == "rows":
            kw = {"process": count_per_key, "stores": {"counts": "json"}}
        elif stateful == "batch":
            kw = {"process_batch": count_per_key_batch, "stores": {"counts": "json"}}
        # on_commit runs in the Python tasks: a JVM-path row (data_path="jvm") has none
        on_commit = None if config.data_path == "jvm" else CommitLog(str(commits))
        sink = eos.sink(config, on_commit=on_commit, on_batch=partial(append_summary, str(summaries)), **kw)
        profile = row if self.profiling else None
        source = self._source(config, batch, connect)
        session = source.sparkSession
        before = {k: session.conf.get(k, None) for k in spark_conf or {}}
        for key, value in (spark_conf or {}).items():
            session.conf.set(key, value)
        try:
            result = self._run_query(source.writeStream.foreachBatch(sink), profile)
        finally:
            for key, value in before.items():
                if value is None:
                    session.conf.unset(key)
                else:
                    session.conf.set(key, value)
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
            restored=sum(s["restored"] for s in history),
            commit_p50_ms=ms(report.percentile(seconds, 50)),
            commit_p99_ms=ms(report.percentile(seconds, 99)),
            **report.batch_steps(history),
        )
        return result

    def _bare_row(self, out: str, connect: bool) -> dict:
        """Each batch's rows through a `mapInArrow` that only counts them, in `foreachBatch`: the Spark
        side of an eos row alone (no Kafka writes, no eos), classic or under Connect."""
        config = self.config("bare", "at_least_once", output_topic=out)
        source = self._source(config, connect=connect).select("topic", "partition", "offset", "key", "value")

        def count_rows(batches):  # nested: pickled by value, whatever the worker can import
            import pyarrow as pa

            yield pa.RecordBatch.from_pydict({"n": [sum(b.num_rows for b in batches)]})

        def each_batch(df, batch_id):
            df.mapInArrow(count_rows, "n long").collect()

        return self._run_query(source.writeStream.foreachBatch(each_batch))

    def row_bare_map_in_arrow(self, out: str) -> dict:
        return self._bare_row(out, connect=False)

    def row_bare_map_in_arrow_connect(self, out: str) -> dict:
        return self._bare_row(out, connect=True)

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

    def row_eos_at_least_once_stateful_batch(self, out: str) -> dict:
        """Row 4b at_least_once: its stores roll forward from their checkpoints as exactly_once's do
        (`restored`: changelog records read, 0 without faults)."""
        return self._eos_row("eos_at_least_once_stateful_batch", out, "at_least_once", stateful="batch")

    def row_eos_exactly_once_arrow50k(self, out: str) -> dict:
        """Row 3 with Arrow batches of 50,000 rows (spark.sql.execution.arrow.maxRecordsPerBatch)."""
        conf = {"spark.sql.execution.arrow.maxRecordsPerBatch": "50000"}
        return self._eos_row("eos_exactly_once_arrow50k", out, "exactly_once", spark_conf=conf)

    def row_eos_exactly_once_stateful_batch_arrow50k(self, out: str) -> dict:
        """Row 4b with Arrow batches of 50,000 rows."""
        conf = {"spark.sql.execution.arrow.maxRecordsPerBatch": "50000"}
        return self._eos_row(
            "eos_exactly_once_stateful_batch_arrow50k", out, "exactly_once", stateful="batch", spark_conf=conf
        )

    def row_eos_exactly_once_stateful_rocksdb(self, out: str) -> dict:
        return self._eos_row(
            "eos_exactly_once_stateful_rocksdb", out, "exactly_once", stateful="rows", state_store="rocksdb"
        )

    def row_eos_exactly_once_stateful_batch_rocksdb(self, out: str) -> dict:
        return self._eos_row(
            "eos_exactly_once_stateful_batch_rocksdb",
            out,
            "exactly_once",
            stateful="batch",
            state_store="rocksdb",
        )

    def row_eos_exactly_once_stateful_snapshots(self, out: str) -> dict:
        """Row 4 with each store snapshotted after every batch (a local directory): the most snapshots
        can cost (the default is one per store every 5 minutes)."""
        return self._snapshots_row("eos_exactly_once_stateful_snapshots", out, "rows")

    def row_eos_exactly_once_stateful_batch_snapshots(self, out: str) -> dict:
        """Row 4b with each store snapshotted after every batch."""
        return self._snapshots_row("eos_exactly_once_stateful_batch_snapshots", out, "batch")

    def _snapshots_row(self, row: str, out: str, stateful: str) -> dict:
        location = str(self.work / f"snapshots-{uuid.uuid4().hex[:6]}")
        return self._eos_row(
            row,
            out,
            "exactly_once",
            stateful=stateful,
            state_snapshot_location=location,
            state_snapshot_interval_ms=1,
        )

    def row_eos_exactly_once_connect(self, out: str) -> dict:
        return self._eos_row("eos_exactly_once_connect", out, "exactly_once", connect=True)

    def row_eos_exactly_once_regrouped(self, out: str) -> dict:
        """Row 3 regrouped (shuffle and sort), its rows checked against eos_input: what a batch pays that
        the Kafka source split, or a shuffled or filtered query under Spark Connect."""
        return self._eos_row_by_column("eos_exactly_once_regrouped", out, regroup=True)

    def row_eos_exactly_once_input_column(self, out: str) -> dict:
        """Row 3 with the rows checked against eos_input (as Connect and format("eos") check them), not
        against the lineage, and not regrouped: the cost of carrying and comparing the column."""
        return self._eos_row_by_column("eos_exactly_once_input_column", out, regroup=False)

    def _eos_row_by_column(self, name: str, out: str, regroup: bool) -> dict:
        """Row 3 with the sink's D3 decision replaced: rows proven by eos_input, regrouped or not."""
        from eos._core import _input

        sink = importlib.import_module("eos.sink")  # the module (`eos.sink` is the function)

        def by_column(lineage, dtypes):
            return _input.Provenance(column=_input.INPUT_COLUMN), regroup

        with patched(sink, "input_provenance", by_column):
            return self._eos_row(name, out, "exactly_once")

    def row_eos_exactly_once_unchecked(self, out: str) -> dict:
        """Row 3 with no input-coordinate check at all (eos before step 0): what rows 3 and 3i cost
        more is the check's cost."""
        import attrs

        sink = importlib.import_module("eos.sink")

        def unchecked(**fields):
            return attrs.evolve(job(**fields), provenance=None)

        job = sink.TaskSpec
        with patched(sink, "TaskSpec", unchecked):
            return self._eos_row("eos_exactly_once_unchecked", out, "exactly_once")

    def row_eos_exactly_once_format(self, out: str) -> dict:
        """Row 3j written with `df.writeStream.format("eos")`: on a classic session eos's JVM provider
        runs it on the JVM data path (`eos.data.path` left at "auto")."""
        return self._format_row("eos_exactly_once_format", out, "auto")

    def row_eos_exactly_once_format_python(self, out: str) -> dict:
        """Row 3 written with `df.writeStream.format("eos")` as a Python data source (`eos.data.path`
        "python": what a Spark Connect session's format("eos") runs)."""
        return self._format_row("eos_exactly_once_format_python", out, "python")

    def row_eos_exactly_once_format_connect(self, out: str) -> dict:
        """Row 3f under Spark Connect: eos's provider in the server, each batch's driver checks in the
        server's eos process (what 3f compares with)."""
        return self._format_row("eos_exactly_once_format_connect", out, "auto", connect=True)

    def _format_row(self, row: str, out: str, data_path: str, connect: bool = False) -> dict:
        config = self.config(row, "exactly_once", output_topic=out)
        writer = self._source(config, connect=connect).writeStream.format("eos")
        options = {
            "kafka.bootstrap.servers": self.bootstrap,
            "topic": out,
            "eos.app.id": config.app_id,
            "eos.processing.guarantee": "exactly_once",
            "eos.commit.every": str(COMMIT_EVERY),
            "eos.state.dir": config.state_dir,
            "eos.data.path": data_path,
        }
        for key, value in options.items():
            writer = writer.option(key, value)
        return self._run_query(writer, row if self.profiling else None)

    def _jvm_row(self, row: str, out: str, batch: int | None = None) -> dict:
        """Row 3 on the JVM data path (`data_path="jvm"`): the sink's driver checks, the rows written by
        the executors' Kafka client."""
        return self._eos_row(row, out, "exactly_once", batch=batch, data_path="jvm")

    def row_eos_exactly_once_jvm(self, out: str) -> dict:
        return self._jvm_row("eos_exactly_once_jvm", out)

    def row_eos_exactly_once_jvm_connect(self, out: str) -> dict:
        """Row 3j under Spark Connect: the sink in the server's foreachBatch worker, the tasks run by eos's
        plugin in the server (what 3j compares with)."""
        row = "eos_exactly_once_jvm_connect"
        return self._eos_row(row, out, "exactly_once", connect=True, data_path="jvm")

    def row_eos_at_least_once_jvm(self, out: str) -> dict:
        return self._eos_row("eos_at_least_once_jvm", out, "at_least_once", data_path="jvm")

    def row_eos_exactly_once_jvm_small_batch(self, out: str) -> dict:
        return self._jvm_row("eos_exactly_once_jvm_small_batch", out, self.args.batch // 10)

    def row_eos_exactly_once_10x_batch(self, out: str) -> dict:
        return self._eos_row("eos_exactly_once_10x_batch", out, "exactly_once", batch=10 * self.args.batch)

    def row_spark_kafka_sink_10x_batch(self, out: str) -> dict:
        """Row 1 at 10x the batch: what row 3' compares with, like with like."""
        return self.row_spark_kafka_sink(out, batch=10 * self.args.batch)

    def row_eos_exactly_once_small_batch(self, out: str) -> dict:
        """Row 3 at a tenth of the batch (20,000 records per trigger by default): latency-minded."""
        return self._eos_row("eos_exactly_once_small_batch", out, "exactly_once", batch=self.args.batch // 10)

    def row_spark_kafka_sink_small_batch(self, out: str) -> dict:
        return self.row_spark_kafka_sink(out, batch=self.args.batch // 10)

    # -- the cost split --------------------------------------------------------------------------------

    def split(self) -> dict:
        """Spark's sink, eos exactly_once on each data path and format("eos") (its JVM route: what 3f pays
        a batch beside 3j, from hundreds of batches rather than three wall times) over the same input at
        each of `--split-batches` records per trigger, interleaved: every batch's rows and durations
        (Spark's own progress), then per sink a line fitted through them: a cost per batch and a cost per
        record (`bench_report.cost_split`)."""
        rows = ("spark_kafka_sink", "eos_exactly_once", "eos_exactly_once_jvm", "eos_exactly_once_format")
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

    def child(self, kind: str, *args: str) -> dict:
        """`python -m bench.run_bench <kind> <bootstrap> <input topic> <args>` in a process of its own:
        the JSON of its last line."""
        argv = [sys.executable, "-m", "bench.run_bench", kind, self.bootstrap, self.input_topic, *args]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=3600, cwd=ROOT)
        if proc.returncode != 0:
            raise RuntimeError(f"{kind} exited {proc.returncode}: {proc.stderr[-1500:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def row_python_loop_exactly_once(self, out: str) -> dict:
        return self.child("--child-loop", out, str(self.args.records))

    def row_quixstreams_exactly_once(self, out: str) -> dict:
        if self.args.quix_unavailable:
            raise RuntimeError(self.args.quix_unavailable)
        return self.child("--child-quix", out, str(self.args.records))

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
            "eos_exactly_once_jvm",
            "eos_exactly_once_format",
            "eos_exactly_once_format_connect",
        ):
            once(row)
        self.commit_seconds.clear()
        return done
