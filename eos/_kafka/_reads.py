"""Reads of a topic-partition by assignment, read_committed, that commit nothing: what a task needs to
know of its input beyond the rows it was handed (step 3a of docs/protocol.md)."""

from __future__ import annotations

from confluent_kafka import KafkaError, TopicPartition

from eos._kafka import _clients, _translate
from eos.config import Config


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
