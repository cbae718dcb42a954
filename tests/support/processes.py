"""Processes the tests start, kill and measure: a Spark driver as a process group of its own, and the
process tree below it (executor JVMs, `pyspark.daemon`, Python workers), read through psutil."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping

import attrs
import psutil


class DriverProcess:
    """A Spark driver program run as its own process group, so that a SIGKILL takes the driver, its
    JVM and its Python workers down at once, as a lost machine would."""

    def __init__(
        self,
        argv: list[str],
        env: Mapping[str, str] | None = None,
        log_path: str | None = None,
        cwd: str | os.PathLike | None = None,
    ):
        self.log_path = log_path
        log = open(log_path, "ab") if log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            argv,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )

    def running(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> bool:
        """SIGKILL the whole process group; returns whether it was still running."""
        if not self.running():
            return False
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        return True

    def wait(self, timeout: float = 600) -> int:
        return self.proc.wait(timeout=timeout)

    def log_tail(self, chars: int = 4000) -> str:
        if not self.log_path:
            return ""
        with open(self.log_path, errors="replace") as f:
            return f.read()[-chars:]


@attrs.frozen
class Proc:
    pid: int
    ppid: int
    cmdline: str


def processes() -> dict[int, Proc]:
    """Every live process but zombies: pid -> (parent, command line). One snapshot, so that several
    `descendants` calls can walk the same tree."""
    out: dict[int, Proc] = {}
    for p in psutil.process_iter(["pid", "ppid", "cmdline", "status"]):
        info = p.info  # filled by process_iter; a process that vanished meanwhile is left out
        if info["status"] == psutil.STATUS_ZOMBIE or info["ppid"] is None:
            continue
        out[info["pid"]] = Proc(info["pid"], info["ppid"], " ".join(info["cmdline"] or ()))
    return out


def descendants(root: int, table: dict[int, Proc] | None = None) -> list[Proc]:
    """Every process below `root` (children, their children, ...), from `table` or a fresh one."""
    table = table if table is not None else processes()
    children: dict[int, list[Proc]] = {}
    for p in table.values():
        children.setdefault(p.ppid, []).append(p)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child.pid)
    return found


def pyspark_python(root: int) -> list[Proc]:
    """The PySpark Python processes below `root`: `python -m pyspark.daemon` and the workers it forks
    (not the JVM, whose class path also names pyspark)."""
    return [p for p in descendants(root) if "pyspark.daemon" in p.cmdline or "pyspark.worker" in p.cmdline]


def threads_and_rss(pid: int) -> tuple[int, int] | None:
    """(threads, RSS in bytes) of a live process; None once it has exited or is a zombie (which has
    no memory left to report)."""
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None
            return proc.num_threads(), proc.memory_info().rss
    except (psutil.NoSuchProcess, psutil.AccessDenied):  # ZombieProcess is a NoSuchProcess
        return None
