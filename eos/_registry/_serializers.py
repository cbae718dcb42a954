"""Schema Registry serialization of output values and keys: Confluent's framing (magic byte, schema id)
by confluent-kafka's own serializers (Avro, Protobuf, JSON Schema).

The one module that imports `confluent_kafka.schema_registry` and maps its errors: the registry's to
`SchemaRegistryError`, a record that does not fit its schema to `SerializationError` (a bad record).

- `resolve` (the driver, step D2): each configured schema is registered under its subject, or looked up,
  or the subject's latest version taken, before any transaction: a schema the registry refuses fails the
  query with nothing written. While the registry does not answer it is retried until
  operation_timeout_ms.
- `Serializers` (the Python workers): the serializers of one configuration, built once per worker. The
  first record of a subject looks its schema up (one registry call per worker and subject, which the
  client caches); every record after that is encoded without a call. They never register: the driver did.
"""

from __future__ import annotations

import importlib
import json
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import pyarrow as pa
from confluent_kafka.serialization import MessageField, SerializationContext

from eos.config import Config, redact_url
from eos.errors import ConfigError, SchemaRegistryError, SerializationError
from eos.records import Output, Outputs

_TYPES = {"avro": "AVRO", "protobuf": "PROTOBUF", "json_schema": "JSON"}
_NAMES = {"avro": "Avro", "protobuf": "Protobuf", "json_schema": "JSON Schema"}
_RETRY_WAIT_S = 0.5


def library() -> Any:
    """confluent_kafka.schema_registry with its serializers' dependencies, or a ConfigError that says
    what to install."""
    try:
        with warnings.catch_warnings():
            # authlib (the client's OAuth) warns at import about its own httpx fallback, not about eos's
            # use; its module sets an "always" filter first, which this one goes before.
            try:
                import authlib.deprecate  # noqa: F401
            except ImportError:
                pass
            warnings.filterwarnings("ignore", message=".*httpx module is deprecated.*")
            from confluent_kafka import schema_registry
            from confluent_kafka.schema_registry import avro, json_schema, protobuf  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            "value_serializer",
            f"Schema Registry serializers need confluent-kafka's extras ({exc}): pip install"
            " 'eos-spark[schema-registry]'",
        ) from None
    return schema_registry


def http_errors(*names: str) -> tuple[type[BaseException], ...]:
    """The exception classes `names` (e.g. "HTTPError") of the HTTP library the registry client raises
    from: confluent-kafka 2.16+ imports `httpx2` on Python 3.10+ where earlier versions import `httpx`;
    both are taken where both are installed."""
    import importlib

    found: list[type[BaseException]] = []
    for module in ("httpx2", "httpx"):
        try:
            http = importlib.import_module(module)
        except ImportError:
            continue
        found += [getattr(http, name) for name in names]
    return tuple(found)


@attrs.frozen
class FieldSpec:
    """What the config says of one field's serializer."""

    field: str  # "value" or "key"
    kind: str  # "avro", "protobuf", "json_schema"
    schema: str | None
    strategy: str  # "topic", "record", "topic_record"

    @classmethod
    def all_of(cls, config: Config) -> tuple[FieldSpec, ...]:
        return tuple(
            cls(
                field,
                getattr(config, f"{field}_serializer"),
                getattr(config, f"{field}_schema"),
                getattr(config, f"{field}_subject_name_strategy"),
            )
            for field in ("value", "key")
            if getattr(config, f"{field}_serializer") is not None
        )

    def message_class(self) -> Any:
        """Protobuf: the generated message class the schema names."""
        return message_class(self.schema, f"{self.field}_schema")

    def record_name(self) -> str | None:
        """The name the "record" strategies use: as confluent-kafka's serializers derive it."""
        if self.schema is None:
            return None
        if self.kind == "protobuf":
            return self.message_class().DESCRIPTOR.full_name
        try:
            parsed = json.loads(self.schema)
        except ValueError as exc:
            raise ConfigError(f"{self.field}_schema", f"is not valid JSON: {exc}") from None
        if self.kind == "json_schema":
            return parsed.get("title") if isinstance(parsed, dict) else None
        from fastavro import parse_schema

        try:
            parsed = parse_schema(parsed)
        except Exception as exc:  # noqa: BLE001 - fastavro raises several kinds for a bad schema
            raise ConfigError(f"{self.field}_schema", f"is not an Avro schema: {exc}") from None
        return parsed.get("name", parsed.get("type")) if isinstance(parsed, dict) else str(parsed)

    def subject(self, topic: str | None) -> str:
        name = self.record_name()
        if name is None and self.strategy != "topic":
            raise ConfigError(
                f"{self.field}_subject_name_strategy",
                f"{self.strategy!r} names the subject after the schema's record name, and the"
                f" {_NAMES[self.kind]} schema has none"
                + (" (a JSON Schema's is its 'title')" if self.kind == "json_schema" else ""),
            )
        return _strategy(self.strategy)(_context(topic, self.field), name)

    def schema_object(self) -> Any:
        """The schema as the field's serializer declares it, so that a worker's lookup finds what the
        driver registered (confluent-kafka's Avro serializer writes a primitive as {"type": ...})."""
        text = self.schema.strip()
        if self.kind == "avro" and text[:1] not in ("{", "["):
            text = '{"type":' + text + "}"
        return library().Schema(text, _TYPES[self.kind])


