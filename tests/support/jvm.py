"""Faster starts of the Spark JVMs the tests launch (about 40 a `make test`: drivers, Connect servers,
standalone masters and workers): a class-data-sharing archive of the classes a Spark driver loads, C1
compilation only, the serial collector. Measured on this 2-core machine, session start to a first
`mapInArrow` job: 8.8-9.1 s with the JVM's defaults, 4.7-5.1 s so (`python -m tests.support.jvm
--measure`). The tests' workloads are small, so what C2 would win in a long run does not matter.

Tests only: `make bench` and users keep the JVM's defaults. `make test` dumps the archive once per
PySpark (`python -m tests.support.jvm --dump`, ~40 s); without it the flags still apply, minus CDS.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

#: C1 only and the serial collector: quicker to start, slower in a long run (tests are short)
_FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def archive() -> Path:
    """The class-data-sharing archive of the installed PySpark's driver classes."""
    import pyspark

    from eos._spark._cache import cache_dir

    return cache_dir() / "jvm" / f"spark-{pyspark.__version__}.jsa"


def java_options() -> str:
    """JVM options for a test's Spark JVM: the flags, and the archive where it was dumped."""
    path = archive()
    return f"{_FLAGS} -XX:SharedArchiveFile={path}" if path.exists() else _FLAGS


def install() -> None:
    """Make every Spark JVM this process (and its children) starts use `java_options()`: a driver's
    (spark-submit's JVM, which PySpark starts too) from SPARK_SUBMIT_OPTS, a standalone master's or
    worker's from SPARK_DAEMON_JAVA_OPTS, the executors of a driver PySpark starts from the --conf in
    PYSPARK_SUBMIT_ARGS. Left alone where the environment sets them already."""
    options = java_options()
    executors = shlex.quote(f"spark.executor.extraJavaOptions={options}")
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", f"--conf {executors} pyspark-shell")
    os.environ.setdefault("SPARK_SUBMIT_OPTS", options)
    os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", options)


_WORKLOAD = """
import eos
spark = eos.spark_session("eos-jvm-archive", remote="local")
df = spark.range(100).selectExpr("id", "cast(id as string) as value")
df.mapInArrow(lambda it: it, df.schema).collect()
query = (spark.readStream.format("rate").option("rowsPerSecond", 100).load()
         .writeStream.foreachBatch(lambda batch, i: batch.count()).trigger(once=True).start())
query.awaitTermination()
spark.stop()
"""


def dump() -> Path:
    """Run a driver that starts a Connect server, a job and a streaming query, and archive the classes
    its JVM loaded (written when the JVM exits)."""
    path = archive()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    env = {
        **os.environ,
        "PYSPARK_SUBMIT_ARGS": "pyspark-shell",
        "SPARK_SUBMIT_OPTS": f"{_FLAGS} -XX:ArchiveClassesAtExit={tmp}",
    }
    subprocess.run([sys.executable, "-c", _WORKLOAD], env=env, check=True, capture_output=True)
    deadline = time.monotonic() + 60  # the JVM writes the archive as it exits, after Python did
    while not tmp.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    os.replace(tmp, path)
    return path


def _measure() -> None:
    code = (
        "import time; t = time.monotonic(); import eos; s = eos.spark_session();"
        " s.range(10).mapInArrow(lambda it: it, 'id long').collect();"
        " print(round(time.monotonic() - t, 1))"
    )
    for label, env in (
        ("defaults", {"PYSPARK_SUBMIT_ARGS": "pyspark-shell", "SPARK_SUBMIT_OPTS": ""}),
        ("tests", {}),
    ):
        for _ in range(2):
            if not env:
                install()
            out = subprocess.run(
                [sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True
            )
            print(f"{label}: {out.stdout.strip()} s to a first mapInArrow job")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m tests.support.jvm")
    parser.add_argument("--dump", action="store_true", help="write the archive (once per PySpark)")
    parser.add_argument("--measure", action="store_true", help="time a driver start with and without")
    args = parser.parse_args()
    if args.dump:
        print(f"wrote {dump()}")
    if args.measure:
        _measure()
