"""Confluent-framed bytes (magic byte 0, a 4-byte schema id, the body) read back into Python values: the
workers' side of `eos.from_confluent_avro` / `_protobuf` / `_json`. Spark-free; `eos._spark._decode`
turns the values into Spark columns.

Avro bodies are read with fastavro, each with its writer's schema (fetched from the registry once per
id per process, references resolved) resolved to the one reader schema of the query, so records written
under older or newer compatible schemas read as the reader's shape. Protobuf bodies are read with the
message class the user names (field numbers carry the evolution); JSON Schema bodies are JSON.

A record that cannot be read is the caller's to handle, with the reason (`Read.errors`); a registry that
cannot be reached is not a bad record and raises.
"""

from __future__ import annotations

import datetime
import decimal
import io
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import pyarrow as pa

from eos._registry._serializers import client_of, http_errors, library, per_process, settings_key
from eos.config import redact_url
from eos.errors import ConfigError, SchemaRegistryError


def _repr_settings(settings: tuple) -> str:
    return repr({k: (redact_url(str(v)) if k == "url" else "***") for k, v in settings})


@attrs.frozen
class Reading:
    """What a worker needs to read one column: shipped to the executors inside the UDF."""

    format: str
    #: the registry client's settings (confluent-kafka's names, values as given: numbers, a token
    #: provider function), as items sorted by name; secrets kept out of reprs. Equal by their text.
    registry: tuple[tuple[str, Any], ...] = attrs.field(
        repr=_repr_settings,
        eq=attrs.cmp_using(eq=lambda a, b: settings_key(a) == settings_key(b)),
        hash=False,
    )
    #: Avro: the reader schema with those it references (`avro_bundle`); JSON Schema: the schema;
    #: Protobuf: the generated message class's import path
    schema: str


@attrs.frozen
class Read:
    """One batch read: a value (or None) and an error (or None) per input."""

    values: list[Any]
    errors: list[str | None]


class _Bad(Exception):
    """One record cannot be read: the reason."""


def _framed(data: bytes) -> tuple[int, memoryview]:
    if len(data) < 5:
        raise _Bad(f"{len(data)} bytes, too short for Confluent's framing (magic byte and schema id)")
    if data[0] != 0:
        raise _Bad(f"not Confluent-framed: magic byte {data[0]:#04x}, expected 0x00")
    return int.from_bytes(data[1:5], "big"), memoryview(data)[5:]


#: how long a schema id the registry said it does not have is taken as unknown before asking again
_UNKNOWN_FOR_S = 30.0


