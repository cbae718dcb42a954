"""Settings for every Kafka client eos creates, built in one place from `Config`.

`Config.kafka` (security settings and the like) reaches the producer, the consumers, the admin client
and the Spark Kafka source alike. Client instances are cached per Python process: executors' Python
workers are reused across tasks, and a new client per batch would cost a connection set-up each time.
"""

from __future__ import annotations

import threading
from typing import Any

from confluent_kafka import Consumer, KafkaError
from confluent_kafka.admin import AdminClient

from eos import _log, _names
from eos._kafka import _translate
from eos.config import Config


def with_logger(settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` for building a client: librdkafka's log lines go to `eos._log.kafka_logger()` rather
    than to stderr. Added only here, never to `Config` or the settings a cache key is made of: the
    logger's str() shows its level, which may change."""
    return {"logger": _log.kafka_logger(), **settings}


def _base(config: Config) -> dict[str, Any]:
    return {"bootstrap.servers": config.bootstrap_servers, **config.kafka}


def producer_settings(config: Config, transactional_id: str | None) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "client.id": _names.client_id(config.app_id),
        # Java's partitioner, so keys land where Spark's own Kafka sink would put them.
        "partitioner": "murmur2_random",
        "linger.ms": 5,
        # librdkafka waits this long before it connects to a broker it learnt from the bootstrap's
        # metadata, on the bootstrap's address: its default (100 ms) is most of a fresh producer's init,
        # and a displaced kept producer is replaced by a fresh one often (docs/design.md, "A fresh
        # producer's init_transactions"). The backoff still doubles up to reconnect.backoff.max.ms for a
        # broker that stays down.
        "reconnect.backoff.ms": 10,
        **_base(config),  # the user's settings win over the defaults above...
        **config.producer,
        # ...but not over these.
        "enable.idempotence": True,
        # A producer's metadata request for a missing topic would create it on a broker with
        # auto.create.topics.enable=true (Apache's default): a typo in a topic column would make a topic.
        "allow.auto.create.topics": False,
    }
    if transactional_id is not None:
        settings["transactional.id"] = transactional_id
        settings["transaction.timeout.ms"] = config.transaction_timeout_ms
        # librdkafka refuses a delivery timeout beyond the transaction's; Java's name is an alias of it
        given = settings.pop("delivery.timeout.ms", None)
        timeout = int(settings.get("message.timeout.ms", given or config.transaction_timeout_ms))
        settings["message.timeout.ms"] = min(timeout, config.transaction_timeout_ms)
    return settings


def consumer_settings(config: Config, **extra: Any) -> dict[str, Any]:
    return {
        **_base(config),
        "client.id": _names.client_id(config.app_id),
        **config.consumer,
        "group.id": _names.input_group(config.app_id),
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        **extra,
    }


def admin_settings(config: Config) -> dict[str, Any]:
    return {**_base(config), "client.id": _names.client_id(config.app_id, "admin"), **config.admin}


_lock = threading.Lock()
_admins: dict[tuple, AdminClient] = {}
_auth_failures: dict[tuple, KafkaError] = {}
_consumers: dict[tuple, Consumer] = {}


def _key(settings: dict[str, Any]) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in settings.items()))


def admin(config: Config) -> AdminClient:
    settings = admin_settings(config)
    key = _key(settings)

    def on_error(err: KafkaError) -> None:
        # librdkafka reports refused credentials here; calls themselves only time out.
        if _translate.is_authentication_error(err):
            _auth_failures[key] = err

    with _lock:
        if key not in _admins:
            with _translate.translating("creating an admin client"):
                _admins[key] = AdminClient(with_logger({**settings, "error_cb": on_error}))
        return _admins[key]


def authentication_failure(config: Config) -> KafkaError | None:
    """The last authentication error the admin client of `config` saw, if any."""
    return _auth_failures.get(_key(admin_settings(config)))


def _cached_consumer(settings: dict[str, Any]) -> Consumer:
    with _lock:
        key = _key(settings)
        if key not in _consumers:
            with _translate.translating("creating a consumer"):
                _consumers[key] = Consumer(with_logger(settings))
        return _consumers[key]


def restore_consumer(config: Config) -> Consumer:
    """A read_committed consumer for reading changelogs by assignment (it never commits)."""
    return _cached_consumer(
        consumer_settings(
            config,
            **{
                "group.id": _names.restore_group(config.app_id),
                "enable.partition.eof": True,
                # A roll-forward is often just the commit marker after the local offset: answer fast.
                "fetch.wait.max.ms": 10,
                # A restore reads as fast as it can apply: big fetches, and the next one asked for 10 ms
                # after the queue filled, not librdkafka's 1 s (fetch.queue.backoff.ms), which left every
                # consume() of a large restore waiting (docs/design.md, "Restore")
                "max.partition.fetch.bytes": 16 << 20,
                "fetch.queue.backoff.ms": 10,
                # An offset that left the changelog mid-restore is an error, never a silent jump to its end.
                "auto.offset.reset": "error",
            },
        )
    )


def witness_consumer(config: Config, committed: bool) -> Consumer:
    """A consumer by assignment that reads a transaction's witnesses back (`_witness`): read_committed,
    or read_uncommitted to tell an aborted record from one retention or compaction removed."""
    return _cached_consumer(
        consumer_settings(
            config,
            **{
                "group.id": _names.restore_group(config.app_id),
                "isolation.level": "read_committed" if committed else "read_uncommitted",
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 10,
                "auto.offset.reset": "error",
            },
        )
    )


def watermark_consumer(config: Config) -> Consumer:
    """A read_uncommitted consumer for high watermarks only: a read_committed one answers the last
    stable offset instead, which stops short of an open transaction."""
    return _cached_consumer(
        consumer_settings(
            config,
            **{"group.id": _names.watermark_group(config.app_id), "isolation.level": "read_uncommitted"},
        )
    )


def group_consumer(config: Config) -> Consumer:
    """A consumer of the group `app_id` that never subscribes: used to read and commit its offsets
    and for its group metadata. It does not join the group, so the group has no members."""
    return _cached_consumer(consumer_settings(config))


def offsets_consumer(config: Config, stable: bool) -> Consumer:
    """A consumer of the group for reading its committed offsets: read_committed asks the broker for
    stable offsets only (librdkafka sets require_stable from isolation.level), read_uncommitted for
    the last committed ones even while a transaction holding newer ones is open."""
    if stable:
        return group_consumer(config)
    return _cached_consumer(consumer_settings(config, **{"isolation.level": "read_uncommitted"}))


def clear() -> None:
    """Forget every cached client (see `eos._core._worker.reset`)."""
    with _lock:
        admins, consumers = list(_admins.values()), list(_consumers.values())
        _admins.clear()
        _auth_failures.clear()
        _consumers.clear()
    for consumer in consumers:
        try:
            consumer.close()
        except Exception:  # noqa: BLE001 - a broken client is being thrown away anyway
            pass
    del admins  # AdminClient has no close(): dropping the last reference destroys it
