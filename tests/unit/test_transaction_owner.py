"""The output producer is the one owner of a transaction's life (Kafka Streams' StreamsProducer): it
begins one lazily, at the first record or offsets sent into it, knows whether one is open, and ends it.
Nothing else in eos begins one; the unit tests' stand-in keeps the same rule and the same methods."""

from __future__ import annotations

import inspect
from pathlib import Path

import eos
from eos._core._transaction import Transaction
from eos._kafka._collector import RecordCollector
from eos._kafka._producer import OutputProducer
from eos._scope import PartitionScope
from eos.records import Output, Outputs
from tests.support.configs import config
from tests.support.producers import FakeOutputProducer, FakeRecords

EOS = Path(eos.__file__).parent


def begins(producer: OutputProducer) -> int:
    return producer._producer.calls["Producer.begin_transaction"]


def exactly_once() -> eos.Config:
    return config(processing_guarantee="exactly_once")


def test_a_transaction_begins_at_its_first_record_once(fake_client):
    cfg = exactly_once()
    producer = OutputProducer(cfg, cfg.transactional_id("in", 0))
    Transaction(PartitionScope(cfg, "in", 0, 0, None, log=None), producer)
    assert not producer.in_transaction and begins(producer) == 0, "a Transaction alone begins nothing"
    producer.records._known_topics.add("out")  # the topic check asks a broker
    producer.records.produce(Output(b"a"), "out", "in", 0, 0)
    producer.records.produce_outputs(Outputs([b"b", b"c"], "out", first=1, last=2), "in", 0)
    producer.records.produce_changelog("out", 0, [(b"k", b"v", [], 3)], "in", 0)
    assert producer.in_transaction and begins(producer) == 1
    producer.send_offsets([("in", 0, 4)], None)
    producer.commit_transaction()
    assert not producer.in_transaction
    producer.send_offsets([("in", 0, 4)], None)  # offsets alone (a kept producer's check) begin one too
    assert producer.in_transaction and begins(producer) == 2
    producer.abort_transaction()
    assert not producer.in_transaction


def test_nothing_sent_begins_nothing(fake_client):
    cfg = exactly_once()
    producer = OutputProducer(cfg, cfg.transactional_id("in", 0))
    assert producer.records.produce_outputs(Outputs([], "out"), "in", 0) == 0
    assert not producer.in_transaction and begins(producer) == 0


def test_at_least_once_never_begins_one(fake_client):
    producer = OutputProducer(config(processing_guarantee="at_least_once"), None)
    producer.records._known_topics.add("out")
    producer.records.produce(Output(b"a"), "out", "in", 0, 0)
    assert not producer.in_transaction and begins(producer) == 0


def test_only_the_output_producer_begins_a_transaction():
    callers = [
        f"{path.relative_to(EOS)}:{n}"
        for path in EOS.rglob("*.py")
        if path.name != "_producer.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "begin_transaction" in line
    ]
    assert callers == []


def _public(cls) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }


def test_the_fake_producer_offers_what_the_real_one_offers_and_nothing_else():
    """The core calls FakeOutputProducer as it calls OutputProducer: the same public methods with the
    same parameters (the fake's `step` and `write` are its own bookkeeping)."""
    real, fake = _public(OutputProducer), _public(FakeOutputProducer)
    fake.pop("step"), fake.pop("write")
    assert fake.keys() == real.keys()
    for name, signature in real.items():
        assert list(fake[name].parameters) == list(signature.parameters), name


def test_the_fake_records_offer_what_the_core_calls_of_the_real_ones():
    real, fake = _public(RecordCollector), _public(FakeRecords)
    assert fake.keys() <= real.keys(), fake.keys() - real.keys()
    for name in fake:
        params = [p for p in fake[name].parameters if p != "changelog"]
        assert params == list(real[name].parameters), name
