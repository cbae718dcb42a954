"""`Config`: every eos setting in one frozen, validated object.

Built three ways with the same validation: keyword arguments, `Config.from_env()` (`EOS_*`), and
`Config.from_properties()` (Kafka-style dotted keys). Secrets are hidden from its repr.
"""

from __future__ import annotations

import difflib
import importlib.util
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

import attrs

from eos import _names
from eos.errors import ConfigError

AT_LEAST_ONCE = "at_least_once"
EXACTLY_ONCE = "exactly_once"
_GUARANTEE_ALIASES = {
    AT_LEAST_ONCE: AT_LEAST_ONCE,
    EXACTLY_ONCE: EXACTLY_ONCE,
    "exactly_once_v2": EXACTLY_ONCE,  # Kafka Streams' name for the same protocol
}

_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
_IMPORT_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")
# Every setting that can carry a secret, in librdkafka (its properties flagged _RK_SENSITIVE) and the Java
# client (its Type.PASSWORD configs): passwords, passphrases, private keys (PEM or object), client
# secrets, JAAS and OAUTHBEARER configs, and kinit commands that may embed credentials.
_SECRET = re.compile(
    r"password|passphrase|secret|jaas|token|credential|private|key\.pem|keystore\.key|ssl_key$"
    r"|oauthbearer\.config|kinit\.cmd|user\.info",
    re.IGNORECASE,
)
#: Spark's plans, UI and event logs hide option values whose key or value matches this (eos sets it on
#: the sessions it starts; Spark's default misses kafka.ssl.keystore.key, *.passphrase and the rest).
SPARK_REDACTION_REGEX = (
    r"(?i)secret|password|passphrase|token|access[.]?key|jaas|private|key[.]pem|keystore[.]key"
    r"|oauthbearer[.]config|kinit[.]cmd|ssl_key|user[.]info|://[^/@]*@"
)
#: The session conf Spark redacts data source options with in its plans (explain, a failed query's
#: message, wherever Spark prints them), besides `spark.redaction.regex`. That one is fixed when Spark starts
#: (a running session refuses to set it); this one is set on a running session: `eos.register` extends it.
SPARK_OPTIONS_REDACTION_CONF = "spark.sql.redaction.options.regex"


def widened_redaction_regex(current: str | None) -> str:
    """A Spark redaction regex (Java syntax) that matches whatever `current` matches and whatever
    SPARK_REDACTION_REGEX does: the two as alternatives, each in its own group (an inline flag such as
    `(?i)` holds to the end of its group); `current` unchanged if it has SPARK_REDACTION_REGEX already."""
    current = (current or "").strip()
    if not current:
        return SPARK_REDACTION_REGEX
    if SPARK_REDACTION_REGEX in current:
        return current
    return f"(?:{current})|(?:{SPARK_REDACTION_REGEX})"


# Settings eos owns: letting a passthrough override them would silently break the protocol.
_RESERVED = {
    "producer": {
        "transactional.id",
        "enable.idempotence",
        "transaction.timeout.ms",
        "bootstrap.servers",
        "allow.auto.create.topics",
    },
    "consumer": {"group.id", "isolation.level", "enable.auto.commit", "bootstrap.servers"},
    "admin": {"bootstrap.servers"},
    "kafka": {"bootstrap.servers", "group.id", "transactional.id", "isolation.level"},
}

REDACTED = "***"


