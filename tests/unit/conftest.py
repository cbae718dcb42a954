"""What every unit test has: no crash point armed (`eos._crash`), whatever EOS_CRASH_AT the environment
holds, so a test that runs the protocol's steps cannot SIGKILL the test run; test_crash.py arms its own."""

from __future__ import annotations

import pytest

from eos import _crash


@pytest.fixture(autouse=True)
def _no_crash_points(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_crash, "_ARMED", frozenset())
