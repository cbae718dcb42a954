"""Executor memory beside Spark's sink's: each of MEMORY_ROWS in a Spark JVM of its own (`python -m
bench.run_bench --child-memory ...`, so that no row inherits another's heap), run `runs` times over the
bench's input at its records per trigger. Per run, the peak RSS of that JVM (in local mode the driver's
JVM is the executor) and of its Python workers, and the JVM's RSS before the run: a figure that grows
from run to run is memory the row keeps."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

import eos
from bench._common import log
from bench._measure import PeakRss, spark_jvms, worker_rss
from bench._rows import Bench
from tests.support.processes import threads_and_rss

#: Spark's sink, then eos exactly_once on each data path
MEMORY_ROWS = ("spark_kafka_sink", "eos_exactly_once_jvm", "eos_exactly_once")


def memory(bench, runs: int) -> dict:
    """Each of MEMORY_ROWS in a child process of its own, one after another."""
    out: dict = {"batch_records": bench.args.batch, "records": bench.args.records, "runs_per_row": runs}
    for row in MEMORY_ROWS:
        try:
            out[row] = bench.child(
                "--child-memory", row, str(bench.args.records), str(bench.args.batch), str(runs)
            )
        except RuntimeError as exc:  # one row's failure is reported; the others still run
            out[row] = {"error": str(exc)}
        log(f"memory {row}: {out[row]}")
    return out


def _rss_mib(pid: int) -> float | None:
    usage = threads_and_rss(pid)
    return None if usage is None else round(usage[1] / 2**20, 1)


def child_memory(bootstrap: str, topic: str, row: str, records: int, batch: int, runs: int) -> dict:
    """In this process: a fresh classic Spark session, `row` run `runs` times."""
    work = Path(tempfile.mkdtemp(prefix="eos-bench-memory-", dir=os.environ.get("EOS_CACHE")))
    args = argparse.Namespace(records=records, batch=batch, out=str(work))
    bench = Bench(args, bootstrap, work)
    bench.input_topic = topic
    bench.spark = eos.spark_session("eos-bench-memory")
    bench._connect_mode = {}
    try:
        (jvm,) = spark_jvms()
        done = []
        for rnd in range(runs):
            before = _rss_mib(jvm)
            with PeakRss(lambda: [jvm]) as peak, worker_rss() as workers:
                res = bench.run_row(row, rnd)
            if "error" in res:
                raise RuntimeError(res["error"])
            done.append(
                {
                    "jvm_rss_before_mib": before,
                    "jvm_rss_peak_mib": peak.peak_mib,
                    "worker_rss_peak_mib": workers.peak_mib,
                    "records_per_s": res["records_per_s"],
                }
            )
        heap = bench.spark.conf.get("spark.driver.memory", "1g")
        return {"runs": done, "spark.driver.memory": heap}
    finally:
        bench.spark.stop()
        shutil.rmtree(work, ignore_errors=True)