def redact(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of client settings that is safe to log: secret values replaced by ***."""
    return {k: (REDACTED if _SECRET.search(k) else v) for k, v in settings.items()}


def _repr_settings(settings: Mapping[str, Any]) -> str:
    return repr(redact(settings))


def _repr_registry(settings: Mapping[str, Any]) -> str:
    """Schema Registry settings for a repr: secrets as ***, and a URL's user:password too."""
    shown = redact(settings)
    if "url" in shown:
        shown["url"] = redact_url(str(shown["url"]))
    return repr(shown)


def redact_url(url: str) -> str:
    """`url` (or a comma-separated list of them) without the credentials a `user:password@` part holds."""
    return re.sub(r"(?<=://)[^/@,]*@", REDACTED + "@", url)


def _frozen_settings(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(value or {}))


def _guarantee(value: str) -> str:
    try:
        return _GUARANTEE_ALIASES[str(value).strip().lower()]
    except KeyError:
        raise ConfigError(
            "processing_guarantee", f"{value!r} is not one of {AT_LEAST_ONCE!r}, {EXACTLY_ONCE!r}"
        ) from None


def _positive(instance: Config, attribute: attrs.Attribute, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(attribute.name, f"must be a positive integer, got {value!r}")


def _boolean(instance: Config, attribute: attrs.Attribute, value: bool) -> None:
    if not isinstance(value, bool):
        raise ConfigError(attribute.name, f"must be true or false, got {value!r}")


def _port(value: Any) -> int | None:
    """`metrics_port`: None, or a port number (from the environment or a dotted key: its text)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        port = int(value.strip()) if isinstance(value, str) else value
    except ValueError:
        raise ConfigError("metrics_port", f"{value!r} is not a port number") from None
    return port_number(port, "metrics_port", shown=value)


def port_number(port: Any, field: str, shown: Any = None) -> int:
    """`port` if it is a port number (0-65535), else ConfigError naming `field` (and `shown`: what the
    user wrote, where `port` was parsed from it)."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < 65536:
        raise ConfigError(field, f"{port if shown is None else shown!r} is not a port number (0-65535)")
    return port


#: value_serializer / key_serializer: eos's names, and the names Kafka users know (Confluent's Java classes).
_SERIALIZERS = {
    "avro": "avro",
    "protobuf": "protobuf",
    "json_schema": "json_schema",
    "jsonschema": "json_schema",
    "io.confluent.kafka.serializers.kafkaavroserializer": "avro",
    "io.confluent.kafka.serializers.protobuf.kafkaprotobufserializer": "protobuf",
    "io.confluent.kafka.serializers.json.kafkajsonschemaserializer": "json_schema",
}
#: value_deserializer / key_deserializer: eos's names and Confluent's Java deserializer classes.
_DESERIALIZERS = {
    "avro": "avro",
    "protobuf": "protobuf",
    "json_schema": "json_schema",
    "jsonschema": "json_schema",
    "io.confluent.kafka.serializers.kafkaavrodeserializer": "avro",
    "io.confluent.kafka.serializers.protobuf.kafkaprotobufdeserializer": "protobuf",
    "io.confluent.kafka.serializers.json.kafkajsonschemadeserializer": "json_schema",
}
_BYTES_SERIALIZERS = {
    "",
    "bytes",
    "none",
    "org.apache.kafka.common.serialization.bytearrayserializer",
    "org.apache.kafka.common.serialization.stringserializer",
}
_STRATEGIES = {
    "topic": "topic",
    "record": "record",
    "topic_record": "topic_record",
    "io.confluent.kafka.serializers.subject.topicnamestrategy": "topic",
    "io.confluent.kafka.serializers.subject.recordnamestrategy": "record",
    "io.confluent.kafka.serializers.subject.topicrecordnamestrategy": "topic_record",
}


def _serializer(field: str) -> Callable[[Any], str | None]:
    names = _DESERIALIZERS if field.endswith("_deserializer") else _SERIALIZERS

    def convert(value: Any) -> str | None:
        word = "" if value is None else str(value).strip().lower()
        if word in _BYTES_SERIALIZERS or word.replace("deserializer", "serializer") in _BYTES_SERIALIZERS:
            return None
        try:
            return names[word]
        except KeyError:
            raise ConfigError(
                field, f"{value!r} is not 'avro', 'protobuf' or 'json_schema' (or None: bytes)"
            ) from None

    return convert


def _strategy(field: str) -> Callable[[Any], str]:
    def convert(value: Any) -> str:
        try:
            return _STRATEGIES[str(value).strip().lower()]
        except KeyError:
            raise ConfigError(field, f"{value!r} is not 'topic', 'record' or 'topic_record'") from None

    return convert


def _non_negative(instance: Config, attribute: attrs.Attribute, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(attribute.name, f"must be an integer >= 0, got {value!r}")


@attrs.frozen(kw_only=True)
class Config:
    """Settings for one eos application (one consumer group, one transactional.id prefix)."""

    #: The Kafka brokers eos writes to and reads offsets from (`host:port,host:port`).
    bootstrap_servers: str
    #: Consumer group for the input offsets, prefix of every transactional.id and changelog topic.
    app_id: str
    #: Output topic; or name a column with `output_topic_column`.
    output_topic: str | None = None
    #: "exactly_once" (the default): outputs, state and input offsets commit in one Kafka transaction
    #: per input partition; "at_least_once": no transactions, so a crash writes outputs again
    #: (duplicates, never losses). Either can be switched between restarts on the same checkpoint.
    processing_guarantee: str = attrs.field(default=EXACTLY_ONCE, converter=_guarantee)
    #: Column holding each output record's topic (instead of `output_topic`).
    output_topic_column: str | None = None
    #: Column holding each output record's partition (else the producer's murmur2 partitioner decides).
    output_partition_column: str | None = None
    #: Column holding each output record's timestamp: a Spark timestamp or epoch milliseconds (null: the
    #: producer's clock, as Spark's Kafka sink writes). "timestamp", the Kafka source's own column,
    #: carries each input record's timestamp to its outputs, as Kafka Streams does.
    output_timestamp_column: str | None = None
    #: A partition's transaction commits after this many input records, or earlier when
    #: `commit_max_bytes` or `commit_interval_ms` is reached first.
    commit_every: int = attrs.field(default=100_000, validator=_positive)
    #: A partition's transaction commits once the input it holds for a redo takes this many bytes (Arrow,
    #: in the task's memory), or earlier when `commit_every` or `commit_interval_ms` is reached first.
    commit_max_bytes: int = attrs.field(default=64 * 1024 * 1024, validator=_positive)
    #: A partition's transaction commits once it has been open this long, or earlier when
    #: `commit_every` or `commit_max_bytes` is reached first.
    commit_interval_ms: int = attrs.field(default=30_000, validator=_positive)
    #: The producers' `transaction.timeout.ms`: a transaction open longer is aborted by the broker
    #: (at most the broker's `transaction.max.timeout.ms`, checked before the first batch).
    transaction_timeout_ms: int = attrs.field(default=60_000, validator=_positive)
    #: Deadline for retrying retriable errors and for reaching the broker.
    operation_timeout_ms: int = attrs.field(default=30_000, validator=_positive)
    #: How often a partition's batch is redone after an abortable error before giving up.
    max_redo: int = attrs.field(default=3, validator=_non_negative)
    #: Where input partitions without a committed offset start: "earliest" or "latest".
    starting_offsets: str = "earliest"
    #: Use committed input offsets that this app did not commit (no eos stamp in their metadata) instead
    #: of refusing them (ForeignOffsetError): eos skips every input row below the committed offset.
    accept_foreign_offsets: bool = attrs.field(default=False, validator=_boolean)
    #: "kafka": each row carries the Kafka source's topic/partition/offset, committed with the outputs.
    #: "any": a DataFrame without them (an aggregation, a join, a non-Kafka source): the batch is written
    #: in `parts` parts, each recording its batch id in its transaction (docs/protocol.md, P1-P3, A1-A6).
    input_mode: str = "kafka"
    #: input_mode "any": how many parts a batch is placed in (one transactional producer each).
    parts: int = attrs.field(default=4, validator=_positive)
    #: input_mode "any": comma-separated columns whose hash places a row in its part (default: `key`,
    #: rows with a null key by their whole content).
    part_columns: str | None = None
    #: Root of the local state stores: <state_dir>/<app_id>/<topic>-<partition>/<store>.sqlite (or .rocksdb)
    state_dir: str = attrs.field(factory=lambda: os.path.join(tempfile.gettempdir(), "eos-state"))
    #: "transactional" (KIP-892: uncommitted writes kept apart, an abort drops them) or "wipe"
    #: (KIP-129: writes go straight to the store; an abort or crash wipes it and restores the changelog).
    state_mode: str = "transactional"
    #: Where a store's data lives on the executor: "sqlite" (a SQLite file) or "rocksdb" (RocksDB through
    #: rocksdict: `pip install 'eos-spark[rocksdb]'`), which commits and restores large batches of keys
    #: faster but costs more to open at every task. Changing it on an existing state directory restores
    #: each store from its changelog once.
    state_store: str = "sqlite"
    #: Where each store's snapshots are kept: any URI `pyarrow.fs` reads and writes (a path, `file://`,
    #: `s3://`, `gs://`, `hdfs://`, `abfs://`). A store that is lost, stale or moved to another executor
    #: is restored from its newest usable snapshot and the changelog's records since, not the whole
    #: changelog. None: no snapshots (`format("eos")`: `<checkpointLocation>/eos-snapshots`).
    state_snapshot_location: str | None = attrs.field(
        default=None, repr=lambda v: repr(v if v is None else redact_url(v))
    )
    #: The least time between two snapshots of a store, taken after a task's commits of a batch that
    #: changed it; 0: no snapshots.
    state_snapshot_interval_ms: int = attrs.field(default=300_000, validator=_non_negative)
    #: Snapshots kept per store: writing one deletes the older ones beyond this many.
    state_snapshot_keep: int = attrs.field(default=2, validator=_positive)
    #: Commit a transaction early once a store holds this many uncommitted keys.
    state_buffer_max_keys: int = attrs.field(default=100_000, validator=_positive)
    #: Producers a Python worker keeps between tasks, the least recently used closed first (exactly_once:
    #: one per input partition; a kept one saves an init_transactions when the partition comes back).
    max_producers_per_worker: int = attrs.field(default=16, validator=_positive)
    #: On a classic session with two or more executors: each input partition's task runs on the executor
    #: that ran it last (where its state stores and producer are) while that executor is alive, balanced
    #: across executors; false: where Spark's Kafka source prefers (a change of executors moves partitions
    #: off executors still alive). Spark Connect and local mode: Spark's placement.
    task_affinity: bool = attrs.field(default=True, validator=_boolean)
    #: exactly_once: hand each batch's value and key columns to librdkafka whole (one call per 10,000
    #: records) where the outputs go to one topic with no headers, partition or timestamp column; false:
    #: one confluent-kafka produce() per record, as at_least_once always does.
    arrow_produce: bool = attrs.field(default=True, validator=_boolean)
    #: Which code writes a pass-through batch (no process, process_batch, on_commit, stores, serializers,
    #: deserializers, or producer settings the Java client has not; input_mode "kafka"; on_error "fail",
    #: or "dead_letter" with exactly_once): "jvm", the executors' own Kafka client, the rows never
    #: entering Python (a classic session, eos's jar loaded); "python", the Python workers; "auto", the
    #: JVM where the query can take it, else Python (logged once, with why).
    data_path: str = "auto"
    #: What a bad record does (one whose `process` raises or returns what Kafka cannot carry, whose output
    #: the broker refuses as too large or invalid): "fail" stops the query naming it; "dead_letter" writes
    #: it to `dead_letter_topic` in the same transaction as the outputs and offsets.
    on_error: str = "fail"
    #: on_error="dead_letter": the topic bad records go to (it must exist; eos checks it before writing).
    dead_letter_topic: str | None = None
    #: on_error="dead_letter": past this many bad records of one input partition in one batch, the batch
    #: fails anyway (a broken deploy does not route a whole topic to the dead-letter topic).
    max_dead_letters_per_batch: int = attrs.field(default=100, validator=_positive)
    #: Read each input record's value with a Schema Registry deserializer before `process` /
    #: `process_batch` see it: "avro", "protobuf" or "json_schema" (also Confluent's Java class names);
    #: the value column becomes a struct of `value_deserializer_schema`. A record that cannot be read
    #: fails the batch naming it (DeserializationError), or with on_error="dead_letter" goes, as it was
    #: read, to the dead-letter topic. docs/guide/schema-registry.md.
    value_deserializer: str | None = attrs.field(default=None, converter=_serializer("value_deserializer"))
    #: The reader schema of value_deserializer: Avro text (records written under any compatible
    #: registered schema are resolved to it) or JSON Schema text; for "protobuf" the import path of the
    #: generated message class.
    value_deserializer_schema: str | None = None
    #: The key's Schema Registry deserializer, as `value_deserializer` is the value's.
    key_deserializer: str | None = attrs.field(default=None, converter=_serializer("key_deserializer"))
    #: The reader schema of key_deserializer.
    key_deserializer_schema: str | None = None
    #: Serialize each output's value with a Schema Registry serializer, "avro", "protobuf" or "json_schema"
    #: (Confluent's framing: magic byte, schema id; also Confluent's Java class names); None: the value is
    #: bytes or a string, as Spark's Kafka sink takes it. docs/guide/schema-registry.md.
    value_serializer: str | None = attrs.field(default=None, converter=_serializer("value_serializer"))
    #: The value's schema: Avro or JSON Schema text; for "protobuf" the import path of the generated
    #: message class (`orders_pb2.Order`). None with use_latest_version: the subject's latest schema.
    value_schema: str | None = None
    #: The key's Schema Registry serializer ("avro", "json_schema", "protobuf"); None: the key column
    #: is written as bytes or a string.
    key_serializer: str | None = attrs.field(default=None, converter=_serializer("key_serializer"))
    #: The key's schema, as `value_schema` is the value's.
    key_schema: str | None = None
    #: How a value's subject is named: "topic" (<topic>-value), "record" (the schema's full name) or
    #: "topic_record" (<topic>-<full name>); Confluent's strategy class names are accepted too.
    value_subject_name_strategy: str = attrs.field(
        default="topic", converter=_strategy("value_subject_name_strategy")
    )
    #: How a key's subject is named, as `value_subject_name_strategy` (<topic>-key for "topic").
    key_subject_name_strategy: str = attrs.field(
        default="topic", converter=_strategy("key_subject_name_strategy")
    )
    #: Register the schema under its subject (the registry checks its compatibility); false: it must be
    #: registered already. Either way it happens on the driver before any transaction.
    auto_register_schemas: bool = attrs.field(default=True, validator=_boolean)
    #: Write with the subject's latest schema instead of registering one (Confluent's use.latest.version).
    use_latest_version: bool = attrs.field(default=False, validator=_boolean)
    #: Schema Registry client settings, confluent-kafka's names: `url` (required with a serializer),
    #: `basic.auth.user.info`, `bearer.auth.*`, `ssl.*`, `max.retries`, `timeout`, ...
    schema_registry: Mapping[str, Any] = attrs.field(
        factory=dict, converter=_frozen_settings, repr=_repr_registry
    )
    #: Prometheus metrics of the sink (docs/guide/observability.md), in prometheus_client's default
    #: registry, served over HTTP on this port: by `foreachBatch`'s sink where it runs (the driver;
    #: under Spark Connect, the server), by `foreach_writer` from the driver (classic Spark); 0:
    #: recorded, not served (the application serves the registry); None: none. `format("eos")`:
    #: `eos.register(spark, metrics_port=...)`.
    metrics_port: int | None = attrs.field(default=None, converter=_port)
    #: Replication factor of the changelog topics eos creates (-1: the broker's default).
    changelog_replication_factor: int = -1
    #: Extra topic configs for the changelog topics eos creates (cleanup.policy is always compact).
    changelog_topic_config: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_settings)
    #: Client settings for every Kafka client eos creates (security settings go here).
    kafka: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_settings, repr=_repr_settings)
    #: librdkafka settings for eos's producers only (over `kafka`), e.g. `linger.ms`, `compression.type`.
    producer: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_settings, repr=_repr_settings)
    #: librdkafka settings for eos's consumers only (offset reads, changelog restores), over `kafka`.
    consumer: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_settings, repr=_repr_settings)
    #: librdkafka settings for eos's admin clients only (topics, offsets, transactions), over `kafka`.
    admin: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_settings, repr=_repr_settings)

    def __attrs_post_init__(self) -> None:
        servers = [s.strip() for s in str(self.bootstrap_servers or "").split(",") if s.strip()]
        if not servers:
            raise ConfigError("bootstrap_servers", "must name at least one host:port")
        for server in servers:
            host, _, port = server.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ConfigError("bootstrap_servers", f"{server!r} is not host:port")
        if not self.app_id or not _NAME.fullmatch(self.app_id) or len(self.app_id) > 200:
            raise ConfigError(
                "app_id", f"{self.app_id!r} must be 1-200 characters of letters, digits, '.', '_' or '-'"
            )
        if self.output_topic is None and self.output_topic_column is None:
            raise ConfigError("output_topic", "set output_topic or output_topic_column")
        if self.output_topic is not None and (
            not _NAME.fullmatch(self.output_topic) or len(self.output_topic) > 249
        ):
            raise ConfigError("output_topic", f"{self.output_topic!r} is not a legal Kafka topic name")
        for name in ("output_topic_column", "output_partition_column", "output_timestamp_column"):
            value = getattr(self, name)
            if value in ("topic", "partition", "offset"):
                raise ConfigError(name, f"{value!r} is an input coordinate column; name another column")
        if self.commit_interval_ms >= self.transaction_timeout_ms:
            raise ConfigError(
                "commit_interval_ms",
                f"{self.commit_interval_ms} must be below transaction_timeout_ms"
                f" ({self.transaction_timeout_ms})",
            )
        if self.input_mode not in ("kafka", "any"):
            raise ConfigError(
                "input_mode",
                f"{self.input_mode!r} is not 'kafka' (rows straight from the Kafka source, with their"
                " topic/partition/offset) or 'any' (any DataFrame: aggregations, joins, other sources)",
            )
        if self.part_columns is not None and not [c for c in self.part_columns.split(",") if c.strip()]:
            raise ConfigError("part_columns", f"{self.part_columns!r} names no column")
        if self.data_path not in ("auto", "jvm", "python"):
            raise ConfigError("data_path", f"{self.data_path!r} is not 'auto', 'jvm' or 'python'")
        if self.on_error not in ("fail", "dead_letter"):
            raise ConfigError("on_error", f"{self.on_error!r} is not 'fail' or 'dead_letter'")
        if self.on_error == "dead_letter":
            if self.dead_letter_topic is None:
                raise ConfigError(
                    "dead_letter_topic", "on_error='dead_letter' needs the topic bad records go to"
                )
            if self.input_mode == "any":
                raise ConfigError(
                    "on_error",
                    "'dead_letter' is not available with input_mode 'any' yet (a part is one transaction"
                    " over rows without input coordinates to name); use 'fail'",
                )
        if self.dead_letter_topic is not None and (
            not _NAME.fullmatch(self.dead_letter_topic) or len(self.dead_letter_topic) > 249
        ):
            raise ConfigError(
                "dead_letter_topic", f"{self.dead_letter_topic!r} is not a legal Kafka topic name"
            )
        if self.dead_letter_topic is not None and self.dead_letter_topic == self.output_topic:
            raise ConfigError("dead_letter_topic", "must not be the output topic")
        self._check_serializers()
        if self.state_mode not in ("transactional", "wipe"):
            raise ConfigError("state_mode", f"{self.state_mode!r} is not 'transactional' or 'wipe'")
        if self.state_store not in ("sqlite", "rocksdb"):
            raise ConfigError("state_store", f"{self.state_store!r} is not 'sqlite' or 'rocksdb'")
        if self.state_store == "rocksdb" and importlib.util.find_spec("rocksdict") is None:
            raise ConfigError("state_store", "'rocksdb' needs rocksdict: pip install 'eos-spark[rocksdb]'")
        if self.changelog_replication_factor == 0 or self.changelog_replication_factor < -1:
            raise ConfigError("changelog_replication_factor", "must be -1 (broker default) or positive")
        if self.starting_offsets not in ("earliest", "latest"):
            raise ConfigError("starting_offsets", f"{self.starting_offsets!r} is not 'earliest' or 'latest'")
        if "cleanup.policy" in self.changelog_topic_config:
            raise ConfigError(
                "changelog_topic_config.cleanup.policy",
                "is set by eos: a changelog is compacted (a deleting policy would lose state)",
            )
        for group, reserved in _RESERVED.items():
            for key in getattr(self, group):
                if key in reserved:
                    raise ConfigError(f"{group}.{key}", "is set by eos and cannot be overridden")

    def _check_serializers(self) -> None:
        fields = [f for f in ("value", "key") if getattr(self, f"{f}_serializer") is not None]
        for field in fields:
            kind = getattr(self, f"{field}_serializer")
            if getattr(self, f"{field}_schema") is None and (
                kind == "protobuf" or not self.use_latest_version
            ):
                what = (
                    "the import path of the generated message class" if kind == "protobuf" else "its schema"
                )
                raise ConfigError(f"{field}_schema", f"{field}_serializer={kind!r} needs {what}")
            schema = getattr(self, f"{field}_schema")
            if kind == "protobuf" and not _IMPORT_PATH.match(schema):
                raise ConfigError(
                    f"{field}_schema",
                    f"{schema!r} is not the import path of a generated protobuf message class"
                    " (module.Message)",
                )
            if self.output_topic is None and getattr(self, f"{field}_subject_name_strategy") != "record":
                raise ConfigError(
                    f"{field}_subject_name_strategy",
                    "with output_topic_column the subject must not depend on the topic (eos registers each"
                    " subject on the driver before any transaction, when the rows' topics are not known yet):"
                    " use 'record'",
                )
        if fields and not str(self.schema_registry.get("url") or "").strip():
            raise ConfigError(
                "schema_registry.url", f"{fields[0]}_serializer needs the Schema Registry's URL"
            )
        for field in ("value", "key"):
            kind = getattr(self, f"{field}_deserializer")
            if kind is None:
                continue
            if self.input_mode == "any":
                raise ConfigError(
                    f"{field}_deserializer", "reads the Kafka source's records: input_mode must be 'kafka'"
                )
            schema = getattr(self, f"{field}_deserializer_schema")
            if not schema:
                what = (
                    "the import path of the generated message class"
                    if kind == "protobuf"
                    else "a reader schema"
                )
                raise ConfigError(
                    f"{field}_deserializer_schema", f"{field}_deserializer={kind!r} needs {what}"
                )
            if kind == "protobuf" and not _IMPORT_PATH.match(schema):
                raise ConfigError(
                    f"{field}_deserializer_schema",
                    f"{schema!r} is not the import path of a generated protobuf message class"
                    " (module.Message)",
                )
            if kind == "avro" and not str(self.schema_registry.get("url") or "").strip():
                raise ConfigError(
                    "schema_registry.url",
                    f"{field}_deserializer='avro' needs the Schema Registry's URL (for the writer schemas)",
                )

    def __reduce__(self):
        # Spark ships the config to executors by pickle; mapping proxies do not pickle, dicts do.
        kwargs = {f.name: getattr(self, f.name) for f in attrs.fields(Config)}
        for group in _MAPPINGS:
            kwargs[group] = dict(kwargs[group])
        return (_rebuild, (kwargs,))

    @property
    def exactly_once(self) -> bool:
        return self.processing_guarantee == EXACTLY_ONCE

    def transactional_id(self, topic: str, partition: int) -> str:
        """The producer's transactional.id for input partition `topic`/`partition` (`eos._names`)."""
        return _names.transactional_id(self.app_id, topic, partition)

    # -- other constructors -------------------------------------------------------------------------

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any], **overrides: Any) -> Config:
        """From Kafka-style dotted keys: `bootstrap.servers`, `processing.guarantee`, `app.id`
        (or `application.id`), ...; `producer.*`, `consumer.*`, `admin.*` go to that client and any
        other dotted key to every client (`security.protocol`, `sasl.mechanism`, ...). A key that is
        neither eos's nor a Kafka client's raises ConfigError naming it and the setting it resembles."""
        kwargs: dict[str, Any] = {}
        groups: dict[str, dict[str, Any]] = {g: {} for g in _CLIENT_GROUPS}
        for key, value in properties.items():
            field = _DOTTED.get(key)
            if field is not None:
                kwargs[field] = _coerce(field, value, key)
                continue
            if key.startswith(_REGISTRY_PREFIX) or key.startswith(_REGISTRY_AUTH):
                groups["schema_registry"][key.removeprefix(_REGISTRY_PREFIX)] = value
                continue
            prefix, _, rest = key.partition(".")
            if prefix in ("producer", "consumer", "admin") and rest:
                _client_setting(key, rest, ())
                groups[prefix][rest] = value
            else:
                _client_setting(key, key, _DOTTED)
                groups["kafka"][key] = value
        kwargs.update({g: v for g, v in groups.items() if v})
        kwargs.update(overrides)
        return cls(**kwargs)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **defaults: Any) -> Config:
        """From `EOS_<FIELD>` variables (`EOS_PROCESSING_GUARANTEE`, `EOS_BOOTSTRAP_SERVERS`, ...).

        Keyword arguments are defaults that the environment overrides, so a deployment switches
        e.g. the guarantee with no code change. `EOS_KAFKA_SASL_PASSWORD` sets `sasl.password` for every
        client; `EOS_PRODUCER_LINGER_MS` sets the producer's `linger.ms` (likewise CONSUMER, ADMIN).
        Any other `EOS_*` variable, unless it is one eos reads for something else (`EOS_LOG_LEVEL` and
        the rest of `eos.config.OWN_VARIABLES`), raises ConfigError naming it and the variable it most
        resembles, so that a misspelt one cannot go unseen.
        """
        env = os.environ if environ is None else environ
        kwargs: dict[str, Any] = dict(defaults)
        groups: dict[str, dict[str, Any]] = {g: dict(kwargs.pop(g, {}) or {}) for g in _CLIENT_GROUPS}
        for var, value in env.items():
            if not var.startswith("EOS_") or var in OWN_VARIABLES or var.startswith(_RIG_PREFIX):
                continue
            field = _VARIABLES.get(var)
            if field is not None:
                kwargs[field] = _coerce(field, value, var)
                continue
            prefix = next((p for p in _GROUP_PREFIXES if var.startswith(p) and var != p), None)
            if prefix is None:
                raise ConfigError(var, _NOT_A_VARIABLE + did_you_mean(var, _KNOWN_VARIABLES))
            group, name = _GROUP_PREFIXES[prefix], var[len(prefix) :].lower().replace("_", ".")
            if group != "schema_registry":
                _client_setting(var, name, ())
            groups[group][name] = value
        kwargs.update({g: v for g, v in groups.items() if v})
        return cls(**kwargs)


