"""eos.testing.processes / descendants: the process tree the chaos harness and the bench walk."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from eos import testing


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
            below = testing.descendants(proc.pid)
            if below:
                break
            time.sleep(0.05)
        assert [p.ppid for p in below] == [proc.pid]
        assert "time.sleep(30)" in below[0].cmdline
        mine = {p.pid for p in testing.descendants(os.getpid())}
        assert {proc.pid, below[0].pid} <= mine
        table = testing.processes()
        assert table[proc.pid].ppid == os.getpid()
        assert os.getppid() not in mine
    finally:
        for p in testing.descendants(proc.pid):
            os.kill(p.pid, 9)
        proc.kill()
        proc.wait()
