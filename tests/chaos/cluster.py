"""A real Spark standalone cluster on this machine, started from the PySpark install: one master and
N workers, each worker launching its own executor JVM per application, whose Python workers are forked
by `pyspark.daemon`. Losing an executor here is real, unlike in local mode.

Also the helpers the fault schedule uses to find executor JVMs and Python workers in the process tree.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import attrs
import psutil

from eos.session import free_port
from tests.support.processes import Proc, descendants, processes, signal_all


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (0 once it has exited): a rising value means busy."""
    try:
        times = psutil.Process(pid).cpu_times()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return 0.0
    return times.user + times.system


@attrs.define
class StandaloneCluster:
    home: Path
    workers: int = 2
    cores_per_worker: int = 2
    memory_per_worker: str = "1g"
    port: int = attrs.field(factory=free_port)
    webui_port: int = attrs.field(factory=free_port)
    _procs: list[subprocess.Popen] = attrs.field(factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, main: str, *args: str, host: str = "127.0.0.1") -> subprocess.Popen:
        log = open(self.home / f"{name}.log", "ab")
        env = {
            **os.environ,
            "SPARK_HOME": str(_spark_home()),
            "SPARK_LOCAL_IP": host,
            "PYSPARK_PYTHON": sys.executable,
        }
        proc = subprocess.Popen(
            [str(_spark_home() / "bin" / "spark-class"), main, *args],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._procs.append(proc)
        return proc

    def up(self, timeout: float = 120) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(self.webui_port),
        )
        for i in range(self.workers):
            self.start_worker(i)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            alive = [w for w in self.status().get("workers", []) if w.get("state") == "ALIVE"]
            if len(alive) == self.workers:
                return
            time.sleep(1)
        raise RuntimeError(f"standalone cluster not up within {timeout}s; see {self.home}/*.log")

    def start_worker(self, i: int) -> subprocess.Popen:
        """Worker `i`, on its own loopback address: Spark sees one host per worker, as it must for a
        speculative attempt (never launched on the host of the attempt it duplicates)."""
        work = self.home / f"worker-{i}"
        work.mkdir(exist_ok=True)
        host = f"127.0.0.{i + 1}"
        return self._start(
            f"worker-{i}",
            "org.apache.spark.deploy.worker.Worker",
            "--host",
            host,
            "--cores",
            str(self.cores_per_worker),
            "--memory",
            self.memory_per_worker,
            "--webui-port",
            str(free_port()),
            "--work-dir",
            str(work),
            self.master_url,
            host=host,
        )

    def kill_worker(self, proc: subprocess.Popen) -> None:
        """SIGKILL a worker and everything it launched (its executors and their Python workers)."""
        for p in descendants(proc.pid):
            signal_all([p.pid], signal.SIGKILL)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def status(self) -> dict:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=5) as r:
                return json.load(r)
        except OSError:
            return {}

    def down(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                for p in descendants(proc.pid):
                    signal_all([p.pid], signal.SIGKILL)
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self._procs.clear()

    def worker_pids(self) -> list[int]:
        return [p.pid for p in self._procs[1:] if p.poll() is None]

    def executors(self) -> list[Proc]:
        """The executor JVMs the workers launched (one per worker per running application)."""
        table = processes()
        return [
            p
            for w in self.worker_pids()
            for p in descendants(w, table)
            if "CoarseGrainedExecutorBackend" in p.cmdline
        ]

    def python_workers(self) -> list[Proc]:
        """Python worker processes: the children `pyspark.daemon` forks to run tasks."""
        table = processes()
        daemons = {
            p.pid for w in self.worker_pids() for p in descendants(w, table) if "pyspark.daemon" in p.cmdline
        }
        return [p for p in table.values() if p.ppid in daemons]

    def executor_tree(self) -> list[int]:
        """Every executor JVM and Python process, for pausing the whole compute side."""
        table = processes()
        pids = []
        for e in self.executors():
            pids.append(e.pid)
            pids.extend(p.pid for p in descendants(e.pid, table))
        return pids
