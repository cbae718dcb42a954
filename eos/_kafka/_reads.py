"""Reads by assignment that commit nothing: what a task needs to know of its input beyond the rows it
was handed (`unseen_record`, step 3a of docs/protocol.md), and reads of a whole topic to its end
(`read_to_end`): `eos dlq` reads the dead-letter topic so (`GroupReader`), `eos.testing` an output
topic (`whole_topic`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from eos._kafka import _clients, _translate
from eos.config import Config
from eos.errors import BrokerUnreachableError


def unseen_record(config: Config, topic: str, partition: int, committed: int, first: int) -> int | None:
    """The offset of a readable input record at or after `committed` and before `first` (the task's
    first row), or None where there is none."""
    tp = TopicPartition(topic, partition)
    timeout = config.operation_timeout_ms / 1000
    where = f"reading input {topic}/{partition}"
    consumer = _clients.restore_consumer(config)  # read_committed, by assignment, never commits
    low, stable_end = _translate.call(
        lambda: consumer.get_watermark_offsets(tp, timeout=timeout), what=where, timeout_s=timeout
    )
    start = max(committed, low)
    if start >= min(first, stable_end):
        return None
    _translate.call(
        lambda: consumer.assign([TopicPartition(topic, partition, start)]), what=where, timeout_s=timeout
    )
    try:
        deadline = _translate.Deadline(timeout)
        while not deadline.expired():
            with _translate.translating(where):
                message = consumer.poll(0.5)
            if message is None:
                continue
            err = message.error()
            if err is None:
                return message.offset() if message.offset() < first else None
            if err.code() == KafkaError._PARTITION_EOF:
                return None
            raise _translate.translate_error(err, where)
        raise _translate.translate_error(KafkaError(KafkaError._TIMED_OUT), f"{where} from offset {start}")
    finally:
        consumer.unassign()


def read_to_end(
    consumer: Consumer,
    topic: str,
    start: Mapping[int, int],
    waiting: set[int],
    ends: Mapping[int, int] | None,
    timeout: float,
    idle: bool = False,
) -> Iterator[Message]:
    """Assign `topic`'s partitions at their `start` offsets (the consumer has enable.partition.eof set)
    and yield their records until `waiting` is empty. A partition leaves `waiting` at an EOF at or past
    its `ends` offset; with `ends` None only where the caller discards it (at a marker, say).

    The read gives up once `timeout` has passed: since it began, or (`idle`) since the last record and
    only after a poll that returned nothing, so the caller's own time between records does not count.
    What is then still in `waiting` was not read to its end. A record's error is raised as the client's
    KafkaException, for the caller to translate (or, for eos.testing, not)."""
    consumer.assign([TopicPartition(topic, p, offset) for p, offset in start.items()])
    deadline = _translate.Deadline(timeout)
    quiet = False  # the last poll returned nothing
    while waiting and not (deadline.expired() and (quiet or not idle)):
        msg = consumer.poll(0.5)
        quiet = msg is None
        if msg is None:
            continue
        if idle:
            deadline = _translate.Deadline(timeout)
        err = msg.error()
        if err is None:
            yield msg
        elif err.code() == KafkaError._PARTITION_EOF:
            if ends is not None and msg.offset() >= ends[msg.partition()]:
                waiting.discard(msg.partition())
        else:
            raise KafkaException(err)


class GroupReader:
    """A read_committed consumer of `group` that reads a topic by assignment to its end and commits
    nothing itself: `eos dlq show` reads the dead-letter topic with it, `eos dlq replay` copies what it
    read in transactions that commit its positions for the group (`_writes.TransactionalCopier`).
    `what` names the consumer in errors."""

    def __init__(self, config: Config, group: str, what: str) -> None:
        self.group = group
        settings = _clients.consumer_settings(config, **{"group.id": group, "enable.partition.eof": True})
        with _translate.translating(f"creating {what}"):
            self._consumer = Consumer(_clients.with_logger(settings))

    def records(
        self, topic: str, partitions: int, start: Mapping[int, int], timeout: float
    ) -> Iterator[Message]:
        """The committed records of `topic` from `start` (per partition; else the beginning) to its end
        as of the call, per partition in offset order. read_committed: the end is the last stable offset
        (what an open transaction wrote above it is not returned). No record for `timeout` while a
        partition is short of its end: BrokerUnreachableError."""
        ends = {}
        for p in range(partitions):
            with _translate.translating(f"reading the end of {topic}/{p}"):
                ends[p] = self._consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
        offsets = {p: start.get(p, 0) for p in range(partitions)}
        waiting = {p for p in range(partitions) if offsets[p] < ends[p]}
        with _translate.translating(f"reading {topic}"):
            yield from read_to_end(self._consumer, topic, offsets, waiting, ends, timeout, idle=True)
        if waiting:
            raise BrokerUnreachableError(
                f"reading {topic}: no record within {timeout:g}s of partitions {sorted(waiting)}"
            )

    def committed(self, topic: str, partitions: int, timeout: float) -> dict[int, int]:
        """The group's committed offset per partition of `topic` that has one, stable: read_committed
        makes librdkafka ask with require_stable, so while a transaction holding offsets for the group is
        open the broker does not answer with the offset before it (librdkafka asks again until
        `timeout`). `eos dlq replay` asks only once its producer has fenced every earlier run of the
        group, whose transaction has then ended one way or the other."""
        request = [TopicPartition(topic, p) for p in range(partitions)]
        what = f"reading the committed offsets of group {self.group!r} for {topic}"
        with _translate.translating(what):
            found = self._consumer.committed(request, timeout=timeout)
        out = {}
        for tp in found:
            if tp.error is not None:
                raise _translate.translate_error(tp.error, f"{what}/{tp.partition}")
            if tp.offset >= 0:
                out[tp.partition] = tp.offset
        return out

    def positions(self) -> list[TopicPartition]:
        """Where the read stands in each partition that has a position: the offsets a copy commits."""
        return [tp for tp in self._consumer.position(self._consumer.assignment()) if tp.offset >= 0]

    def group_metadata(self):
        return self._consumer.consumer_group_metadata()

    def close(self) -> None:
        self._consumer.close()


def whole_topic(
    bootstrap: str, topic: str, isolation: str, waiting: set[int], *, to_end: bool, timeout: float
) -> Iterator[Message]:
    """Every record of `topic` from offset 0, read by a consumer of `bootstrap` alone, in a group of its
    own that commits nothing (`eos.testing.read_topic`). `waiting` is filled with the topic's
    partitions; one is done at its end as of the start (`to_end`), else where the caller discards it
    (at its marker); what is left after `timeout` was not done. Raises what confluent-kafka raises, as
    eos.testing always has."""
    consumer = Consumer(
        _clients.with_logger(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"eos-verify-{uuid.uuid4().hex}",
                "isolation.level": isolation,
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
            }
        )
    )
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        ends = None
        if to_end:
            ends = {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions
            }
        waiting.update(partitions)
        yield from read_to_end(consumer, topic, dict.fromkeys(partitions, 0), waiting, ends, timeout)
    finally:
        consumer.close()