def message_class(path: str, setting: str) -> Any:
    """The generated protobuf message class at import path `path` (ConfigError naming `setting`)."""
    module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(setting, f"cannot import {path!r}: {exc}") from None


def _strategy(name: str) -> Callable[[Any, str | None], str]:
    """confluent-kafka's subject name strategy of a `*_subject_name_strategy` setting."""
    sr = library()
    return {
        "topic": sr.topic_subject_name_strategy,
        "record": sr.record_subject_name_strategy,
        "topic_record": sr.topic_record_subject_name_strategy,
    }[name]


def serialized_fields(config: Config) -> frozenset[str]:
    """The output fields a Schema Registry serializer encodes: any column type goes in there."""
    return frozenset(spec.field for spec in FieldSpec.all_of(config))


def _context(topic: str | None, field: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE if field == "value" else MessageField.KEY)


# -- the registry client --------------------------------------------------------------------------------

_lock = threading.Lock()
_clients: dict[tuple, Any] = {}


def _settings(config: Config) -> tuple:
    """The registry client's settings as a key of this module's caches."""
    return settings_key(config.schema_registry.items())


def settings_key(items: Iterable[tuple[str, Any]]) -> tuple[tuple[str, str], ...]:
    """Registry client settings (name, value) as a hashable key: sorted, each value as its text."""
    return tuple(sorted((k, str(v)) for k, v in items))


def per_process(cache: dict, key: Any, make: Callable[[], Any], lock: threading.Lock = _lock) -> Any:
    """`cache[key]`, made by `make()` the first time this process asks: outside `lock`, which guards
    only the cache (making one may parse schemas or call a registry)."""
    with lock:
        found = cache.get(key)
    if found is None:
        found = make()
        with lock:
            cache[key] = found
    return found


def _client(config: Config) -> Any:
    """The process's registry client for the config's settings."""
    return client_of(config.schema_registry)


def client_of(settings: Mapping[str, Any]) -> Any:
    """The process's registry client for these settings (its caches are what spares later calls)."""
    key = settings_key(settings.items())
    with _lock:
        client = _clients.get(key)
        if client is None:
            try:
                # new_client: an in-process MockSchemaRegistryClient for a mock:// URL (tests)
                client = library().SchemaRegistryClient.new_client(dict(settings))
            except (ValueError, TypeError) as exc:  # the client's own check of its settings
                raise ConfigError("schema_registry", str(exc)) from None
            _clients[key] = client
        return client


def _where(config: Config) -> str:
    return f"the Schema Registry at {redact_url(str(config.schema_registry.get('url')))}"


