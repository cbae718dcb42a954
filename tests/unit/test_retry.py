"""eos._kafka._translate.call, the retry loop: retriable errors retried within a deadline, the rest raised
at once."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

import eos
from eos._kafka._translate import Deadline
from eos._kafka._translate import call as retry_call
from tests.support.logs import Log


class Flaky:
    """Raises the given errors in turn, then returns `result`; counts the calls."""

    def __init__(self, *errors: KafkaError | BaseException, result="ok", forever: bool = False) -> None:
        self.errors = list(errors)
        self.result = result
        self.forever = forever
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.errors:
            err = self.errors[0] if self.forever else self.errors.pop(0)
            raise err if isinstance(err, BaseException) else KafkaException(err)
        return self.result


def retriable(code=KafkaError.REQUEST_TIMED_OUT) -> KafkaError:
    return KafkaError(code, "transient", retriable=True)


def test_success_at_first_call():
    fn = Flaky(result=42)
    assert retry_call(fn, what="x", timeout_s=5) == 42
    assert fn.calls == 1


def test_retries_retriable_until_success_and_logs_each_retry():
    fn = Flaky(retriable(), retriable(KafkaError.COORDINATOR_NOT_AVAILABLE), result="done")
    log = Log()
    assert retry_call(fn, what="init_transactions", timeout_s=10, log=log) == "done"
    assert fn.calls == 3
    assert [w["attempt"] for w in log.at("warning")] == [1, 2]
    assert all(w["call"] == "init_transactions" for w in log.at("warning"))


def test_gives_up_at_the_deadline_with_retriable_error():
    err = retriable()
    fn = Flaky(err, forever=True)
    with pytest.raises(eos.RetriableError) as info:
        retry_call(fn, what="list offsets", timeout_s=0.2)
    assert fn.calls > 1
    assert info.value.kafka_error is err
    assert "list offsets" in str(info.value)
    assert isinstance(info.value.__cause__, KafkaException)


def test_zero_timeout_tries_once():
    fn = Flaky(retriable(), forever=True)
    with pytest.raises(eos.RetriableError):
        retry_call(fn, what="x", timeout_s=0)
    assert fn.calls == 1


@pytest.mark.parametrize(
    ("err", "cls"),
    [
        (KafkaError(KafkaError._FAIL, "unknown"), eos.FatalError),
        (KafkaError(KafkaError._FAIL, "fatal", fatal=True, retriable=True), eos.FatalError),
        (
            KafkaError(KafkaError._FAIL, "abort", txn_requires_abort=True, retriable=True),
            eos.TransactionAbortableError,
        ),
        (KafkaError(KafkaError.PRODUCER_FENCED, "fenced", retriable=True), eos.FencedError),
        (KafkaError(KafkaError.INVALID_PRODUCER_EPOCH, "epoch"), eos.FencedError),
    ],
)
def test_non_retriable_raises_at_once(err, cls):
    fn = Flaky(err, forever=True)
    with pytest.raises(cls) as info:
        retry_call(fn, what="commit", timeout_s=10)
    assert type(info.value) is cls
    assert fn.calls == 1
    assert info.value.kafka_error is err


def test_retriable_then_fenced_stops_at_fenced():
    fn = Flaky(retriable(), KafkaError(KafkaError._FENCED, "fenced"), result="never")
    with pytest.raises(eos.FencedError):
        retry_call(fn, what="commit", timeout_s=10)
    assert fn.calls == 2


def test_other_exceptions_pass_through_unchanged():
    fn = Flaky(ValueError("not kafka"), forever=True)
    with pytest.raises(ValueError, match="not kafka"):
        retry_call(fn, what="x", timeout_s=10)
    assert fn.calls == 1


def test_deadline_remaining_never_negative():
    assert Deadline(0).remaining() == 0.0
    assert Deadline(-5).remaining() == 0.0
    assert Deadline(-5).expired()
    assert not Deadline(60).expired()
    assert 0 < Deadline(60).remaining() <= 60


@pytest.mark.parametrize("code", [KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT])
def test_a_call_of_the_transaction_that_timed_out_is_not_retried_but_in_doubt(code):
    """commit_transaction, send_offsets_to_transaction, abort_transaction: a timed-out one is not asked
    again of the same producer (a late record could land in its next transaction)."""
    fn = Flaky(retriable(code), result="committed")
    with pytest.raises(eos.TransactionInDoubtError, match="in doubt") as info:
        retry_call(fn, what="commit_transaction (app:in:0)", timeout_s=5, transactional=True)
    assert fn.calls == 1 and info.value.kafka_error.code() == code
    assert retry_call(Flaky(retriable(code), result=1), what="x", timeout_s=5) == 1, "other calls retry"


def test_another_retriable_error_of_the_transaction_is_retried_on_it():
    fn = Flaky(retriable(KafkaError.COORDINATOR_LOAD_IN_PROGRESS), result="committed")
    assert retry_call(fn, what="commit_transaction", timeout_s=5, transactional=True) == "committed"


def test_a_future_unanswered_in_time_is_retried_then_a_retriable_error():
    """An admin future's result(timeout) running out (a paused broker) is librdkafka's timeout: retried
    within the deadline, then RetriableError, never the bare TimeoutError."""
    from concurrent.futures import TimeoutError as FutureTimeout

    fn = Flaky(FutureTimeout(), result="described")
    assert retry_call(fn, what="looking up output topic 'out'", timeout_s=5) == "described"
    with pytest.raises(eos.RetriableError, match="no answer in time"):
        retry_call(Flaky(FutureTimeout(), forever=True), what="x", timeout_s=0.2)
