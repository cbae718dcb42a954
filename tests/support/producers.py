"""The producer stand-ins of the unit tests, one per level eos writes through:

- `FakeClient` plays librdkafka (`confluent_kafka.Producer`), under the real `OutputProducer` and its
  `RecordCollector`: what eos makes of queueing, refusals, delivery reports and fatal errors.
- `FakeOutputProducer` plays `eos._kafka._producer.OutputProducer` and its `records`, under the real
  core (`PartitionTask`, `Incarnation`, `Writer`, `Transaction`) and state: each step can be made to
  fail, and what commits lands in a `FakeKafka`.

A test that needs a fault of its own configures these (or patches one method) rather than writing
another fake.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from types import SimpleNamespace
from typing import NamedTuple

from confluent_kafka import KafkaError, KafkaException

import eos
from eos._kafka import _collector, _offsets
from eos.records import Output
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


# -- OutputProducer --------------------------------------------------------------------------------------


class Produced(NamedTuple):
    """One records.produce() call (outputs, dead letters, changelog records), aborted ones too."""

    topic: str
    out: Output
    in_topic: str
    in_partition: int
    in_offset: int
    changelog: bool


class FakeKafka:
    """What a partition task reaches of Kafka (the `kafka` fixture puts it there): committed outputs and
    group offsets as a read_committed reader would see them, and the producers the worker hands out
    (`_pool.acquire`, a fresh `OutputProducer`) with what became of them."""

    def __init__(self, input_topics=("in",)) -> None:
        #: the topics a producer may warm up with (init_transactions' `known_topic`: the input topic)
        self.input_topics = set(input_topics)
        self.group_metadata = object()  # what `_offsets.group_metadata` returns
        self.outputs: list[tuple[str, bytes, int]] = []  # (topic, value, input offset), committed only
        self.offsets: dict[tuple[str, int], int] = {}
        self.offset_commits: list[int] = []
        self.events: list[tuple] = []
        self.produced: list[Produced] = []
        self.kept: FakeOutputProducer | None = None  # handed out by acquire() as kept from an earlier task
        self.acquired: list[str | None] = []
        self.created: list[FakeOutputProducer] = []
        self.released: list[FakeOutputProducer] = []
        self.discarded: list[FakeOutputProducer] = []
        self.setup: Callable[[FakeOutputProducer], None] = lambda producer: None  # for every new producer

    def producer(self, config, transactional_id) -> FakeOutputProducer:
        p = FakeOutputProducer(self, transactional_id, initialized=False)
        self.setup(p)
        self.created.append(p)
        return p

    def acquire(self, config, transactional_id):
        self.acquired.append(transactional_id)
        if self.kept is not None:
            kept, self.kept = self.kept, None
            return kept, True
        return self.producer(config, transactional_id), False

    def values(self) -> list[bytes]:
        return [v for _, v, _ in self.outputs]

    def committed_entries(self, config, tps, log=None, wait=True):
        """`_offsets.committed_entries`: each partition's committed offset, stamped as this app's."""
        return {
            tp: None
            if self.offsets.get(tp) is None
            else _offsets.Committed(self.offsets[tp], _offsets.stamp(config))
            for tp in tps
        }

    def commit(self, config, topic, partition, next_offset, log=None, metadata=None):
        """`_offsets.commit` (at_least_once): the group offset, committed at once."""
        self.events.append(("offset_commit", next_offset))
        self.offsets[(topic, partition)] = next_offset
        self.offset_commits.append(next_offset)


class FakeOutputProducer:
    """The OutputProducer the core uses: its transactions, and what it sends in `records`. `calls` lists
    every step in order, the records' "produce" and "flush" too; `fail[step]` lists what successive
    calls of that step do (None succeeds, an exception is raised, a callable is called and may raise),
    and `fail_at_offset[offset]` the same for producing that input record's outputs."""

    def __init__(
        self, kafka: FakeKafka | None = None, transactional_id: str | None = None, initialized: bool = False
    ) -> None:
        self.kafka = kafka if kafka is not None else FakeKafka()
        self.transactional_id = transactional_id
        self.initialized = initialized
        self.in_transaction = False
        self.committed_stamp: str | None = None
        self.open: list[tuple[str, bytes, int]] = []
        self.open_offsets: dict[tuple[str, int], int] = {}
        self.fail: dict[str, list] = {}
        self.fail_at_offset: dict[int, list] = {}
        self.calls: list[str] = []
        self.records = FakeRecords(self)

    def step(self, name: str, queue: list | None = None) -> None:
        self.calls.append(name)
        self.kafka.events.append((name, self))
        queue = self.fail.get(name) if queue is None else queue
        action = queue.pop(0) if queue else None
        if isinstance(action, BaseException):
            raise action
        if callable(action):
            action()

    def init_transactions(self, log=None, known_topic=None) -> None:
        assert known_topic in self.kafka.input_topics, "metadata of the input topic warms it up"
        self.step("init")
        self.initialized = True

    def _maybe_begin(self, log=None) -> None:
        """As OutputProducer's: the first produce or send_offsets of a transaction begins it."""
        if self.transactional_id is not None and not self.in_transaction:
            self.step("begin")
            self.in_transaction = True

    def send_offsets(self, offsets, group_metadata, log=None) -> None:
        self._maybe_begin()
        self.step("send_offsets")
        assert group_metadata is self.kafka.group_metadata
        self.open_offsets = {(topic, partition): offset for topic, partition, offset, *_ in offsets}

    def commit_transaction(self, log=None) -> None:
        self.step("commit")
        self.kafka.outputs.extend(self.open)
        self.kafka.offsets.update(self.open_offsets)
        self.kafka.offset_commits.extend(self.open_offsets.values())
        self.open, self.open_offsets, self.in_transaction = [], {}, False

    def abort_transaction(self, log=None) -> None:
        self.step("abort")
        self.open, self.open_offsets, self.in_transaction = [], {}, False
        self.records.delivery_failed = False

    def close(self) -> None:
        """As OutputProducer's: an open transaction is abandoned (the next init_transactions aborts it)."""
        self.open, self.open_offsets, self.in_transaction = [], {}, False

    def write(self, record: tuple[str, bytes, int]) -> None:
        """A produced (topic, value, input offset): visible at once without a transaction (idempotent)."""
        if self.transactional_id is None:
            self.kafka.outputs.append(record)
        else:
            assert self.in_transaction, "produce outside a transaction"
            self.open.append(record)


