"""tests.support.processes.stopping, what the chaos harness and the bench stop their processes with: a
SIGTERM or Ctrl-C stops every process started in a session of its own (real ones here: drivers, each
with a child), also when a second signal arrives while they are being stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tests.support.processes import descendants

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Two drivers as the harness starts them (DriverProcess: a session of their own), each with a child.
HARNESS = """
import sys, time
from tests.support.processes import DriverProcess, Interrupted, stopping
SLEEPER = ("import subprocess, sys, time; "
           "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); time.sleep(120)")
drivers = []
def stop():
    print("stopping", flush=True)
    time.sleep(1)  # the test sends a second signal meanwhile
    for driver in drivers:
        driver.kill()
try:
    with stopping(stop):
        drivers += [DriverProcess([sys.executable, "-c", SLEEPER]) for _ in range(2)]
        print("started", flush=True)
        time.sleep(120)
except Interrupted as exc:
    sys.exit(exc.exit_code)
"""


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize(("signum", "exit_code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_every_process_started_in_a_session_of_its_own(signum, exit_code):
    harness = subprocess.Popen([sys.executable, "-c", HARNESS], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    started = []
    try:
        assert harness.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 20
        while len(started) < 4 and time.monotonic() < deadline:  # two drivers and their children
            started = [p.pid for p in descendants(harness.pid)]
            time.sleep(0.05)
        assert len(started) == 4
        assert all(os.getpgid(pid) != os.getpgid(harness.pid) for pid in started)
        harness.send_signal(signum)
        assert harness.stdout.readline().strip() == "stopping"
        harness.send_signal(signal.SIGINT)  # a second Ctrl-C does not cut the clean-up short
        assert harness.wait(20) == exit_code
        assert [pid for pid in started if alive(pid)] == []
    finally:
        harness.kill()
        for pid in started:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