class _Avro:
    def __init__(self, reading: Reading) -> None:
        import fastavro

        self.fastavro = fastavro
        self.client = client_of(dict(reading.registry))
        # Logical types are read as their underlying types and converted by the reader's (`_converter`):
        # fastavro would convert by the writer's, and a long read as a timestamp-millis would be wrong.
        self.reader = parse_bundle(reading.schema, logical=False)
        self.reader_bundle = reading.schema
        main, named = _named(reading.schema)
        self.convert = _converter(main, named, frozenset())
        #: schema id -> (parsed writer schema, whether it is the reader's own)
        self.writers: dict[int, tuple[Any, bool]] = {}
        #: schema id -> (why it cannot be used, since when): asked again after _UNKNOWN_FOR_S
        self.unknown: dict[int, tuple[str, float]] = {}

    def writer(self, schema_id: int) -> tuple[Any, bool]:
        known = self.writers.get(schema_id)
        if known is not None:
            return known
        refused = self.unknown.get(schema_id)
        if refused is not None and time.monotonic() - refused[1] < _UNKNOWN_FOR_S:
            raise _Bad(refused[0])
        try:
            bundle = avro_bundle(self.client, schema_id=schema_id)
            known = (parse_bundle(bundle, logical=False), bundle == self.reader_bundle)
        except _Bad as exc:
            self.unknown[schema_id] = (str(exc), time.monotonic())
            raise
        self.writers[schema_id] = known
        self.unknown.pop(schema_id, None)
        return known

    def read(self, data: bytes) -> Any:
        schema_id, body = _framed(data)
        writer, same = self.writer(schema_id)
        stream = io.BytesIO(body)
        try:
            value = self.fastavro.schemaless_reader(
                stream, writer, None if same else self.reader, return_record_name=False
            )
        except self.fastavro.read.SchemaResolutionError as exc:
            raise _Bad(f"writer schema id {schema_id} cannot be read as the reader schema: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - any failure to parse the body is the record's
            raise _Bad(
                f"corrupt Avro body (writer schema id {schema_id}): {type(exc).__name__}: {exc}"
            ) from None
        if stream.tell() != len(body):
            raise _Bad(
                f"corrupt Avro body (writer schema id {schema_id}): {len(body) - stream.tell()} bytes left"
                " over after the record"
            )
        if self.convert is not None:
            try:
                value = self.convert(value)
            except (OverflowError, ValueError, decimal.InvalidOperation) as exc:
                raise _Bad(
                    f"a value out of its logical type's range (writer schema id {schema_id}): {exc}"
                ) from None
        return value


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_EPOCH_LOCAL = datetime.datetime(1970, 1, 1)
_EPOCH_DATE = datetime.date(1970, 1, 1)


def _converter(schema: Any, named: Mapping[str, Any], seen: frozenset) -> Callable[[Any], Any] | None:
    """The function that turns a value read without logical types into the reader schema's logical
    values (None where the schema has none)."""
    if isinstance(schema, str):
        if schema in _AVRO_PRIMITIVES or schema == "null" or schema in seen or schema not in named:
            return None
        return _converter(named[schema], named, seen | {schema})
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            return None
        inner = _converter(branches[0], named, seen)
        return None if inner is None else (lambda v: None if v is None else inner(v))
    kind, logical = schema.get("type"), schema.get("logicalType")
    if kind == "long" and logical in ("timestamp-millis", "timestamp-micros"):
        unit = "milliseconds" if logical.endswith("millis") else "microseconds"
        return lambda v: _EPOCH + datetime.timedelta(**{unit: v})
    if kind == "long" and logical in ("local-timestamp-millis", "local-timestamp-micros"):
        unit = "milliseconds" if logical.endswith("millis") else "microseconds"
        return lambda v: _EPOCH_LOCAL + datetime.timedelta(**{unit: v})
    if kind == "int" and logical == "date":
        return lambda v: _EPOCH_DATE + datetime.timedelta(days=v)
    if kind in ("bytes", "fixed") and logical == "decimal":
        scale = int(schema.get("scale", 0))
        return lambda v: decimal.Decimal(int.from_bytes(v, "big", signed=True)).scaleb(-scale)
    if kind == "record":
        fields = [(f["name"], _converter(f["type"], named, seen)) for f in schema["fields"]]
        fields = [(name, c) for name, c in fields if c is not None]
        if not fields:
            return None

        def record(v: dict) -> dict:
            for name, c in fields:
                v[name] = c(v[name])
            return v

        return record
    if kind == "array":
        item = _converter(schema["items"], named, seen)
        return None if item is None else (lambda v: [item(x) for x in v])
    if kind == "map":
        value = _converter(schema["values"], named, seen)
        return None if value is None else (lambda v: {k: value(x) for k, x in v.items()})
    if isinstance(kind, str | list | dict) and kind not in ("enum", "fixed", "record", "array", "map"):
        return _converter(kind, named, seen)
    return None


class _Protobuf:
    def __init__(self, reading: Reading) -> None:
        from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

        from eos._registry._serializers import message_class

        self.message = message_class(reading.schema, "schema")
        from confluent_kafka.serialization import MessageField, SerializationContext

        self.deserializer = ProtobufDeserializer(self.message, {"use.deprecated.format": False})
        self.context = SerializationContext("", MessageField.VALUE)  # names a subject; none is asked

    def read(self, data: bytes) -> Any:
        _framed(data)
        try:
            message = self.deserializer(bytes(data), self.context)
        except Exception as exc:  # noqa: BLE001 - any failure to parse the body is the record's
            raise _Bad(f"corrupt Protobuf record for {self.message.DESCRIPTOR.full_name}: {exc}") from None
        return message_dict(message)


class _Json:
    def __init__(self, reading: Reading) -> None:
        pass

    def read(self, data: bytes) -> Any:
        _, body = _framed(data)
        try:
            return json.loads(bytes(body))
        except ValueError as exc:
            raise _Bad(f"corrupt JSON body: {exc}") from None


_readers: dict[Reading, Any] = {}
_deserializers: dict[tuple, Deserializers] = {}
_lock = threading.Lock()


def clear() -> None:
    """Forget every reader and deserializer of this process (a fresh worker: `eos._core._worker.reset`)."""
    with _lock:
        _readers.clear()
        _deserializers.clear()


def reader_of(reading: Reading) -> Any:
    """The process's reader for `reading` (its cache of writer schemas is what spares later lookups)."""
    with _lock:
        reader = _readers.get(reading)
        if reader is None:
            kind = {"avro": _Avro, "protobuf": _Protobuf, "json_schema": _Json}[reading.format]
            reader = _readers[reading] = kind(reading)
        return reader


def read(reading: Reading, values: Sequence[bytes | None]) -> Read:
    reader = reader_of(reading)
    out: list[Any] = []
    errors: list[str | None] = []
    for data in values:
        if data is None:
            out.append(None)
            errors.append(None)
            continue
        try:
            out.append(reader.read(data))
            errors.append(None)
        except _Bad as exc:
            out.append(None)
            errors.append(str(exc))
    return Read(out, errors)


def avro_bundle(
    client: Any, *, schema_id: int | None = None, subject: str | None = None, version: int | None = None
) -> str:
    """A registered Avro schema with every schema it references, as one JSON text (a list: the references
    in the order they define their named types, then the schema): by id, or a subject's version (the
    latest if None). Raises _Bad for an id or subject the registry does not have or that is not Avro;
    SchemaRegistryError when the registry refuses or cannot be reached."""
    sr = library()
    where = f"schema id {schema_id}" if schema_id is not None else f"subject {subject!r}"
    try:
        if schema_id is not None:
            schema = client.get_schema(schema_id)
        else:
            registered = (
                client.get_latest_version(subject)
                if version is None
                else client.get_version(subject, version)
            )
            schema = registered.schema
            where = f"subject {subject!r} version {registered.version}"
        if (schema.schema_type or "AVRO") != "AVRO":
            raise _Bad(f"{where} is a {schema.schema_type} schema, not Avro")
        texts: list[str] = []
        _references(client, schema.references or [], texts, set())
        texts.append(schema.schema_str)
    except sr.SchemaRegistryError as exc:
        # 40401 subject, 40402 version, 40403 schema not found; another 404 is a wrong URL, not a record
        if exc.http_status_code == 404 and exc.error_code in (40401, 40402, 40403):
            raise _Bad(f"{where} is not in the registry") from None
        raise SchemaRegistryError(
            f"the Schema Registry refused the look-up of {where}: HTTP {exc.http_status_code}:"
            f" {exc.error_message}",
            subject=subject,
            status=exc.http_status_code,
            error_code=exc.error_code,
        ) from None
    except (*http_errors("HTTPError"), OSError) as exc:
        raise SchemaRegistryError(
            f"the Schema Registry did not answer the look-up of {where}: {exc}", subject=subject
        ) from None
    bundle = json.dumps([json.loads(t) for t in texts], sort_keys=True)
    parse_bundle(bundle)  # a schema fastavro cannot parse is the record's problem, found once
    return bundle


def _references(client: Any, references: Sequence[Any], texts: list[str], seen: set) -> None:
    for ref in references:
        if (ref.subject, ref.version) in seen:
            continue
        seen.add((ref.subject, ref.version))
        registered = client.get_version(ref.subject, ref.version)
        _references(client, registered.schema.references or [], texts, seen)
        texts.append(registered.schema.schema_str)


def parse_bundle(bundle: str, logical: bool = True) -> Any:
    """fastavro's parsed schema of an `avro_bundle` (`logical` False: its logical types left out, the
    values read as their underlying types); raises _Bad if fastavro cannot parse it."""
    return _parse(bundle, logical)[0]


def _parse(bundle: str, logical: bool = True) -> tuple[Any, dict[str, Any]]:
    """fastavro's parsed schema of a bundle, and every named type it may use by name (full names)."""
    import fastavro

    named: dict[str, Any] = {}
    *references, main = json.loads(bundle)
    if not logical:
        references, main = [_underlying(r) for r in references], _underlying(main)
    try:
        for schema in references:
            fastavro.parse_schema(schema, named_schemas=named)
        return fastavro.parse_schema(main, named_schemas=named), named
    except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException) as exc:
        raise _Bad(f"not an Avro schema fastavro can read: {exc}") from None


