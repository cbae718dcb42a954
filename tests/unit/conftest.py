"""What every unit test has: no crash point armed (`eos._crash`), whatever EOS_CRASH_AT the environment
holds, so a test that runs the protocol's steps cannot SIGKILL the test run; test_crash.py arms its own.
And what several files ask for: `fake_client`, librdkafka played by `tests.support.producers`."""

from __future__ import annotations

import pytest

from eos import _crash
from eos._kafka import _producer
from tests.support.producers import FakeClient


@pytest.fixture(autouse=True)
def _no_crash_points(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_crash, "_ARMED", frozenset())


@pytest.fixture
def fake_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every OutputProducer the test makes runs on a FakeClient (its `_producer`), not on librdkafka."""
    monkeypatch.setattr(_producer, "Producer", FakeClient)
