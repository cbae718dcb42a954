"""OutputProducer: a fatal error reported by produce() or poll() carries its cause (fenced or not)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from eos import _producer
from eos.config import Config
from eos.errors import FatalError, FencedError
from eos.records import Output

FENCED = KafkaError(
    KafkaError._FENCED, "Failed to add partitions to transaction: fenced by a newer instance", fatal=True
)


class FencedProducer:
    """librdkafka after AddPartitionsToTxn was refused: produce() says only "Fatal error", poll() and
    flush() raise the cause."""

    def __init__(self, settings, cause=FENCED):
        self.cause = cause

    def produce(self, *args, **kwargs):
        raise KafkaException(KafkaError(KafkaError._FATAL, "Unable to produce message: Local: Fatal error"))

    def poll(self, timeout=None):
        raise KafkaException(self.cause)

    def flush(self, timeout=None):
        raise KafkaException(self.cause)


def _producer_with(monkeypatch, fake):
    monkeypatch.setattr(_producer, "Producer", fake)
    config = Config(
        bootstrap_servers="127.0.0.1:1", app_id="app", output_topic="out", processing_guarantee="exactly_once"
    )
    producer = _producer.OutputProducer(config, config.transactional_id("in", 0))
    producer._known_topics.add("out")
    return producer


def test_fatal_produce_error_caused_by_fencing_is_a_fenced_error(monkeypatch):
    producer = _producer_with(monkeypatch, FencedProducer)
    with pytest.raises(FencedError, match="fenced"):
        producer.produce(Output(b"v"), "out", "in", 0, 7)
    with pytest.raises(FencedError):
        producer.flush_and_check("in", 0)


def test_fatal_produce_error_with_another_cause_stays_fatal(monkeypatch):
    cause = KafkaError(KafkaError._INCONSISTENT, "something else", fatal=True)
    producer = _producer_with(monkeypatch, lambda settings: FencedProducer(settings, cause))
    with pytest.raises(FatalError) as info:
        producer.produce(Output(b"v"), "out", "in", 0, 7)
    assert not isinstance(info.value, FencedError)
