"""Processes the tests start, kill and measure: a Spark driver as a process group of its own, and the
process tree below it (executor JVMs, `pyspark.daemon`, Python workers), read through psutil. And
`stopping`, with which the chaos harness and the bench stop what they started, also when interrupted."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping

import attrs
import psutil


def signal_all(pids, sig: int) -> int:
    """Send `sig` to each pid; returns to how many (those that exited meanwhile are skipped)."""
    sent = 0
    for pid in pids:
        try:
            os.kill(pid, sig)
            sent += 1
        except ProcessLookupError:
            pass
    return sent


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; `exit_code` is the shell's 128 + signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.exit_code = 128 + signum


@contextlib.contextmanager
def stopping(stop: Callable[[], object]) -> Iterator[None]:
    """Run the block, then `stop()` (stop what it started), also when SIGTERM or SIGINT (Ctrl-C) arrives:
    inside the block either raises `Interrupted`. Python's default SIGTERM ends the process at once, and
    what was started in a session of its own (a broker, Spark daemons, drivers) would outlive it; `make`
    passes its SIGTERM on to the recipe. `stop()` runs with both signals ignored, so that neither a
    second Ctrl-C nor a signal arriving as the block ends cuts it short; a signal that arrived then is
    raised once `stop()` is done. Outside the main thread no handler can be installed: just try/finally."""
    if threading.current_thread() is not threading.main_thread():
        try:
            yield
        finally:
            stop()
        return
    signums = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.getsignal(signum) for signum in signums}
    received: list[int] = []
    in_block = True

    def interrupt(signum, frame) -> None:
        for s in signums:
            signal.signal(s, signal.SIG_IGN)
        received.append(signum)
        if in_block:
            raise Interrupted(signum)

    for signum in signums:
        signal.signal(signum, interrupt)
    try:
        try:
            yield
        finally:
            in_block = False  # a signal just before this line raises here: the outer finally still runs
    finally:
        for signum in signums:
            signal.signal(signum, signal.SIG_IGN)
        try:
            stop()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
    if received:
        raise Interrupted(received[0])


class DriverProcess:
    """A Spark driver program run as its own process group, so that a SIGKILL takes the driver, its
    JVM and its Python workers down at once, as a lost machine would."""

    def __init__(
        self,
        argv: list[str],
        env: Mapping[str, str] | None = None,
        log_path: str | None = None,
        cwd: str | os.PathLike | None = None,
        stdout_too: bool = False,
    ):
        """`stdout_too`: its standard output into `log_path` as well (a driver that reports there)."""
        self.log_path = log_path
        log = open(log_path, "ab") if log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            argv,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            start_new_session=True,
            stdout=log if stdout_too else subprocess.DEVNULL,
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
