"""When a transaction must commit: commit_every records, commit_max_bytes of input held for a redo,
commit_interval_ms of age, or a state buffer of state_buffer_max_keys uncommitted keys — whichever comes
first (memory stays bounded)."""

from __future__ import annotations

from functools import partial

import eos
from eos._core._transaction import Transaction
from eos._scope import PartitionScope
from tests.support.configs import config as base_config
from tests.support.producers import FakeOutputProducer


class State:
    def __init__(self) -> None:
        self.keys = 0

    def pending_keys(self) -> int:
        return self.keys


config = partial(base_config, processing_guarantee="exactly_once")


def scope(cfg: eos.Config) -> PartitionScope:
    return PartitionScope(cfg, "in", 0, 0, None, log=None)


def test_due_after_commit_every_records():
    transaction = Transaction(scope(config(commit_every=3)), FakeOutputProducer())
    for offset in range(2):
        transaction.mark(offset, 1, 1)
        assert not transaction.due()
    transaction.mark(2, 1, 1)
    assert transaction.due()


def test_due_once_the_input_held_for_a_redo_reaches_commit_max_bytes():
    transaction = Transaction(scope(config(commit_max_bytes=1_000)), FakeOutputProducer())
    transaction.mark(0, 1, 1)
    transaction.input_bytes += 999
    assert not transaction.due()
    transaction.input_bytes += 1
    assert transaction.due()


def test_due_once_the_transaction_is_older_than_commit_interval(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr("eos._core._transaction.time.monotonic", lambda: now[0])
    transaction = Transaction(scope(config(commit_interval_ms=500)), FakeOutputProducer())
    transaction.mark(0, 1, 1)
    assert not transaction.due()
    now[0] += 0.5
    assert transaction.due()


def test_due_when_the_state_buffer_is_full_whatever_the_record_count():
    state = State()
    transaction = Transaction(
        scope(config(commit_every=1_000_000, state_buffer_max_keys=100)), FakeOutputProducer(), state=state
    )
    transaction.mark(0, 1, 1)
    state.keys = 99
    assert not transaction.due()
    state.keys = 100
    assert transaction.due()
