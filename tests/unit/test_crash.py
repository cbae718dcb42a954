"""eos._crash: named SIGKILL points for the fault tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from eos import _crash

SCRIPT = "import eos._crash as c; c.point('after_produce'); print('survived', flush=True)"


def run(**env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("EOS_CRASH")}
    return subprocess.run(
        [sys.executable, "-c", SCRIPT], env={**environ, **env}, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def kills(monkeypatch) -> list[tuple[int, int]]:
    """Record os.kill calls instead of killing the test process."""
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(_crash.os, "kill", lambda pid, sig: calls.append((pid, sig)))
    return calls


def test_unarmed_points_do_nothing(monkeypatch, kills):
    for name in _crash.POINTS:
        assert _crash.point(name) is None
    assert kills == []


def test_only_armed_points_fire(monkeypatch, kills):
    monkeypatch.setattr(_crash, "_ARMED", frozenset({"after_produce", "after_commit"}))
    monkeypatch.setattr(_crash, "_ONCE_DIR", None)
    _crash.point("before_produce")
    _crash.point("after_send_offsets")
    assert kills == []
    _crash.point("after_commit")
    _crash.point("after_produce")
    assert kills == [(os.getpid(), signal.SIGKILL)] * 2


def test_once_dir_fires_each_point_once(monkeypatch, kills, tmp_path):
    monkeypatch.setattr(_crash, "_ARMED", frozenset({"after_produce", "after_commit"}))
    monkeypatch.setattr(_crash, "_ONCE_DIR", str(tmp_path))
    _crash.point("after_produce")
    _crash.point("after_produce")
    _crash.point("after_commit")
    assert kills == [(os.getpid(), signal.SIGKILL)] * 2
    assert (tmp_path / "crashed-after_produce").read_text() == str(os.getpid())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["crashed-after_commit", "crashed-after_produce"]


def test_subprocess_unarmed_survives():
    proc = run()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "survived"


def test_subprocess_armed_elsewhere_survives():
    proc = run(EOS_CRASH_AT="before_produce,after_commit")
    assert proc.returncode == 0, proc.stderr


def test_subprocess_armed_dies_by_sigkill():
    proc = run(EOS_CRASH_AT="before_produce,after_produce")
    assert proc.returncode == -signal.SIGKILL
    assert "survived" not in proc.stdout


def test_subprocess_once_dir_crashes_only_the_first_time(tmp_path):
    first = run(EOS_CRASH_AT="after_produce", EOS_CRASH_ONCE_DIR=str(tmp_path))
    assert first.returncode == -signal.SIGKILL
    marker = tmp_path / "crashed-after_produce"
    assert marker.exists()
    assert marker.read_text().isdigit()
    second = run(EOS_CRASH_AT="after_produce", EOS_CRASH_ONCE_DIR=str(tmp_path))
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "survived"


def test_pause_point_stops_the_process_once_until_sigcont(tmp_path):
    """EOS_PAUSE_AT for real: the child stops itself, writes its pid, and runs on after SIGCONT."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("EOS_")}
    env = {**environ, "EOS_PAUSE_AT": "after_produce", "EOS_CRASH_ONCE_DIR": str(tmp_path)}
    child = subprocess.Popen(
        [sys.executable, "-c", SCRIPT + "; c.point('after_produce'); print('twice', flush=True)"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    marker = tmp_path / "paused-after_produce"
    try:
        for _ in range(600):
            if marker.exists() and marker.read_text() and _state(child.pid) == "T":
                break
            time.sleep(0.05)
        assert marker.read_text() == str(child.pid)
        assert _state(child.pid) == "T"
    finally:
        os.kill(child.pid, signal.SIGCONT)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 0
    assert out.split() == ["survived", "twice"]  # the second pass of the point does not stop again


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(") ", 1)[1][0]
