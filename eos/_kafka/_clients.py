"""Settings for every Kafka client eos creates, built in one place from `Config`.

`Config.kafka` (security settings and the like) reaches the producer, the consumers, the admin client
and the Spark Kafka source alike. Client instances are cached per Python process: executors' Python
workers are reused across tasks, and a new client per batch would cost a connection set-up each time.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError
from confluent_kafka.admin import AdminClient

from eos import _log, _names
from eos._kafka import _translate
from eos.config import Config
from eos.errors import ConfigError

# librdkafka spells some security settings differently from the Java client that Spark's source uses.
_LIBRDKAFKA_ONLY = frozenset(
    {
        "ssl.ca.location",  # Java needs a truststore: set kafka.ssl.truststore.* in spark options instead
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.key.pem",
        "ssl.certificate.pem",
        "ssl.ca.pem",
        "sasl.username",  # turned into sasl.jaas.config below
        "sasl.password",
        "sasl.oauthbearer.config",  # librdkafka's OAUTHBEARER settings: the Java client has no such key
        "sasl.oauthbearer.client.secret",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.keytab",
    }
)


def with_logger(settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` for building a client: librdkafka's log lines go to `eos._log.kafka_logger()` rather
    than to stderr. Added only here, never to `Config` or the settings a cache key is made of: the
    logger's str() shows its level, which may change."""
    return {"logger": _log.kafka_logger(), **settings}


def _base(config: Config) -> dict[str, Any]:
    return {"bootstrap.servers": config.bootstrap_servers, **config.kafka}


def producer_settings(config: Config, transactional_id: str | None) -> dict[str, Any]:
    settings: dict[str, Any] = {
        **_base(config),
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
        **config.producer,
        "enable.idempotence": True,
        # A producer's metadata request for a missing topic would create it on a broker with
        # auto.create.topics.enable=true (Apache's default): a typo in a topic column would make a topic.
        "allow.auto.create.topics": False,
    }
    if transactional_id is not None:
        settings["transactional.id"] = transactional_id
        settings["transaction.timeout.ms"] = config.transaction_timeout_ms
        timeout = int(settings.get("message.timeout.ms", config.transaction_timeout_ms))
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


def spark_source_options(config: Config) -> dict[str, str]:
    """`kafka.*` options for Spark's Kafka source, carrying the same shared settings."""
    options = {"kafka.bootstrap.servers": config.bootstrap_servers}
    username = config.kafka.get("sasl.username")
    password = config.kafka.get("sasl.password")
    mechanism = str(config.kafka.get("sasl.mechanism", config.kafka.get("sasl.mechanisms", "PLAIN"))).upper()
    for key, value in config.kafka.items():
        if key in _LIBRDKAFKA_ONLY:
            continue
        if key == "sasl.mechanisms":
            key = "sasl.mechanism"
        options[f"kafka.{key}"] = str(value)
    if username is not None and "sasl.jaas.config" not in config.kafka:
        module = (
            "org.apache.kafka.common.security.plain.PlainLoginModule"
            if mechanism == "PLAIN"
            else "org.apache.kafka.common.security.scram.ScramLoginModule"
        )
        options["kafka.sasl.jaas.config"] = (
            f'{module} required username="{_jaas_quote(username)}" password="{_jaas_quote(password)}";'
        )
    return options


