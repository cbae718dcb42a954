"""What every unit test has: no crash point armed (`eos._crash`), whatever EOS_CRASH_AT the environment
holds, so a test that runs the protocol's steps cannot SIGKILL the test run; test_crash.py arms its own.
And what several files ask for: `fake_client` and `kafka`, the producer fakes of `tests.support.producers`
put where eos creates the real ones; `each_backend`, a test run over each state store backend."""

from __future__ import annotations

import pytest

from eos import _crash
from eos._kafka import _offsets, _pool, _producer
from eos.state._backends import KINDS
from tests.support.producers import FakeClient, FakeKafka


@pytest.fixture(autouse=True)
def _no_crash_points(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_crash, "_ARMED", frozenset())


@pytest.fixture(params=KINDS)
def each_backend(request: pytest.FixtureRequest) -> str:
    """The test runs once per state store backend; its module's `KIND` names the one of this run
    (a module's helpers read it; `pytestmark = pytest.mark.usefixtures("each_backend")` asks for it)."""
    request.module.KIND = request.param
    return request.param


@pytest.fixture
def fake_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every OutputProducer the test makes runs on a FakeClient (its `_producer`), not on librdkafka."""
    monkeypatch.setattr(_producer, "Producer", FakeClient)


@pytest.fixture
def kafka(monkeypatch: pytest.MonkeyPatch) -> FakeKafka:
    """A partition task's producers are FakeOutputProducers, from the pool or fresh, and its group
    offsets are committed and read in a FakeKafka."""
    k = FakeKafka()
    monkeypatch.setattr(_pool, "acquire", k.acquire)
    monkeypatch.setattr(_producer, "OutputProducer", k.producer)
    monkeypatch.setattr(_pool, "release", k.released.append)
    monkeypatch.setattr(_pool, "discard", k.discarded.append)
    monkeypatch.setattr(_offsets, "committed_entries", k.committed_entries)
    monkeypatch.setattr(_offsets, "commit", k.commit)
    monkeypatch.setattr(_offsets, "group_metadata", lambda config: k.group_metadata)
    return k
