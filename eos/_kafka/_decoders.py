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

import io
import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import pyarrow as pa

from eos._kafka._schemas import client_of
from eos.errors import ConfigError, SchemaRegistryError

FORMATS = ("avro", "protobuf", "json_schema")


def _repr_settings(settings: tuple) -> str:
    return repr({k: ("***" if k != "url" else v) for k, v in settings})


@attrs.frozen
class Reading:
    """What a worker needs to read one column: shipped to the executors inside the UDF."""

    format: str
    #: the registry client's settings (confluent-kafka's names), as sorted items; secrets kept out of reprs
    registry: tuple[tuple[str, str], ...] = attrs.field(repr=_repr_settings)
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


class _Avro:
    def __init__(self, reading: Reading) -> None:
        import fastavro

        self.fastavro = fastavro
        self.client = client_of(dict(reading.registry))
        self.reader = parse_bundle(reading.schema)
        self.reader_bundle = reading.schema
        #: schema id -> (parsed writer schema, whether it is the reader's own), or the reason it is unusable
        self.writers: dict[int, tuple[Any, bool] | str] = {}

    def writer(self, schema_id: int) -> tuple[Any, bool]:
        known = self.writers.get(schema_id)
        if known is None:
            try:
                bundle = avro_bundle(self.client, schema_id=schema_id)
                known = (parse_bundle(bundle), bundle == self.reader_bundle)
            except _Bad as exc:
                known = str(exc)
            self.writers[schema_id] = known
        if isinstance(known, str):
            raise _Bad(known)
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
        return value


class _Protobuf:
    def __init__(self, reading: Reading) -> None:
        from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

        from eos._kafka._schemas import message_class

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
_lock = threading.Lock()


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
    import httpx

    sr = _sr()
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
        if exc.http_status_code == 404:
            raise _Bad(f"{where} is not in the registry") from None
        raise SchemaRegistryError(
            f"the Schema Registry refused the look-up of {where}: HTTP {exc.http_status_code}:"
            f" {exc.error_message}",
            subject=subject,
            status=exc.http_status_code,
            error_code=exc.error_code,
        ) from None
    except (httpx.HTTPError, OSError) as exc:
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


def parse_bundle(bundle: str) -> Any:
    """fastavro's parsed schema of an `avro_bundle`; raises _Bad if fastavro cannot parse it."""
    import fastavro

    named: dict[str, Any] = {}
    *references, main = json.loads(bundle)
    try:
        for schema in references:
            fastavro.parse_schema(schema, named_schemas=named)
        return fastavro.parse_schema(main, named_schemas=named)
    except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException) as exc:
        raise _Bad(f"not an Avro schema fastavro can read: {exc}") from None


def expanded(bundle: str) -> dict[str, Any]:
    """The bundle's schema with every named type written out where it is used (a Spark type's source)."""
    import fastavro

    named: dict[str, Any] = {}
    *references, main = json.loads(bundle)
    for schema in references:
        fastavro.parse_schema(schema, named_schemas=named)
    return _plain(fastavro.parse_schema(main, named_schemas=named, expand=True))


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
        elif field.message_type is not None and not message.HasField(field.name):
            out[field.name] = None
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
    return value


def _sr() -> Any:
    import confluent_kafka.schema_registry as sr

    return sr


def registry_settings(registry: str | Mapping[str, Any] | Any) -> tuple[tuple[str, str], ...]:
    """A decoder's `registry` argument (a URL, confluent-kafka's client settings, or an eos.Config) as
    sorted settings items."""
    settings = getattr(registry, "schema_registry", registry)
    if isinstance(settings, str):
        settings = {"url": settings}
    if not isinstance(settings, Mapping) or not settings.get("url"):
        raise ConfigError(
            "registry", "a Schema Registry URL, a mapping of client settings with 'url', or an eos.Config"
        )
    return tuple(sorted((str(k), str(v)) for k, v in settings.items()))


def subject_schema(settings: tuple[tuple[str, str], ...], subject: str, version: int | None) -> str:
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
        return _avro(expanded(reading.schema), "")
    if reading.format == "protobuf":
        from eos._kafka._schemas import message_class

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


def _avro(schema: Any, path: str) -> pa.DataType:
    where = path or "the schema"
    if isinstance(schema, str):
        if schema in _AVRO_PRIMITIVES:
            return _AVRO_PRIMITIVES[schema]
        raise ConfigError("schema", f"{where}: Avro type {schema!r} has no Spark type here")
    if isinstance(schema, list):
        branches = [s for s in schema if s != "null"]
        if len(branches) == 1:
            return _avro(branches[0], path)
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
        return pa.decimal128(schema["precision"], schema.get("scale", 0))
    if logical in ("time-millis", "time-micros", "uuid"):
        raise ConfigError("schema", f"{where}: logical type {logical!r} is not read yet")
    if kind == "record":
        fields = []
        for f in schema["fields"]:
            sub = f"{path}.{f['name']}".lstrip(".")
            fields.append(pa.field(f["name"], _avro(f["type"], sub), nullable=_nullable(f["type"])))
        return pa.struct(fields)
    if kind == "enum":
        return pa.string()
    if kind == "fixed":
        return pa.binary()
    if kind == "array":
        return pa.list_(pa.field("element", _avro(schema["items"], f"{path}[]"), _nullable(schema["items"])))
    if kind == "map":
        return pa.map_(
            pa.string(),
            pa.field("value", _avro(schema["values"], f"{path}{{}}"), _nullable(schema["values"])),
        )
    return _avro(kind, path)


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


def to_arrow(read: Read, arrow: pa.DataType) -> tuple[pa.Array, list[str | None]]:
    """The values of `read` as one Arrow array of type `arrow`; a value that does not fit it (JSON's may
    not) is null, with its error."""
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
                    settings = tuple(sorted((k, str(v)) for k, v in config.schema_registry.items()))
                    reading = Reading(kind, settings, own_schema(schema))
                else:
                    reading = Reading(kind, (), schema)
                self.fields[field] = (reading, arrow_type(reading))
            except ConfigError as exc:
                raise ConfigError(f"{field}_deserializer_schema", exc.reason) from None

    @classmethod
    def of(cls, config: Any) -> Deserializers | None:
        return cls(config) if config.value_deserializer or config.key_deserializer else None

    def read(self, chunk: pa.RecordBatch) -> tuple[pa.RecordBatch, dict[int, str]]:
        """`chunk` with its key / value columns read; {row index: why} for the rows that cannot be read."""
        unreadable: dict[int, str] = {}
        for field, (reading, arrow) in self.fields.items():
            index = chunk.schema.get_field_index(field)
            values, errors = to_arrow(read(reading, chunk.column(index).to_pylist()), arrow)
            for row, error in enumerate(errors):
                if error is not None and row not in unreadable:
                    unreadable[row] = f"the {field} cannot be read as {reading.format}: {error}"
            chunk = chunk.set_column(index, pa.field(field, arrow), values)
        return chunk, unreadable
