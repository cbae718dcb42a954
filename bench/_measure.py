"""What a run measures of its processes besides time: the peak RSS of the PySpark Python workers and of
the Spark JVM, and py-spy profiles of the workers (BENCH_PROFILE)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from bench import bench_report as report
from bench._common import log
from tests.support.processes import descendants, processes, pyspark_python, threads_and_rss


class PeakRss:
    """Samples the RSS of the processes `pids()` names, every `interval` s: the peak of any one of them."""

    def __init__(self, pids: Callable[[], Iterable[int]], interval: float = 0.1) -> None:
        self.pids = pids
        self.interval = interval
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakRss:
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
            for pid in self.pids():
                usage = threads_and_rss(pid)
                if usage is not None:
                    self.peak_kib = max(self.peak_kib, usage[1] // 1024)
            self._stop.wait(self.interval)


def worker_rss(interval: float = 0.1) -> PeakRss:
    """The RSS of this process's PySpark Python workers (its descendants running pyspark)."""
    return PeakRss(lambda: [p.pid for p in pyspark_python(os.getpid())], interval)


def spark_jvms() -> list[int]:
    """pids of the Spark JVMs below this process (PySpark's gateway: `java ... SparkSubmit`); in local
    mode the driver's JVM is the executor too."""
    return [p.pid for p in descendants(os.getpid()) if "org.apache.spark.deploy.SparkSubmit" in p.cmdline]


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