def _underlying(schema: Any) -> Any:
    """`schema` with its logical types left out."""
    if isinstance(schema, dict):
        return {k: _underlying(v) for k, v in schema.items() if k != "logicalType"}
    if isinstance(schema, list):
        return [_underlying(v) for v in schema]
    return schema


def _named(bundle: str) -> tuple[Any, dict[str, Any]]:
    """The bundle's schema and its named types, as plain dicts: what Arrow types and logical conversions
    are made of."""
    parsed, named = _parse(bundle)
    return _plain(parsed), {name: _plain(schema) for name, schema in named.items()}


def _plain(schema: Any) -> Any:
    """fastavro's parsed schema without its private keys (`__fastavro_parsed`, ...)."""
    if isinstance(schema, dict):
        return {k: _plain(v) for k, v in schema.items() if not k.startswith("__")}
    if isinstance(schema, list):
        return [_plain(v) for v in schema]
    return schema


def message_dict(message: Any) -> dict[str, Any]:
    """A protobuf message as the dict of its Spark struct: every field (unset ones at their default,
    unset messages None), enums by name, 64-bit integers as integers (json_format would give strings)."""
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            sub = field.message_type.fields_by_name["value"]
            out[field.name] = {k: _scalar(sub, v) for k, v in value.items()}
        elif _repeated(field):
            out[field.name] = [_scalar(field, v) for v in value]
        elif getattr(field, "has_presence", field.message_type is not None) and not message.HasField(
            field.name
        ):
            out[field.name] = None  # unset: a message, a proto3 `optional`, a oneof's other branches
        else:
            out[field.name] = _scalar(field, value)
    return out