def _translate(exc: Exception, config: Config, spec: FieldSpec, subject: str) -> SchemaRegistryError | None:
    """The SchemaRegistryError for what the client raised; None for what is not the registry's."""
    sr = library()
    where = _where(config)
    if isinstance(exc, sr.SchemaRegistryError):
        status, code, message = exc.http_status_code, exc.error_code, exc.error_message
        if status == 409:
            latest = _latest_version(config, subject)
            against = f" its latest version {latest}" if latest is not None else " the registered versions"
            text = (
                f"{where} refused the {spec.field} schema for subject {subject!r}: it is incompatible with"
                f"{against} (HTTP 409: {message})"
            )
        elif status in (401, 403):
            text = (
                f"{where} refused the credentials (HTTP {status}: {message}) for subject {subject!r}: check"
                " schema_registry's basic.auth.user.info / bearer.auth.* settings"
            )
        elif code in (40401, 40403) or status == 404:
            what = "subject" if code == 40401 else "schema"
            hint = (
                " (use_latest_version reads the subject's latest version: register one first)"
                if code == 40401
                else " (auto_register_schemas is false: register it first, or let eos register it)"
            )
            text = f"{where} has no such {what} under subject {subject!r}{hint} (HTTP 404: {message})"
        else:
            text = f"{where} refused subject {subject!r}: HTTP {status}, error {code}: {message}"
        return SchemaRegistryError(text, subject=subject, status=status, error_code=code)
    if isinstance(exc, http_errors("UnsupportedProtocol", "InvalidURL")):
        raise ConfigError("schema_registry.url", f"{_where(config)}: {exc}") from None
    if isinstance(exc, (*http_errors("HTTPError"), OSError)):
        return SchemaRegistryError(
            f"{where} did not answer for subject {subject!r}: {type(exc).__name__}: {exc}", subject=subject
        )
    return None


def _retriable(exc: SchemaRegistryError) -> bool:
    """Whether asking again may succeed: no answer, or the registry's retriable statuses."""
    return exc.status is None or exc.status in (408, 429) or exc.status >= 500


def _latest_version(config: Config, subject: str) -> int | None:
    try:
        return _client(config).get_latest_version(subject).version
    except Exception:  # noqa: BLE001 - only to name the version in an error already being raised
        return None


# -- the driver ------------------------------------------------------------------------------------------

_resolved: set[tuple] = set()


def resolve(config: Config, log: Any = None) -> None:
    """D2: every configured schema registered (or looked up) under its subject, before any transaction.
    Raises SchemaRegistryError naming the subject; a registry that does not answer is retried until
    operation_timeout_ms."""
    for spec in FieldSpec.all_of(config):
        topic = config.output_topic
        key = (_settings(config), spec, topic, config.auto_register_schemas, config.use_latest_version)
        if key in _resolved:
            continue
        subject = spec.subject(topic)
        deadline = time.monotonic() + config.operation_timeout_ms / 1000
        while True:
            try:
                schema_id = _resolve_one(config, spec, topic, subject)
                break
            except Exception as exc:  # noqa: BLE001 - translated, or raised as it is
                error = _translate(exc, config, spec, subject)
                if error is None:
                    raise
                if not _retriable(error) or time.monotonic() >= deadline:
                    retried = (
                        f" (retried for operation_timeout_ms {config.operation_timeout_ms})"
                        if _retriable(error)
                        else ""
                    )
                    raise SchemaRegistryError(
                        f"{error}{retried}. Nothing was written.",
                        subject=error.subject,
                        status=error.status,
                        error_code=error.error_code,
                    ) from exc
                if log is not None:
                    log.warning("schema registry not answering, retrying", subject=subject, error=str(error))
                time.sleep(_RETRY_WAIT_S)
        if log is not None:
            log.info("schema resolved", field=spec.field, subject=subject, schema_id=schema_id)
        _resolved.add(key)


def _resolve_one(config: Config, spec: FieldSpec, topic: str | None, subject: str) -> int | None:
    client = _client(config)
    if spec.kind == "protobuf":
        # The serializer registers the message's imports as references first: let it do it all, on an
        # empty message (which every proto3 schema admits).
        message = spec.message_class()
        serializer = _build(config, spec, client, register=True)
        framed = serializer(message(), _context(topic, spec.field))
        return int.from_bytes(framed[1:5], "big")
    if config.use_latest_version:
        return client.get_latest_version(subject).schema_id
    if config.auto_register_schemas:
        return client.register_schema_full_response(subject, spec.schema_object()).schema_id
    return client.lookup_schema(subject, spec.schema_object()).schema_id