#: the Mapping fields; of them, the settings of a client (`EOS_<GROUP>_*` variables, dotted prefixes)
_MAPPINGS = ("kafka", "producer", "consumer", "admin", "schema_registry", "changelog_topic_config")
_CLIENT_GROUPS = ("kafka", "producer", "consumer", "admin", "schema_registry")
#: dotted keys of the Schema Registry client: `schema.registry.url`, ..., and the Java serializers'
#: unprefixed `basic.auth.*` / `bearer.auth.*`
_REGISTRY_PREFIX = "schema.registry."
_REGISTRY_AUTH = ("basic.auth.", "bearer.auth.")
_SCALAR_FIELDS = [f.name for f in attrs.fields(Config) if f.name not in _MAPPINGS]
_INT_FIELDS = {f.name for f in attrs.fields(Config) if f.type in ("int", int)}
_BOOL_FIELDS = {f.name for f in attrs.fields(Config) if f.type in ("bool", bool)}
_TRUE, _FALSE = {"true", "1", "yes"}, {"false", "0", "no"}
_DOTTED = {name.replace("_", "."): name for name in _SCALAR_FIELDS}
_DOTTED["application.id"] = "app_id"
_DOTTED["errors.dead.letter.queue.topic.name"] = "dead_letter_topic"  # Kafka Streams' name (KIP-1034)