class FakeRecords:
    """The RecordCollector of a FakeOutputProducer. The broker refuses the outputs of the input offsets
    in `undeliverable` (a dead letter, topic "dlq", is delivered); with `batch_refusal`, as a broker does,
    a refusal fails every output of the transaction. `delivered_offsets` (what the state reads after a
    commit) is the test's to set."""

    def __init__(self, producer: FakeOutputProducer) -> None:
        self.producer = producer
        self.exact = False
        self.exact_rows: list[int] = []  # input offsets produced with exact delivery tracking
        self.undeliverable: set[int] = set()
        self.batch_refusal = False
        #: as RecordCollector's: a delivery of the open transaction failed (the producer is then replaced)
        self.delivery_failed = False
        self.delivered_offsets: dict[tuple[str, int], int] = {}

    def produce(self, out: Output, topic, in_topic, in_partition, in_offset, changelog=False) -> None:
        self.producer._maybe_begin()
        self.producer.step("produce", self.producer.fail_at_offset.get(in_offset))
        produced = Produced(topic, out, in_topic, in_partition, in_offset, changelog)
        self.producer.kafka.produced.append(produced)
        self.producer.write((topic, out.value, in_offset))

    def produce_changelog(self, topic, partition, records, in_topic, in_partition) -> None:
        for key, value, headers, in_offset in records:
            out = Output(value, key, headers, partition=partition)
            self.produce(out, topic, in_topic, in_partition, in_offset, changelog=True)

    def produce_outputs(self, outputs, in_topic, in_partition) -> int:
        if len(outputs):
            self.producer._maybe_begin()
        for i, value in enumerate(_collector._listed(outputs.values)):
            offset = outputs.offset_of(i)
            self.producer.step("produce", self.producer.fail_at_offset.get(offset))
            if self.exact:
                self.exact_rows.append(offset)
            topic = outputs.topic[i] if isinstance(outputs.topic, list) else outputs.topic
            self.producer.write((topic, value, offset))
        return len(outputs)

    def take_witnesses(self) -> dict[tuple[str, int], int]:
        """The fake broker keeps no offsets: a transaction has no witnesses to stamp."""
        return {}

    def forget(self) -> None:
        """As RecordCollector's: the failures of an ended transaction are gone."""
        self.delivery_failed = False

    def flush_and_check(self, in_topic, in_partition) -> None:
        self.producer.step("flush")
        open_ = self.producer.open
        refused = sorted(o for t, _, o in open_ if o in self.undeliverable and t != "dlq")
        if refused:
            self.delivery_failed = True
            if not self.exact:
                raise eos.DeliveryFailedError("delivery failed (bulk: record unknown)")
            if self.batch_refusal:
                refused = sorted({o for _, _, o in open_})
            raise eos.ProduceError(
                "refused by the broker",
                topic=in_topic,
                partition=in_partition,
                offset=refused[0],
                candidates=tuple(refused),
                poison=True,  # as a record too large for the topic is
            )