def _repeated(field: Any) -> bool:
    label = getattr(field, "is_repeated", None)
    return label if isinstance(label, bool) else field.label == field.LABEL_REPEATED


def _scalar(field: Any, value: Any) -> Any:
    if field.message_type is not None:
        return message_dict(value)
    if field.enum_type is not None:
        named = field.enum_type.values_by_number.get(value)
        return named.name if named is not None else str(value)
    if field.type in _UNSIGNED_64 and value >= 1 << 63:
        return value - (1 << 64)  # a uint64 in Spark's long, as Spark's from_protobuf gives it
    return value


_UNSIGNED_64 = (4, 6)  # FieldDescriptor.TYPE_UINT64, TYPE_FIXED64


def registry_settings(registry: str | Mapping[str, Any] | Any) -> tuple[tuple[str, Any], ...]:
    """A decoder's `registry` argument (a URL, confluent-kafka's client settings, or an eos.Config) as
    sorted settings items."""
    settings = getattr(registry, "schema_registry", registry)
    if isinstance(settings, str):
        settings = {"url": settings}
    if not isinstance(settings, Mapping) or not settings.get("url"):
        raise ConfigError(
            "registry", "a Schema Registry URL, a mapping of client settings with 'url', or an eos.Config"
        )
    return tuple(sorted(((str(k), v) for k, v in settings.items()), key=lambda kv: kv[0]))


