"""OutputProducer and what it sends (`records`, the RecordCollector): a fatal error reported by produce()
or poll() carries its cause (fenced or not), and every refused or undelivered output of a bulk write is
mapped to its input record and error class."""

from __future__ import annotations

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException

from eos._kafka import _producer, _topics
from eos.config import Config
from eos.errors import (
    DeliveryFailedError,
    FatalError,
    FencedError,
    ProduceError,
    TransactionAbortableError,
)
from eos.records import Output, Outputs
from tests.support.producers import FakeClient

FENCED = KafkaError(
    KafkaError._FENCED, "Failed to add partitions to transaction: fenced by a newer instance", fatal=True
)


def output_producer(guarantee="exactly_once") -> tuple[_producer.OutputProducer, FakeClient]:
    """An OutputProducer on a FakeClient (the `fake_client` fixture) whose output topics exist."""
    config = Config(
        bootstrap_servers="127.0.0.1:1", app_id="app", output_topic="out", processing_guarantee=guarantee
    )
    tid = config.transactional_id("in", 0) if config.exactly_once else None
    producer = _producer.OutputProducer(config, tid)
    producer.records._known_topics.update({"out", "other"})
    return producer, producer._producer


def test_fatal_produce_error_caused_by_fencing_is_a_fenced_error(fake_client):
    producer, fake = output_producer()
    fake.fatal = FENCED
    with pytest.raises(FencedError, match="fenced"):
        producer.records.produce(Output(b"v"), "out", "in", 0, 7)
    with pytest.raises(FencedError):
        producer.records.flush_and_check("in", 0)


def test_fatal_produce_error_with_another_cause_stays_fatal(fake_client):
    producer, fake = output_producer()
    fake.fatal = KafkaError(KafkaError._INCONSISTENT, "something else", fatal=True)
    with pytest.raises(FatalError) as info:
        producer.records.produce(Output(b"v"), "out", "in", 0, 7)
    assert not isinstance(info.value, FencedError)


# -- bulk writes: which input record an error names ------------------------------------------------------


def _outputs(values, offsets=None, **kw) -> Outputs:
    offsets = list(range(100, 100 + len(values))) if offsets is None else offsets
    return Outputs(values=values, topic=kw.pop("topic", "out"), offsets=pa.array(offsets, pa.int64()), **kw)


TOO_LARGE = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "Broker: Message size too large")


def test_bulk_write_refused_at_once_names_that_record(fake_client):
    producer, fake = output_producer()
    fake.refuse[b"c"] = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "Local: Message size too large")
    with pytest.raises(ProduceError) as info:
        producer.records.produce_outputs(_outputs([b"a", b"b", b"c", b"d"]), "in", 0)
    assert (info.value.topic, info.value.partition, info.value.offset) == ("in", 0, 102)
    assert "'out' refused" in str(info.value)


def test_exactly_once_bulk_writes_note_only_witnesses(fake_client):
    """The shared callback notes each partition's last delivered offset (the transaction's witnesses),
    and that a delivery failed, not which: the flush says so without waiting for the rest (a failed
    transaction's queued records are never sent), and the redo names the record."""
    producer, fake = output_producer()
    fake.fail[b"c"] = TOO_LARGE
    assert producer.records.produce_outputs(_outputs([b"a", b"b", b"c", b"d"]), "in", 0) == 4
    assert set(fake.callbacks) == {producer.records._on_witness}
    with pytest.raises(DeliveryFailedError, match="redo one by one"):
        producer.records.flush_and_check("in", 0)
    assert producer.records.take_witnesses() == {("out", 0): 2}  # a, b, d delivered at 0, 1, 2
    assert producer.records.take_witnesses() == {}


def test_at_least_once_bulk_delivery_failure_says_the_record_is_not_known_yet(fake_client):
    producer, fake = output_producer("at_least_once")
    fake.fail[b"c"] = TOO_LARGE
    producer.records.produce_outputs(_outputs([b"a", b"b", b"c", b"d"]), "in", 0)
    with pytest.raises(DeliveryFailedError) as info:
        producer.records.flush_and_check("in", 0)
    assert isinstance(info.value, TransactionAbortableError)
    assert info.value.kafka_error.code() == KafkaError.MSG_SIZE_TOO_LARGE


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_the_record_by_record_redo_names_the_refused_record(fake_client, guarantee):
    producer, fake = output_producer(guarantee)
    fake.fail[b"c"] = TOO_LARGE
    producer.records.exact = True  # what the task sets before redoing the transaction
    producer.records.produce_outputs(_outputs([b"a", b"b", b"c", b"d"]), "in", 0)
    with pytest.raises(ProduceError) as info:
        producer.records.flush_and_check("in", 0)
    assert info.value.offset == 102
    assert "Message size too large" in str(info.value)


def test_exact_transient_delivery_failure_is_abortable_not_a_record_error(fake_client):
    producer, fake = output_producer()
    producer.records.exact = True
    fake.fail[b"b"] = KafkaError(KafkaError.NOT_ENOUGH_REPLICAS, "Broker: Not enough in-sync replicas")
    producer.records.produce_outputs(_outputs([b"a", b"b"]), "in", 0)
    with pytest.raises(TransactionAbortableError) as info:
        producer.records.flush_and_check("in", 0)
    assert not isinstance(info.value, DeliveryFailedError | ProduceError)


