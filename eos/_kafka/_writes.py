"""Writes outside a partition task: `eos dlq replay`'s transactional copy of what a `GroupReader` read
(`TransactionalCopier`), and `eos.testing`'s input and markers (`PlainProducer`).

The copier passes three crash points of `eos._crash` (EOS_CRASH_AT / EOS_PAUSE_AT), for the tests of a
replay killed or stopped mid-way: `replay_before_fence` (before init_transactions), and per chunk
`replay_after_send_offsets` (the chunk's copies and offsets sent, not committed) and
`replay_after_commit`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from confluent_kafka import Message, Producer

from eos import _crash
from eos._kafka import _clients
from eos._kafka._producer import OutputProducer
from eos._kafka._reads import GroupReader
from eos.config import Config
from eos.records import Output


def _produce(producer: Producer, topic: str, value, key=None, partition: int = -1, headers=None) -> None:
    """produce(), waiting while the client's queue is full (BufferError) rather than failing."""
    while True:
        try:
            producer.produce(topic, value, key, partition=partition, headers=headers)
            return
        except BufferError:
            producer.poll(0.1)


class TransactionalCopier:
    """A transactional producer whose transactions also commit `reader`'s positions for its group, as
    eos's tasks commit their input offsets: a copy that fails or is killed and is run again copies
    nothing twice. Its transactional.id is the group's. Its transactions are an `OutputProducer`'s, the
    one owner of a transaction's life: begun by the first copy, ended by `commit`.

    Created, it has fenced every earlier copier of the group (init_transactions): a transaction such
    a one left open is aborted, one whose commit had begun is complete. Only then may the caller read
    where the group stands (`GroupReader.committed`)."""

    def __init__(self, config: Config, reader: GroupReader, timeout: float) -> None:
        self.reader = reader
        timed = attrs.evolve(config, operation_timeout_ms=max(1, round(timeout * 1000)))
        self._producer = OutputProducer(timed, reader.group)
        _crash.point("replay_before_fence")
        self._producer.init_transactions()

    def produce(self, topic: str, value: bytes | None, key: bytes | None, headers, source: Message) -> None:
        """A copy of `source` (its topic, partition and offset name it in errors)."""
        out = Output(value, key, headers or None)
        self._producer.records.produce(out, topic, source.topic(), source.partition(), source.offset())

    def commit(self) -> None:
        """The open transaction's copies and the reader's positions, committed together."""
        offsets = [(tp.topic, tp.partition, tp.offset) for tp in self.reader.positions()]
        self._producer.send_offsets(offsets, self.reader.group_metadata())
        _crash.point("replay_after_send_offsets")
        self._producer.commit_transaction()
        _crash.point("replay_after_commit")

    def close(self) -> None:
        self._producer.close()


class PlainProducer:
    """A producer of `bootstrap` alone (no Config: eos.testing works against any cluster), not
    transactional. Raises what confluent-kafka raises, as eos.testing always has."""

    def __init__(self, bootstrap: str, settings: Mapping[str, Any] | None = None) -> None:
        self._producer = Producer(_clients.with_logger({"bootstrap.servers": bootstrap, **(settings or {})}))

    def partitions(self, topic: str, timeout: float) -> list[int]:
        return list(self._producer.list_topics(topic, timeout=timeout).topics[topic].partitions)

    def produce(
        self, topic: str, value: bytes, key: bytes | None = None, partition: int = -1, headers=None
    ) -> None:
        _produce(self._producer, topic, value, key, partition, headers)

    def flush(self, timeout: float) -> int:
        """Wait for delivery; how many records are still undelivered after `timeout`."""
        return self._producer.flush(timeout)
