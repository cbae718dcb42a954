"""Reading a transaction's witnesses back on the real broker (eos/_kafka/_witness.py): a committed record
is seen, an aborted one is told apart from one retention removed, and a transaction still open is not
taken for an aborted one."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

import eos
from eos import testing
from eos._kafka import _witness
from eos.errors import RetriableError


def _transaction(bootstrap, tid, topic, partition, values):
    """A transactional producer with `values` produced to topic/partition in an open transaction; the
    offset of the last."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    producer.init_transactions(30)
    producer.begin_transaction()
    offsets = []
    for value in values:
        producer.produce(
            topic, value, partition=partition, on_delivery=lambda e, m: offsets.append(m.offset())
        )
    assert producer.flush(30) == 0
    return producer, max(offsets)


def test_committed_aborted_gone_and_undecided_witnesses(bootstrap, names):
    topic = names("out")
    testing.create_topic(bootstrap, topic, 4)
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=topic,
        operation_timeout_ms=3_000,
        transaction_timeout_ms=4_000,  # an open transaction is waited for this + 10 s
        commit_interval_ms=1_000,
    )
    committed, at_0 = _transaction(bootstrap, names("t0"), topic, 0, [b"a", b"b"])
    committed.commit_transaction(30)
    aborted, at_1 = _transaction(bootstrap, names("t1"), topic, 1, [b"c"])
    aborted.abort_transaction(30)
    gone, at_2 = _transaction(bootstrap, names("t2"), topic, 2, [b"d"])
    gone.commit_transaction(30)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if not hasattr(admin, "delete_records"):
        pytest.skip("this confluent-kafka has no delete_records")
    admin.delete_records([TopicPartition(topic, 2, at_2 + 1)])[TopicPartition(topic, 2, at_2 + 1)].result(30)
    # Others' records after each witness: the read must tell the witness from its neighbours.
    after, _ = _transaction(bootstrap, names("t3"), topic, 1, [b"e"])
    after.commit_transaction(30)

    # A witness past its partition's end (the topic recreated, the partition truncated): gone, at once.
    verdict = _witness.invisible(
        config, {(topic, 0): at_0, (topic, 1): at_1, (topic, 2): at_2, (topic, 3): 10_000_000}
    )
    assert verdict.aborted == ((topic, 1, at_1),)
    assert verdict.gone == ((topic, 2, at_2), (topic, 3, 10_000_000))

    # A transaction still open at the witness: waited for up to operation_timeout_ms, then a retriable
    # error, never a verdict of "aborted".
    open_, at_3 = _transaction(bootstrap, names("t4"), topic, 3, [b"f"])
    with pytest.raises(RetriableError, match=f"{topic}/3 has a transaction still open"):
        _witness.invisible(config, {(topic, 3): at_3})
    open_.commit_transaction(30)
    assert _witness.invisible(config, {(topic, 3): at_3}) == _witness.Verdict((), ())