def subject_schema(settings: tuple[tuple[str, Any], ...], subject: str, version: int | None) -> str:
    """The driver's look-up of a reader schema by subject: its bundle."""
    try:
        return avro_bundle(client_of(dict(settings)), subject=subject, version=version)
    except _Bad as exc:
        raise ConfigError("subject", str(exc)) from None


def own_schema(text: str) -> str:
    """A reader schema given as Avro text, as a bundle (ConfigError naming `schema` if it is not Avro)."""
    try:
        bundle = json.dumps([json.loads(text)], sort_keys=True)
        parse_bundle(bundle)
    except (ValueError, _Bad) as exc:
        raise ConfigError("schema", f"not an Avro schema: {exc}") from None
    return bundle


# -- the Arrow types of the reader schemas (Spark's types are made of these) ----------------------------


def arrow_type(reading: Reading) -> pa.DataType:
    """The Arrow type the values of `reading` are read into: the types Spark's `from_avro` and
    `from_protobuf` give (enums as names); ConfigError naming `schema` / `message` for what has none."""
    if reading.format == "avro":
        main, named = _named(reading.schema)
        return _avro(main, "", named, frozenset())
    if reading.format == "protobuf":
        from eos._registry._serializers import message_class

        return _protobuf(message_class(reading.schema, "message").DESCRIPTOR, frozenset())
    try:
        schema = json.loads(reading.schema)
    except ValueError as exc:
        raise ConfigError("schema", f"not JSON: {exc}") from None
    return _json(schema, "")


_AVRO_PRIMITIVES = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}


def _avro(schema: Any, path: str, named: Mapping[str, Any], seen: frozenset) -> pa.DataType:
    where = path or "the schema"
    if isinstance(schema, str):
        if schema in _AVRO_PRIMITIVES:
            return _AVRO_PRIMITIVES[schema]
        if schema in named:
            if schema in seen:
                raise ConfigError("schema", f"{where}: {schema} is recursive; a Spark struct cannot be")
            return _avro(named[schema], path, named, seen | {schema})
        raise ConfigError("schema", f"{where}: Avro type {schema!r} has no Spark type here")
    if isinstance(schema, list):
        branches = [s for s in schema if s != "null"]
        if len(branches) == 1:
            return _avro(branches[0], path, named, seen)
        raise ConfigError(
            "schema", f'{where}: a union of {len(branches)} non-null types; only ["null", T] unions are read'
        )
    kind, logical = schema.get("type"), schema.get("logicalType")
    if logical == "date" and kind == "int":
        return pa.date32()
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return pa.timestamp("us", tz="UTC")
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
        return pa.timestamp("us")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = schema.get("precision"), schema.get("scale", 0)
        if not isinstance(precision, int) or not 0 < precision <= 38 or not 0 <= scale <= precision:
            raise ConfigError(
                "schema", f"{where}: decimal({precision}, {scale}) has no Spark type (precision 1-38)"
            )
        return pa.decimal128(precision, scale)
    if logical in ("time-millis", "time-micros", "uuid"):
        raise ConfigError("schema", f"{where}: logical type {logical!r} is not read yet")
    if kind == "record":
        name = schema.get("name")
        inner = seen | {name} if name else seen
        fields = []
        for f in schema["fields"]:
            sub = f"{path}.{f['name']}".lstrip(".")
            fields.append(
                pa.field(f["name"], _avro(f["type"], sub, named, inner), nullable=_nullable(f["type"]))
            )
        return pa.struct(fields)
    if kind == "enum":
        return pa.string()
    if kind == "fixed":
        return pa.binary()
    if kind == "array":
        items = schema["items"]
        return pa.list_(pa.field("element", _avro(items, f"{path}[]", named, seen), _nullable(items)))
    if kind == "map":
        values = schema["values"]
        return pa.map_(
            pa.string(), pa.field("value", _avro(values, f"{path}{{}}", named, seen), _nullable(values))
        )
    return _avro(kind, path, named, seen)


