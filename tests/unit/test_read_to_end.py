"""`eos._kafka._reads.read_to_end`, the read of a whole topic that `eos dlq` and `eos.testing.read_topic`
share: when a partition is done, when the read gives up, what it raises. A scripted consumer plays the
broker (timeout 0 keeps the deadlines out of the tests' timing)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

import eos
from eos._kafka import _reads
from eos._kafka._reads import GroupReader, read_to_end
from eos.errors import BrokerUnreachableError
from tests.support.messages import Message


class Consumer:
    """Answers each poll with the next of `script` (None: nothing arrived), then nothing."""

    def __init__(self, *script) -> None:
        self.script = list(script)
        self.assigned = None
        self.polls = 0

    def assign(self, partitions) -> None:
        self.assigned = [(tp.topic, tp.partition, tp.offset) for tp in partitions]

    def poll(self, timeout):
        self.polls += 1
        return self.script.pop(0) if self.script else None

    def get_watermark_offsets(self, tp, timeout=None):
        return 0, 2  # every partition ends at 2


def eof(partition, offset):
    return Message(offset, error=KafkaError(KafkaError._PARTITION_EOF), partition=partition)


def record(partition, offset):
    return Message(offset, value=b"%d@%d" % (partition, offset), partition=partition)


def offsets(messages):
    return [(m.partition(), m.offset()) for m in messages]


def test_a_partition_is_done_at_an_eof_at_or_past_its_end():
    consumer = Consumer(record(0, 3), eof(0, 3), eof(1, 1), record(0, 4), record(1, 1), eof(1, 2), eof(0, 5))
    waiting = {0, 1}
    read = read_to_end(consumer, "t", {0: 3, 1: 0}, waiting, {0: 5, 1: 2}, timeout=60)
    assert offsets(read) == [(0, 3), (0, 4), (1, 1)]
    assert waiting == set() and consumer.script == []
    assert consumer.assigned == [("t", 0, 3), ("t", 1, 0)]


def test_without_ends_only_the_caller_ends_a_partition():
    consumer = Consumer(eof(0, 0), record(0, 0), record(0, 1), record(0, 2))
    waiting = {0}
    seen = []
    for msg in read_to_end(consumer, "t", {0: 0}, waiting, None, timeout=60):
        seen.append(msg.offset())
        if msg.offset() == 1:  # the caller's marker, say
            waiting.discard(0)
    assert seen == [0, 1] and len(consumer.script) == 1  # an EOF did not end it; the caller did


def test_the_read_gives_up_at_the_timeout_since_it_began_even_while_records_arrive():
    consumer = Consumer(record(0, 0), record(0, 1))
    waiting = {0}
    assert list(read_to_end(consumer, "t", {0: 0}, waiting, {0: 9}, timeout=0)) == []
    assert waiting == {0} and consumer.polls == 0


def test_an_idle_read_gives_up_only_after_a_poll_that_returned_nothing():
    consumer = Consumer(record(0, 0), record(0, 1), None, record(0, 2))
    waiting = {0}
    read = read_to_end(consumer, "t", {0: 0}, waiting, {0: 9}, timeout=0, idle=True)
    assert offsets(read) == [(0, 0), (0, 1)]
    assert waiting == {0} and consumer.polls == 3


def test_a_record_error_is_raised_as_the_clients_exception():
    error = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    consumer = Consumer(record(0, 0), Message(1, error=error))
    read = read_to_end(consumer, "t", {0: 0}, {0}, {0: 9}, timeout=60)
    assert next(read).offset() == 0
    with pytest.raises(KafkaException) as raised:
        next(read)
    assert raised.value.args[0] is error


def test_eos_dlqs_reader_reads_from_where_the_group_stands_and_says_which_partitions_went_quiet(monkeypatch):
    consumer = Consumer(record(1, 1), eof(1, 2))
    monkeypatch.setattr(_reads, "Consumer", lambda settings: consumer)
    reader = GroupReader(eos.Config(bootstrap_servers="127.0.0.1:1", app_id="a", output_topic="o"), "g", "it")
    read = reader.records("dlq", 3, {1: 1, 2: 2}, timeout=0)
    assert next(read).offset() == 1
    with pytest.raises(
        BrokerUnreachableError, match=r"^reading dlq: no record within 0s of partitions \[0\]$"
    ):
        next(read)  # partition 2 was at its end already, partition 1 reached it
    assert consumer.assigned == [("dlq", 0, 0), ("dlq", 1, 1), ("dlq", 2, 2)]
