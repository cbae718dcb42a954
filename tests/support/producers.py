"""The producer stand-ins of the unit tests:

- `FakeClient` plays librdkafka (`confluent_kafka.Producer`), under the real `OutputProducer` and its
  `RecordCollector`: what eos makes of queueing, refusals, delivery reports and fatal errors.

A test that needs a fault of its own configures it (or patches one method) rather than writing
another fake.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from types import SimpleNamespace

from confluent_kafka import KafkaError, KafkaException

from tests.support.messages import Message

# -- librdkafka ------------------------------------------------------------------------------------------

#: all produce() says once the producer is fatally broken; poll() and flush() raise the cause
_FATAL_AT_PRODUCE = KafkaError(KafkaError._FATAL, "Unable to produce message: Local: Fatal error")


class FakeClient:
    """`confluent_kafka.Producer` as eos calls it. produce() queues a record, refuses it at once
    (`refuse`: value -> error) or finds the queue full (`full`: the value's first produce() only);
    poll() and flush() deliver what is queued and call its delivery callbacks, failing the values in
    `fail` (value -> error), unless `hold` keeps the reports in librdkafka's queue. Once `fatal` is set,
    produce() says only "Fatal error" while poll(), flush() and the transactional calls raise the
    cause, as librdkafka does once it is broken for good (fenced, say). `calls` counts the calls
    of each site ("Producer()", "Producer.produce", ...); `on_call` sees each call first, to raise
    there (test_error_boundary.py)."""

    def __init__(self, settings: dict, on_call: Callable[[str], None] | None = None) -> None:
        self.on_call = on_call
        self.calls: Counter[str] = Counter()
        self._called("Producer()")
        self.queued: list[tuple] = []  # (topic, value, key, partition, headers, callback)
        self.delivered: list[tuple] = []  # (topic, value, key, partition, headers)
        self.callbacks: list = []  # the delivery callback of every produce() call
        self.refuse: dict[bytes, KafkaError] = {}
        self.fail: dict[bytes, KafkaError] = {}
        self.full: set[bytes] = set()
        self.hold = False
        self.fatal: KafkaError | None = None
        self._next_offset: Counter[tuple[str, int]] = Counter()

    def _called(self, site: str) -> None:
        self.calls[site] += 1
        if self.on_call is not None:
            self.on_call(site)

    def _transactional(self, name: str) -> None:
        self._called(f"Producer.{name}")
        if self.fatal is not None:
            raise KafkaException(self.fatal)

    def list_topics(self, topic=None, timeout=None):
        self._called("Producer.list_topics")
        partitions = {0: SimpleNamespace(id=0, leader=1)}
        return SimpleNamespace(
            topics={topic: SimpleNamespace(partitions=partitions, error=None)} if topic else {},
            brokers={1: SimpleNamespace(id=1)},
        )

    def init_transactions(self, timeout=None) -> None:
        self._transactional("init_transactions")

    def begin_transaction(self) -> None:
        self._transactional("begin_transaction")

    def send_offsets_to_transaction(self, offsets, group_metadata, timeout=None) -> None:
        self._transactional("send_offsets_to_transaction")

    def commit_transaction(self, timeout=None) -> None:
        self._transactional("commit_transaction")

    def abort_transaction(self, timeout=None) -> None:
        self._transactional("abort_transaction")

    def produce(
        self,
        topic,
        value=None,
        key=None,
        partition=-1,
        on_delivery=None,
        callback=None,
        timestamp=0,
        headers=None,
    ) -> None:
        self._called("Producer.produce")
        callback = on_delivery or callback
        self.callbacks.append(callback)
        if self.fatal is not None:
            raise KafkaException(_FATAL_AT_PRODUCE)
        if value in self.full:
            self.full.discard(value)
            raise BufferError("Local: Queue full")
        if value in self.refuse:
            raise KafkaException(self.refuse[value])
        self.queued.append((topic, value, key, partition, headers, callback))

    def poll(self, timeout=None) -> int:
        self._called("Producer.poll")
        return self._serve()

    def flush(self, timeout=None) -> int:
        self._called("Producer.flush")
        return self._serve()

    def _serve(self) -> int:
        """Deliver what is queued, in order; returns how many reports are still waiting."""
        if self.fatal is not None:
            raise KafkaException(self.fatal)
        if self.hold:
            return len(self.queued)
        queued, self.queued = self.queued, []
        for topic, value, key, partition, headers, callback in queued:
            err, at, offset = self.fail.get(value), (topic, max(partition, 0)), -1
            if err is None:
                self.delivered.append((topic, value, key, partition, headers))
                offset = self._next_offset[at]
                self._next_offset[at] += 1
            if callback is not None:
                callback(err, Message(offset, key, value, error=err, topic=topic, partition=at[1]))
        return 0