def _nullable(schema: Any) -> bool:
    return isinstance(schema, list) and "null" in schema


def _protobuf(descriptor: Any, seen: frozenset) -> pa.DataType:
    from google.protobuf.descriptor import FieldDescriptor as F

    if descriptor.full_name in seen:
        raise ConfigError("message", f"{descriptor.full_name} is recursive; a Spark struct cannot be")
    seen = seen | {descriptor.full_name}
    scalars = {
        F.TYPE_DOUBLE: pa.float64(),
        F.TYPE_FLOAT: pa.float32(),
        F.TYPE_INT64: pa.int64(),
        F.TYPE_UINT64: pa.int64(),
        F.TYPE_INT32: pa.int32(),
        F.TYPE_FIXED64: pa.int64(),
        F.TYPE_FIXED32: pa.int64(),
        F.TYPE_BOOL: pa.bool_(),
        F.TYPE_STRING: pa.string(),
        F.TYPE_BYTES: pa.binary(),
        F.TYPE_UINT32: pa.int64(),
        F.TYPE_ENUM: pa.string(),
        F.TYPE_SFIXED32: pa.int32(),
        F.TYPE_SFIXED64: pa.int64(),
        F.TYPE_SINT32: pa.int32(),
        F.TYPE_SINT64: pa.int64(),
    }

    def one(field: Any) -> pa.DataType:
        return _protobuf(field.message_type, seen) if field.message_type is not None else scalars[field.type]

    fields = []
    for field in descriptor.fields:
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            entry = field.message_type.fields_by_name
            arrow = pa.map_(one(entry["key"]), one(entry["value"]))
        elif _repeated(field):
            arrow = pa.list_(one(field))
        else:
            arrow = one(field)
        fields.append(pa.field(field.name, arrow))
    return pa.struct(fields)


def _json(schema: Any, path: str) -> pa.DataType:
    where = path or "the schema"
    if not isinstance(schema, Mapping):
        raise ConfigError("schema", f"{where}: a JSON Schema is an object")
    kind = schema.get("type")
    if isinstance(kind, list):
        branches = [k for k in kind if k != "null"]
        if len(branches) != 1:
            raise ConfigError("schema", f"{where}: type {kind} has no one Spark type")
        kind = branches[0]
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties", {})
        return pa.struct(
            [pa.field(n, _json(sub, f"{path}.{n}".lstrip("."))) for n, sub in properties.items()]
        )
    if kind == "array":
        return pa.list_(_json(schema.get("items", {"type": "string"}), f"{path}[]"))
    scalars = {"string": pa.string(), "integer": pa.int64(), "number": pa.float64(), "boolean": pa.bool_()}
    if kind in scalars:
        return scalars[kind]
    raise ConfigError(
        "schema", f"{where}: JSON Schema type {kind!r} is not read yet (objects, arrays and scalars are)"
    )


def to_arrow(read: Read, arrow: pa.DataType, strict: bool = False) -> tuple[pa.Array, list[str | None]]:
    """The values of `read` as one Arrow array of type `arrow`; a value that does not fit it (JSON's may
    not) is null, with its error. `strict` (JSON): each value's Python types checked first, since Arrow
    would turn 1.5 into the integer 1 and true into 1.0."""
    if strict:
        values, errors = list(read.values), list(read.errors)
        for i, value in enumerate(values):
            why = _unfit(value, arrow, "")
            if why is not None:
                values[i], errors[i] = None, f"the value does not fit the reader's type: {why}"
        read = Read(values, errors)
    errors = list(read.errors)
    try:
        return pa.array(read.values, arrow), errors
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        values = list(read.values)
        for i, value in enumerate(values):
            try:
                pa.array([value], arrow)
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
                values[i] = None
                errors[i] = f"the value does not fit the reader's type {arrow}: {exc}"
        return pa.array(values, arrow), errors