def _build(config: Config, spec: FieldSpec, client: Any, register: bool) -> Callable[[Any, Any], Any]:
    """confluent-kafka's serializer for `spec`: a function of (object, SerializationContext)."""
    conf = {
        "auto.register.schemas": register and config.auto_register_schemas and not config.use_latest_version,
        "use.latest.version": config.use_latest_version,
        "subject.name.strategy": _strategy(spec.strategy),
    }
    if spec.kind == "avro":
        from confluent_kafka.schema_registry.avro import AvroSerializer

        return AvroSerializer(client, spec.schema, conf=conf)
    if spec.kind == "json_schema":
        from confluent_kafka.schema_registry.json_schema import JSONSerializer

        return JSONSerializer(spec.schema, client, conf=conf)
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from google.protobuf import json_format
    from google.protobuf.message import Message

    message_class = spec.message_class()
    serializer = ProtobufSerializer(message_class, client, conf=conf)

    def serialize(obj: Any, ctx: Any) -> Any:
        if obj is not None and not isinstance(obj, Message):
            obj = json_format.ParseDict(obj, message_class())  # a struct column's row, a dict
        return serializer(obj, ctx)

    return serialize


# -- the workers -----------------------------------------------------------------------------------------


class Serializers:
    """The value and key serializers of one configuration in a Python worker."""

    def __init__(self, config: Config) -> None:
        self.config = config
        client = _client(config)
        self.specs = {spec.field: spec for spec in FieldSpec.all_of(config)}
        self.functions = {f: _build(config, spec, client, register=False) for f, spec in self.specs.items()}

    @classmethod
    def of(cls, config: Config) -> Serializers | None:
        """The worker's serializers for `config`; None where it configures none."""
        specs = FieldSpec.all_of(config)
        if not specs:
            return None
        key = (specs, _settings(config), config.auto_register_schemas, config.use_latest_version)
        return per_process(_workers, key, lambda: cls(config))

    def outputs(self, outputs: Outputs, in_topic: str, in_partition: int) -> Outputs:
        """`outputs` with its values and keys serialized (binary columns)."""
        values, keys = outputs.values, outputs.keys
        if "value" in self.functions:
            values = self._column("value", values, outputs, in_topic, in_partition)
        if "key" in self.functions and keys is not None:
            keys = self._column("key", keys, outputs, in_topic, in_partition)
        return attrs.evolve(outputs, values=values, keys=keys)

    def record(self, out: Output, topic: str, in_topic: str, in_partition: int, in_offset: int) -> None:
        """One `process` output serialized in place."""
        for field, function in self.functions.items():
            obj = getattr(out, field)
            try:
                setattr(out, field, function(obj, _context(topic, field)))
            except Exception as exc:  # noqa: BLE001 - translated below
                raise self._error(exc, field, topic, in_topic, in_partition, in_offset, "", None) from exc

    def _column(
        self, field: str, column: Any, outputs: Outputs, in_topic: str, in_partition: int
    ) -> pa.Array:
        function = self.functions[field]
        items = (
            column.to_pylist(maps_as_pydicts="strict")  # a map as a dict, as the serializers take it
            if isinstance(column, pa.Array | pa.ChunkedArray)
            else column
        )
        topics = outputs.topic if isinstance(outputs.topic, list) else None
        default = outputs.topic if topics is None else self.config.output_topic
        context = _context(default, field)
        framed = []
        for i, obj in enumerate(items):
            topic = default if topics is None or topics[i] is None else topics[i]
            try:
                framed.append(function(obj, context if topics is None else _context(topic, field)))
            except Exception as exc:  # noqa: BLE001 - translated below
                through = outputs.last if outputs.offsets is None and outputs.first != outputs.last else None
                raise self._error(
                    exc,
                    field,
                    topic,
                    in_topic,
                    in_partition,
                    outputs.offset_of(i),
                    outputs.origin(i),
                    through,
                ) from exc
        return pa.array(framed, pa.binary())

    def _error(
        self,
        exc: Exception,
        field: str,
        topic: str | None,
        in_topic: str,
        in_partition: int,
        in_offset: int,
        origin: str,
        through: int | None,
    ) -> Exception:
        spec = self.specs[field]
        subject = spec.subject(topic)
        registry = _translate(exc, self.config, spec, subject)
        if registry is not None:
            return registry  # the registry's fault, not the record's: the task fails, nothing commits
        return SerializationError(
            f"output {field} does not fit its {_NAMES[spec.kind]} schema (subject {subject!r}):"
            f" {type(exc).__name__}: {exc}{origin}",
            topic=in_topic,
            partition=in_partition,
            offset=in_offset,
            through=through,
        )


_workers: dict[tuple, Serializers] = {}


def clear() -> None:
    """Forget every client, resolution and serializer of this process (a fresh worker:
    `eos._core._worker.reset`)."""
    with _lock:
        _clients.clear()
        _resolved.clear()
        _workers.clear()