def _jaas_quote(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"')


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


_JAAS_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": "PLAIN",
    "org.apache.kafka.common.security.scram.ScramLoginModule": "SCRAM",
}
# Login modules eos names in its refusal of them, and what to give librdkafka instead. An error never shows
# the value itself, not even its first word: in a line without a login module that may be a password.
_OTHER_JAAS_MODULES = {
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule": "sasl.oauthbearer.*",
    "com.sun.security.auth.module.Krb5LoginModule": "sasl.kerberos.*",
    "com.ibm.security.auth.module.Krb5LoginModule": "sasl.kerberos.*",
}
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+?))(?=\s|;|$)')
# Java key and trust stores: the type librdkafka reads, and what to do otherwise.
_STORES = {
    "truststore": (
        "trust store",
        "PEM",
        "convert it to PEM and set ssl.truststore.type=PEM (or give ssl.ca.location)",
    ),
    "keystore": (
        "key store",
        "PKCS12",
        "use a PKCS12 file (ssl.keystore.type=PKCS12) or PEM files"
        " (ssl.certificate.location, ssl.key.location)",
    ),
}
# Java-only settings librdkafka has no use for (the Java tool still gets them).
_JAVA_ONLY = frozenset({"ssl.truststore.type", "ssl.truststore.password", "ssl.keystore.type"})


def _jaas_refusal(module: str) -> str:
    """Why a `sasl.jaas.config` whose first word is `module` cannot be translated, without any of it
    but a login module's class name from `_OTHER_JAAS_MODULES`."""
    supported = "eos's clients (librdkafka) take only PLAIN and SCRAM credentials from it"
    if module in _OTHER_JAAS_MODULES:
        return (
            f"sasl.jaas.config with login module {module!r}: {supported}; give librdkafka's own"
            f" settings ({_OTHER_JAAS_MODULES[module]}) instead"
        )
    return (
        "sasl.jaas.config does not start with PlainLoginModule or ScramLoginModule (its value is not"
        f" shown): {supported}, written `org.apache.kafka.common.security.plain.PlainLoginModule required"
        ' username="..." password="...";`; for other mechanisms give librdkafka\'s own settings (e.g.'
        " sasl.oauthbearer.*, sasl.kerberos.*) instead"
    )


def from_java(props: Mapping[str, str]) -> dict[str, str]:
    """librdkafka settings for eos's clients from Java client properties (Kafka's tools'
    --command-config, Spark's kafka.* options): `sasl.jaas.config` with the
    PLAIN or SCRAM login module becomes `sasl.username`/`sasl.password`, a PEM trust store
    `ssl.ca.location`, a PKCS12 key store `ssl.keystore.location`/`.password`; the rest passes as it is
    (librdkafka names most security settings as Java does). What cannot be translated is an error
    naming the key (ConfigError; the value is never shown)."""
    out: dict[str, str] = {}
    for key, value in props.items():
        if key in _JAVA_ONLY or key.startswith("ssl.truststore.") or key.startswith("ssl.keystore."):
            continue
        if key == "sasl.jaas.config":
            parts = value.strip().split(None, 1)
            module, rest = (parts + ["", ""])[:2]
            module = module.removeprefix("kafkashaded.")
            if module not in _JAAS_MODULES:
                raise ConfigError(key, _jaas_refusal(module))
            options = {
                m.group(1): m.group(2) if m.group(2) is not None else m.group(3)
                for m in _JAAS_OPTION.finditer(rest)
            }
            for name in ("username", "password"):
                if name not in options:
                    raise ConfigError(key, f'sasl.jaas.config has no {name}="..."')
                out[f"sasl.{name}"] = re.sub(r"\\(.)", r"\1", options[name])
            continue
        out[key] = value
    for store, (noun, readable, fix) in _STORES.items():
        kind = props.get(f"ssl.{store}.type", "JKS").upper()
        if f"ssl.{store}.location" in props and kind != readable:
            raise ConfigError(
                f"ssl.{store}.location",
                f"ssl.{store}.location is a {kind} {noun}, which librdkafka cannot read: {fix}",
            )
    if "ssl.truststore.location" in props:
        out["ssl.ca.location"] = props["ssl.truststore.location"]
    if "ssl.keystore.location" in props:
        out["ssl.keystore.location"] = props["ssl.keystore.location"]
        if "ssl.keystore.password" in props:
            out["ssl.keystore.password"] = props["ssl.keystore.password"]
    return out
