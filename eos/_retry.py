"""The one retry loop: retriable Kafka errors are retried until a deadline, everything else raises."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import KafkaException

from eos.errors import Kind, as_eos_error, classify, kafka_error_of

T = TypeVar("T")


class Deadline:
    """A point in monotonic time; `remaining()` never goes below zero."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.at


def retry_call(fn: Callable[[], T], *, what: str, timeout_s: float, log=None) -> T:
    """Call `fn` until it succeeds, retrying retriable KafkaExceptions within `timeout_s`.

    Non-retriable errors, and retriable ones once the deadline has passed, are raised as the EosError
    subclass that `eos.errors.classify` names.
    """
    deadline = Deadline(timeout_s)
    backoff = 0.05
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except KafkaException as exc:
            if classify(kafka_error_of(exc)) is not Kind.RETRIABLE or deadline.expired():
                raise as_eos_error(exc, what) from exc
            if log is not None:
                log.warning("retrying", call=what, attempt=attempt, error=str(exc))
            time.sleep(min(backoff, deadline.remaining()))
            backoff = min(backoff * 2, 1.0)