#: the `EOS_*` variables eos reads that are not settings: logging, the session helper, the CLI's Kafka
#: tools, the fault points of eos's own crash tests, the Spark Connect server's eos process
OWN_VARIABLES = frozenset(
    {
        "EOS_LOG_LEVEL",
        "EOS_LOG_FORMAT",
        "EOS_LOG_CONFIG",
        "EOS_LOG_CONFIGURE",
        "EOS_SPARK_MASTER",
        "EOS_SPARK_LOG_LEVEL",
        "EOS_CACHE",
        "EOS_MAVEN_REPO",
        "EOS_KAFKA_TOOLS_VERSION",
        "EOS_BROKER_VERSION",
        "EOS_CRASH_AT",
        "EOS_CRASH_ONCE_DIR",
        "EOS_ABORT_AT",
        "EOS_PAUSE_AT",
        "EOS_SIGNAL_AT",
        "EOS_SERVER_DRIVER_TOKEN",
    }
)
#: the prefix of the variables eos's test rig reads (`make test`, `make matrix`)
_RIG_PREFIX = "EOS_TEST_"
_VARIABLES = {f"EOS_{name.upper()}": name for name in _SCALAR_FIELDS}
_KNOWN_VARIABLES = [*_VARIABLES, *sorted(OWN_VARIABLES)]
#: `EOS_KAFKA_` -> "kafka", ...: the variables of a client group's settings
_GROUP_PREFIXES = {f"EOS_{group.upper()}_": group for group in _CLIENT_GROUPS}
_NOT_A_VARIABLE = (
    "is not an eos setting (EOS_<SETTING>, e.g. EOS_PROCESSING_GUARANTEE; a Kafka client's setting:"
    " EOS_KAFKA_<NAME> for every client, EOS_PRODUCER_, EOS_CONSUMER_, EOS_ADMIN_, EOS_SCHEMA_REGISTRY_)"
)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """', did you mean X?' for the known name `name` most resembles, else ''."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return f"; did you mean {close[0]!r}?" if close else ""


def _client_setting(shown: str, name: str, eos_names: Iterable[str]) -> None:
    """Raises ConfigError naming `shown` when librdkafka has no setting `name`. Asked of the Kafka
    client layer, which config sits below (pyproject.toml's import contract allows this one import)."""
    from eos._kafka._translate import is_client_setting

    if not is_client_setting(name):
        raise ConfigError(
            shown,
            f"is neither an eos setting nor a Kafka client's (librdkafka has no {name!r})"
            + did_you_mean(name, eos_names),
        )


def dotted_keys() -> list[str]:
    """Every dotted key that sets an eos setting (`processing.guarantee`, `app.id`, ...)."""
    return list(_DOTTED)


def dotted_field(key: str) -> str | None:
    """The Config field a Kafka-style dotted key (`processing.guarantee`, `app.id`) sets, if any."""
    return _DOTTED.get(key)


def _rebuild(kwargs: dict[str, Any]) -> Config:
    return Config(**kwargs)


def _coerce(field: str, value: Any, source: str) -> Any:
    if field in _BOOL_FIELDS and isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE | _FALSE:
            return word in _TRUE
        raise ConfigError(field, f"{source}={value!r} is not true or false")
    if field in _INT_FIELDS and isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            raise ConfigError(field, f"{source}={value!r} is not an integer") from None
    return value