def test_fenced_delivery_is_a_fenced_error_in_either_mode(fake_client):
    for exact in (False, True):
        producer, fake = output_producer("at_least_once" if not exact else "exactly_once")
        producer.records.exact = exact
        fake.fail[b"a"] = KafkaError(KafkaError._FENCED, "fenced")
        producer.records.produce_outputs(_outputs([b"a"]), "in", 0)
        with pytest.raises(FencedError):
            producer.records.flush_and_check("in", 0)


def test_full_queue_is_served_and_the_record_retried_in_order(fake_client):
    producer, fake = output_producer()
    fake.full.add(b"b")
    producer.records.produce_outputs(_outputs([b"a", b"b", b"c"], keys=[b"1", None, b"3"]), "in", 0)
    producer.records.flush_and_check("in", 0)
    assert [(v, k) for _, v, k, _, _ in fake.delivered] == [(b"a", b"1"), (b"b", None), (b"c", b"3")]
    assert fake.calls["Producer.produce"] == 4


def test_per_record_topics_partitions_and_headers(fake_client):
    producer, fake = output_producer()
    outputs = _outputs(
        [b"a", b"b"], topic=["other", None], partitions=[3, None], headers=[[("h", b"1")], None]
    )
    producer.records.produce_outputs(outputs, "in", 0)
    producer.records.flush_and_check("in", 0)
    assert fake.delivered == [("other", b"a", None, 3, [("h", b"1")]), ("out", b"b", None, -1, None)]


class FakeFuture:
    def __init__(self, result=None, error: KafkaError | None = None) -> None:
        self._result, self._error = result, error

    def result(self, timeout=None):
        if self._error is not None:
            raise KafkaException(self._error)
        return self._result


class DescribingAdmin:
    """The admin client's DescribeTopics: `topics` maps a name to its authorized operations."""

    def __init__(self, topics: dict) -> None:
        self.topics = topics
        self.asked: list[str] = []

    def describe_topics(self, collection, request_timeout=None, include_authorized_operations=False):
        assert include_authorized_operations
        (name,) = collection.topic_names
        self.asked.append(name)
        if name not in self.topics:
            return {
                name: FakeFuture(error=KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, "Broker: Unknown topic"))
            }
        description = type("TopicDescription", (), {"authorized_operations": self.topics[name]})()
        return {name: FakeFuture(description)}


def test_topic_checks_ask_the_admin_client_never_the_producers_metadata(fake_client, monkeypatch):
    """A producer's metadata request for a missing topic creates it where auto.create.topics.enable is
    on; DescribeTopics does not. Each topic is looked up once."""
    from confluent_kafka.admin import AclOperation

    producer, fake = output_producer()
    producer.records._known_topics.clear()
    admin = DescribingAdmin({"out": [AclOperation.WRITE, AclOperation.READ], "other": [AclOperation.READ]})
    monkeypatch.setattr(_topics._clients, "admin", lambda config: admin)
    fake.list_topics = lambda *a, **k: pytest.fail("the producer must not request metadata of a topic")
    producer.records.produce_outputs(_outputs([b"a", b"b"]), "in", 0)
    producer.records.produce_outputs(_outputs([b"c"]), "in", 0)
    assert admin.asked == ["out"]
    with pytest.raises(ProduceError, match="no WRITE permission") as info:
        producer.records.produce_outputs(_outputs([b"x"], topic="other"), "in", 0)
    assert info.value.offset == 100


def test_missing_topic_of_a_process_batch_output_names_the_call(fake_client, monkeypatch):
    producer, _ = output_producer()
    monkeypatch.setattr(_topics._clients, "admin", lambda config: DescribingAdmin({}))
    outputs = Outputs(values=[b"a"], topic="typo", first=40, last=49)
    with pytest.raises(ProduceError) as info:
        producer.records.produce_outputs(outputs, "in", 0)
    assert info.value.offset == 40
    assert "'typo' is not available: it does not exist" in str(info.value)
    assert "process_batch over input offsets 40-49" in str(info.value)


def test_reports_purged_by_an_abort_do_not_fail_the_next_transaction(fake_client):
    """abort_transaction purges what is still queued; those _PURGE_QUEUE reports arrive at the next
    poll and belong to the aborted transaction (seen for real: the isolation of a refused record failed
    with "Purged in queue" on its second, healthy write)."""
    producer, fake = output_producer()
    purged = KafkaError(KafkaError._PURGE_QUEUE, "Local: Purged in queue")
    producer.records.exact = True
    fake.fail.update({b"a": purged, b"b": purged})
    fake.hold = True
    producer.records.produce_outputs(_outputs([b"a", b"b"]), "in", 0)
    fake.hold = False  # the purged reports are served at the first poll after the abort
    producer.abort_transaction()
    fake.fail.clear()
    producer.records.produce_outputs(_outputs([b"c"], offsets=[102]), "in", 0)
    producer.records.flush_and_check("in", 0)
    assert [v for _, v, *_ in fake.delivered] == [b"c"]
