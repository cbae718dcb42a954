"""The progress topic of `input_mode="any"` (docs/protocol.md, "Any DataFrame"): created, or grown to
`parts` partitions, before a part's transaction commits an offset to it."""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewPartitions, NewTopic

from eos import _names
from eos._kafka import _clients, _offsets, _translate
from eos.config import Config

#: progress topics known to have at least so many partitions in this process, by (bootstrap, name): the
#: driver asks once per sink, a `format("eos")` task once per Python worker, not once per batch or task
_known_parts: dict[tuple[str, str], int] = {}


def ensure_parts_topic(config: Config) -> None:
    """The progress topic, with at least `parts` partitions (created, or grown). It never holds a record:
    the broker accepts transactional offset commits only for partitions that exist."""
    name = _names.parts_topic(config.app_id)
    known = (config.bootstrap_servers, name)
    if _known_parts.get(known, 0) >= config.parts:
        return
    if _grow_parts_topic(config, name):
        _known_parts[known] = max(_known_parts.get(known, 0), config.parts)


def _grow_parts_topic(config: Config, name: str) -> bool:
    """Create or grow the topic; whether its metadata shows `parts` partitions before the deadline."""
    admin = _clients.admin(config)
    timeout = config.operation_timeout_ms / 1000
    have = _offsets.topic_partitions(config, [name]).get(name)

    def ignore_exists(futures) -> None:
        try:
            futures[name].result(timeout)
        except KafkaException as exc:
            error = _translate.kafka_error_of(exc)
            if error is None or error.code() not in (
                KafkaError.TOPIC_ALREADY_EXISTS,
                KafkaError.INVALID_PARTITIONS,
            ):
                raise

    if have is None:
        new = NewTopic(
            name,
            config.parts,
            config.changelog_replication_factor,
            config={"cleanup.policy": "compact"},
        )
        _translate.call(
            lambda: ignore_exists(admin.create_topics([new], request_timeout=timeout)),
            what=f"creating the progress topic {name!r}",
            timeout_s=timeout,
        )
    elif have < config.parts:
        _translate.call(
            lambda: ignore_exists(admin.create_partitions([NewPartitions(name, config.parts)])),
            what=f"adding partitions to the progress topic {name!r}",
            timeout_s=timeout,
        )
    else:
        return True
    deadline = _translate.Deadline(timeout)
    while not deadline.expired():
        count = _offsets.topic_partitions(config, [name]).get(name, 0)
        if count >= config.parts:
            return True
        time.sleep(0.1)
    return False
