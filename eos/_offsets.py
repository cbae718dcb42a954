"""The input offsets of the group `app_id`: read (require-stable), committed (at_least_once), and
the group metadata that `send_offsets_to_transaction` needs (exactly_once)."""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

from eos import _clients
from eos._retry import Deadline, retry_call
from eos.config import Config
from eos.errors import AuthenticationError, BrokerUnreachableError, TopicNotFoundError, kafka_error_of


def committed(config: Config, tps: Iterable[tuple[str, int]], log=None) -> dict[tuple[str, int], int | None]:
    """Committed offset per (topic, partition), or None where the group has none.

    require_stable: while a transaction that carries offsets for a partition is still open, the broker
    answers UNSTABLE_OFFSET_COMMIT (retriable) instead of an offset that may be about to change.
    """
    request = [ConsumerGroupTopicPartitions(config.app_id, [TopicPartition(t, p) for t, p in tps])]
    timeout_s = config.operation_timeout_ms / 1000

    def fetch() -> dict[tuple[str, int], int | None]:
        futures = _clients.admin(config).list_consumer_group_offsets(
            request, require_stable=True, request_timeout=timeout_s
        )
        result = futures[config.app_id].result()
        out: dict[tuple[str, int], int | None] = {}
        for tp in result.topic_partitions:
            if tp.error is not None:
                raise KafkaException(tp.error)
            out[(tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 else None
        return out

    return retry_call(
        fetch, what=f"reading committed offsets of group {config.app_id!r}", timeout_s=timeout_s, log=log
    )


def commit(config: Config, topic: str, partition: int, next_offset: int, log=None) -> None:
    """Synchronously commit `next_offset` for the group (the at_least_once path)."""
    consumer = _clients.group_consumer(config)
    retry_call(
        lambda: consumer.commit(offsets=[TopicPartition(topic, partition, next_offset)], asynchronous=False),
        what=f"committing offset {topic}/{partition}@{next_offset} for group {config.app_id!r}",
        timeout_s=config.operation_timeout_ms / 1000,
        log=log,
    )


def group_metadata(config: Config):
    return _clients.group_consumer(config).consumer_group_metadata()


def topic_partitions(config: Config, topics: Iterable[str]) -> dict[str, int]:
    """Partition count per topic; raises BrokerUnreachableError if no broker answers in time and
    EosError subclasses for topics that are missing (the caller decides which)."""
    timeout_s = config.operation_timeout_ms / 1000
    deadline = Deadline(timeout_s)
    client = _clients.admin(config)
    while True:
        # Short attempts, so refused credentials surface at once rather than at the deadline.
        try:
            metadata = client.list_topics(timeout=min(1.0, max(deadline.remaining(), 0.1)))
            break
        except KafkaException as exc:
            client.poll(0)  # serves the error callback that records refused credentials
            refused = _clients.authentication_failure(config)
            if refused is not None:
                raise AuthenticationError(
                    f"the broker at {config.bootstrap_servers} refused the credentials: {refused.str()}"
                ) from exc
            if deadline.expired():
                err = kafka_error_of(exc)
                raise BrokerUnreachableError(
                    f"no Kafka broker at {config.bootstrap_servers} answered within {timeout_s:g}s"
                    f" ({err.str() if err else exc})"
                ) from exc
    out: dict[str, int] = {}
    for topic in topics:
        md = metadata.topics.get(topic)
        if md is None or md.error is not None:
            continue
        out[topic] = len(md.partitions)
    return out


def require_topics(config: Config, topics: Iterable[str], role: str) -> dict[str, int]:
    """`topic_partitions`, raising TopicNotFoundError for the first of `topics` that is missing."""
    topics = list(topics)
    found = topic_partitions(config, topics)
    for topic in topics:
        if topic not in found:
            raise TopicNotFoundError(topic, role)
    return found