class Deserializers:
    """value_deserializer / key_deserializer in an eos task: a chunk of input rows with their value and
    key columns read into structs, and the rows that cannot be read."""

    def __init__(self, config: Any) -> None:
        self.fields: dict[str, tuple[Reading, pa.DataType]] = {}
        for field in ("value", "key"):
            kind = getattr(config, f"{field}_deserializer")
            if kind is None:
                continue
            schema = getattr(config, f"{field}_deserializer_schema")
            try:
                if kind == "avro":
                    reading = Reading(kind, registry_settings(config), own_schema(schema))
                else:
                    reading = Reading(kind, (), schema)
                self.fields[field] = (reading, arrow_type(reading))
            except ConfigError as exc:
                raise ConfigError(f"{field}_deserializer_schema", exc.reason) from None

    @classmethod
    def of(cls, config: Any) -> Deserializers | None:
        """The process's deserializers for `config` (its schemas parsed once, not per batch or task);
        None where it configures none."""
        if not (config.value_deserializer or config.key_deserializer):
            return None
        key = (
            config.value_deserializer,
            config.value_deserializer_schema,
            config.key_deserializer,
            config.key_deserializer_schema,
            settings_key(config.schema_registry.items()),
        )
        return per_process(_deserializers, key, lambda: cls(config), _lock)

    def read(self, chunk: pa.RecordBatch) -> tuple[pa.RecordBatch, dict[int, str]]:
        """`chunk` with its key / value columns read; {row index: why} for the rows that cannot be read."""
        unreadable: dict[int, str] = {}
        for field, (reading, arrow) in self.fields.items():
            index = chunk.schema.get_field_index(field)
            values, errors = to_arrow(
                read(reading, chunk.column(index).to_pylist()), arrow, strict=reading.format == "json_schema"
            )
            for row, error in enumerate(errors):
                if error is not None and row not in unreadable:
                    unreadable[row] = f"the {field} cannot be read as {reading.format}: {error}"
            chunk = chunk.set_column(index, pa.field(field, arrow), values)
        return chunk, unreadable


def _unfit(value: Any, arrow: pa.DataType, path: str) -> str | None:
    """Why a JSON value does not fit `arrow` (None where it does)."""
    if value is None:
        return None
    where = path or "the value"
    if pa.types.is_struct(arrow):
        if not isinstance(value, dict):
            return f"{where} is {type(value).__name__}, not an object"
        for field in arrow:
            why = _unfit(value.get(field.name), field.type, f"{path}.{field.name}".lstrip("."))
            if why is not None:
                return why
        return None
    if pa.types.is_list(arrow):
        if not isinstance(value, list):
            return f"{where} is {type(value).__name__}, not an array"
        return next(
            (w for i, v in enumerate(value) if (w := _unfit(v, arrow.value_type, f"{path}[{i}]"))), None
        )
    if pa.types.is_integer(arrow):
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{where} is {type(value).__name__}, not an integer"
        return None if -(1 << 63) <= value < 1 << 63 else f"{where} is out of a long's range"
    if pa.types.is_floating(arrow):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return None if ok else f"{where} is {type(value).__name__}, not a number"
    if pa.types.is_boolean(arrow):
        return None if isinstance(value, bool) else f"{where} is {type(value).__name__}, not a boolean"
    if pa.types.is_string(arrow):
        return None if isinstance(value, str) else f"{where} is {type(value).__name__}, not a string"
    return None
