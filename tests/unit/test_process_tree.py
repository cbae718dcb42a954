"""tests.support.processes: the process tree the chaos harness, the bench and the reliability tests walk
and measure (psutil underneath)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.support import processes


def test_descendants_finds_children_and_grandchildren_not_others():
    grandchild = "import time; time.sleep(30)"
    child = (
        "import subprocess, sys, time; "
        f"subprocess.Popen([sys.executable, '-c', {grandchild!r}]); time.sleep(30)"
    )
    proc = subprocess.Popen([sys.executable, "-c", child])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            below = processes.descendants(proc.pid)
            if below:
                break
            time.sleep(0.05)
        assert [p.ppid for p in below] == [proc.pid]
        assert "time.sleep(30)" in below[0].cmdline
        mine = {p.pid for p in processes.descendants(os.getpid())}
        assert {proc.pid, below[0].pid} <= mine
        table = processes.processes()
        assert table[proc.pid].ppid == os.getpid()
        assert os.getppid() not in mine
    finally:
        for p in processes.descendants(proc.pid):
            os.kill(p.pid, 9)
        proc.kill()
        proc.wait()


def test_zombies_are_left_out_and_have_no_usage():
    """A child that has exited but was not waited for: not a process to signal or measure any more."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 10
        while proc.pid in processes.processes() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.pid not in processes.processes()
        assert processes.threads_and_rss(proc.pid) is None
        assert proc.pid not in {p.pid for p in processes.descendants(os.getpid())}
    finally:
        proc.wait()
    assert processes.threads_and_rss(proc.pid) is None  # reaped: gone


def test_threads_and_rss_of_a_live_process():
    """What a child holds shows: 256 MiB more memory touched, two more threads."""
    code = (
        "import sys, threading; big = b'x' * (256 << 20) if sys.argv[1] == 'big' else b'';"
        " wait = lambda: sys.stdin.readline();"
        " [threading.Thread(target=wait, daemon=True).start() for _ in range(int(sys.argv[2]))];"
        " print('ready', flush=True); sys.stdin.readline()"
    )
    figures = {}
    for name, args in {"small": ["small", "0"], "big": ["big", "2"]}.items():
        child = subprocess.Popen(
            [sys.executable, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            assert child.stdout.readline().strip() == "ready"
            figures[name] = processes.threads_and_rss(child.pid)
        finally:
            child.kill()
            child.wait()
    (small_threads, small_rss), (big_threads, big_rss) = figures["small"], figures["big"]
    assert big_threads == small_threads + 2
    assert big_rss - small_rss >= 250 << 20
