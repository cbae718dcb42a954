"""Column functions that read Confluent-framed Schema Registry data into Spark structs, in any query
(`eos.from_confluent_avro`, `eos.from_confluent_protobuf`, `eos.from_confluent_json`): Spark's `from_avro`
cannot read Confluent's framing, and no open-source PySpark library does.

The reader's Spark type is fixed on the driver when the column is made (from the schema given, or the
subject's latest version), as Spark's `from_avro` takes its schema; each worker then reads any writer
schema id, fetched once per id per process (`eos._kafka._decoders`). A pandas UDF reads a whole Arrow
batch per call. `mode`, as Spark's `from_avro` and `from_json` name it: "FAILFAST" fails the query naming
the record's topic/partition/offset and why; "PERMISSIVE" gives null for a record that cannot be read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eos._kafka import _decoders
from eos._kafka._decoders import Reading
from eos.errors import ConfigError, DeserializationError

#: the Kafka source's columns that name a record, passed to the UDF so that an error can name it
KAFKA_COORDINATES = ("topic", "partition", "offset")
MODES = ("FAILFAST", "PERMISSIVE")

__all__ = ["from_confluent_avro", "from_confluent_json", "from_confluent_protobuf"]


def from_confluent_avro(
    data: Any,
    registry: str | Mapping[str, Any] | Any,
    *,
    schema: str | None = None,
    subject: str | None = None,
    version: int | None = None,
    mode: str = "FAILFAST",
    coordinates: Sequence[str] | None = KAFKA_COORDINATES,
):
    """Confluent-framed Avro in column `data` (a name or a Column) as a struct of the reader schema:
    `schema` (Avro JSON text), or `subject`'s `version` (its latest if None) as the registry has it now.
    Records written with any other registered schema compatible with it are resolved to it (Avro's
    schema evolution). `registry`: its URL, confluent-kafka's client settings (`url`,
    `basic.auth.user.info`, ...) or an `eos.Config`. `coordinates`: the columns naming a record in
    errors (the Kafka source's; None where the DataFrame has none)."""
    settings = _decoders.registry_settings(registry)
    if (schema is None) == (subject is None):
        raise ConfigError(
            "schema", "give the reader schema as `schema` (Avro text) or `subject`, one of them"
        )
    bundle = (
        _decoders.own_schema(schema)
        if schema is not None
        else _decoders.subject_schema(settings, subject, version)
    )
    spark_type = avro_type(_decoders.expanded(bundle), "")
    return _column(Reading("avro", settings, bundle), spark_type, data, mode, coordinates)


def from_confluent_protobuf(
    data: Any,
    message: str,
    *,
    mode: str = "FAILFAST",
    coordinates: Sequence[str] | None = KAFKA_COORDINATES,
):
    """Confluent-framed Protobuf in column `data` as a struct of `message`, the import path of the
    generated message class (`orders_pb2.Order`, importable on the workers too). No registry is asked:
    Protobuf's field numbers carry its evolution, and the framing's message index is read from the
    bytes."""
    from eos._kafka._schemas import message_class

    spark_type = protobuf_type(message_class(message, "message").DESCRIPTOR, set())
    return _column(Reading("protobuf", (), message), spark_type, data, mode, coordinates)


def from_confluent_json(
    data: Any,
    schema: str,
    *,
    mode: str = "FAILFAST",
    coordinates: Sequence[str] | None = KAFKA_COORDINATES,
):
    """Confluent-framed JSON Schema data in column `data` as a struct of `schema` (JSON Schema text:
    objects, arrays, strings, integers, numbers, booleans). The body is parsed as JSON, not validated
    against the writer's schema; a value that does not fit the reader's Spark type is a record that
    cannot be read."""
    import json

    try:
        parsed = json.loads(schema)
    except ValueError as exc:
        raise ConfigError("schema", f"not JSON: {exc}") from None
    spark_type = json_type(parsed, "")
    return _column(Reading("json_schema", (), schema), spark_type, data, mode, coordinates)


def _column(reading: Reading, spark_type: Any, data: Any, mode: str, coordinates: Sequence[str] | None):
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    if mode not in MODES:
        raise ConfigError("mode", f"{mode!r} is not one of {', '.join(MODES)}")
    pair = StructType([StructField("value", spark_type), StructField("error", StringType())])
    udf = _udf(reading, spark_type, pair, mode == "FAILFAST", coordinates is not None)
    column = F.col(data) if isinstance(data, str) else data
    args = [column, *(F.col(c) for c in coordinates)] if coordinates is not None else [column]
    read = udf(*args)
    return F.when(read["error"].isNull(), read["value"])


def _udf(reading: Reading, spark_type: Any, pair: Any, fail: bool, named: bool):
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    kind = {"avro": "from_confluent_avro", "protobuf": "from_confluent_protobuf"}.get(
        reading.format, "from_confluent_json"
    )

    def read(data: pd.Series, where: tuple[pd.Series, ...]) -> pd.DataFrame:
        values, errors = fit(reading, spark_type, data.tolist())
        if fail:
            bad = next((i for i, e in enumerate(errors) if e is not None), None)
            if bad is not None:
                topic, partition, offset = (w.iloc[bad] for w in where) if where else (None, None, None)
                raise DeserializationError(
                    f"{kind}: {errors[bad]}",
                    topic=None if topic is None else str(topic),
                    partition=None if partition is None else int(partition),
                    offset=None if offset is None else int(offset),
                )
        return pd.DataFrame({"value": values, "error": errors})

    if named:

        def named_read(
            data: pd.Series, topic: pd.Series, partition: pd.Series, offset: pd.Series
        ) -> pd.DataFrame:
            return read(data, (topic, partition, offset))

        function = named_read
    else:

        def plain_read(data: pd.Series) -> pd.DataFrame:
            return read(data, ())

        function = plain_read
    function.__name__ = kind
    # real classes, not this module's postponed annotation strings (pandas is imported here only)
    function.__annotations__ = {**dict.fromkeys(function.__annotations__, pd.Series), "return": pd.DataFrame}
    return pandas_udf(function, pair)


def fit(reading: Reading, spark_type: Any, data: list) -> tuple[list, list]:
    """`data` read, each value checked against the Spark type (JSON's may not fit); (values, errors)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    read = _decoders.read(reading, data)
    values, errors = read.values, list(read.errors)
    arrow_type = to_arrow_type(spark_type)
    try:
        pa.array(values, arrow_type)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        for i, value in enumerate(values):
            try:
                pa.array([value], arrow_type)
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
                values[i] = None
                errors[i] = f"the value does not fit the reader's type {spark_type.simpleString()}: {exc}"
    return values, errors


# -- Spark types of the reader schemas ----------------------------------------------------------------


def avro_type(schema: Any, path: str) -> Any:
    """The Spark type Spark's own `from_avro` gives an Avro schema (expanded: no named-type references)."""
    from pyspark.sql import types as T

    primitives = {
        "boolean": T.BooleanType(),
        "int": T.IntegerType(),
        "long": T.LongType(),
        "float": T.FloatType(),
        "double": T.DoubleType(),
        "bytes": T.BinaryType(),
        "string": T.StringType(),
    }
    where = path or "the schema"
    if isinstance(schema, str):
        if schema in primitives:
            return primitives[schema]
        raise ConfigError("schema", f"{where}: Avro type {schema!r} has no Spark type here")
    if isinstance(schema, list):
        branches = [s for s in schema if s != "null"]
        if len(branches) == 1:
            return avro_type(branches[0], path)
        raise ConfigError(
            "schema", f'{where}: a union of {len(branches)} non-null types; only ["null", T] unions are read'
        )
    kind, logical = schema.get("type"), schema.get("logicalType")
    if logical == "date" and kind == "int":
        return T.DateType()
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return T.TimestampType()
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
        return T.TimestampNTZType()
    if logical == "decimal" and kind in ("bytes", "fixed"):
        return T.DecimalType(schema["precision"], schema.get("scale", 0))
    if logical in ("time-millis", "time-micros", "uuid"):
        raise ConfigError("schema", f"{where}: logical type {logical!r} is not read yet")
    if kind == "record":
        return T.StructType(
            [
                T.StructField(
                    f["name"], avro_type(f["type"], f"{path}.{f['name']}".lstrip(".")), _nullable(f["type"])
                )
                for f in schema["fields"]
            ]
        )
    if kind == "enum":
        return T.StringType()
    if kind == "fixed":
        return T.BinaryType()
    if kind == "array":
        return T.ArrayType(avro_type(schema["items"], f"{path}[]"), _nullable(schema["items"]))
    if kind == "map":
        return T.MapType(
            T.StringType(), avro_type(schema["values"], f"{path}{{}}"), _nullable(schema["values"])
        )
    return avro_type(kind, path)


def _nullable(schema: Any) -> bool:
    return isinstance(schema, list) and "null" in schema


def protobuf_type(descriptor: Any, seen: set) -> Any:
    """The Spark type of a protobuf message, as Spark's `from_protobuf` gives it (enums as names)."""
    from pyspark.sql import types as T

    if descriptor.full_name in seen:
        raise ConfigError("message", f"{descriptor.full_name} is recursive; a Spark struct cannot be")
    seen = seen | {descriptor.full_name}
    from google.protobuf.descriptor import FieldDescriptor

    scalars = {
        "TYPE_DOUBLE": T.DoubleType(),
        "TYPE_FLOAT": T.FloatType(),
        "TYPE_INT64": T.LongType(),
        "TYPE_UINT64": T.LongType(),
        "TYPE_INT32": T.IntegerType(),
        "TYPE_FIXED64": T.LongType(),
        "TYPE_FIXED32": T.LongType(),
        "TYPE_BOOL": T.BooleanType(),
        "TYPE_STRING": T.StringType(),
        "TYPE_BYTES": T.BinaryType(),
        "TYPE_UINT32": T.LongType(),
        "TYPE_ENUM": T.StringType(),
        "TYPE_SFIXED32": T.IntegerType(),
        "TYPE_SFIXED64": T.LongType(),
        "TYPE_SINT32": T.IntegerType(),
        "TYPE_SINT64": T.LongType(),
    }
    names = {getattr(FieldDescriptor, n): n for n in scalars}

    def one(field: Any) -> Any:
        if field.message_type is not None:
            return protobuf_type(field.message_type, seen)
        return scalars[names[field.type]]

    fields = []
    for field in descriptor.fields:
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            entry = field.message_type.fields_by_name
            spark = T.MapType(one(entry["key"]), one(entry["value"]))
        elif _decoders._repeated(field):
            spark = T.ArrayType(one(field))
        else:
            spark = one(field)
        fields.append(T.StructField(field.name, spark, True))
    return T.StructType(fields)


def json_type(schema: Any, path: str) -> Any:
    """The Spark type of a JSON Schema (objects, arrays and the scalar types; `["null", T]` types)."""
    from pyspark.sql import types as T

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
        return T.StructType(
            [
                T.StructField(name, json_type(sub, f"{path}.{name}".lstrip(".")), True)
                for name, sub in properties.items()
            ]
        )
    if kind == "array":
        return T.ArrayType(json_type(schema.get("items", {"type": "string"}), f"{path}[]"))
    scalars = {
        "string": T.StringType(),
        "integer": T.LongType(),
        "number": T.DoubleType(),
        "boolean": T.BooleanType(),
    }
    if kind in scalars:
        return scalars[kind]
    raise ConfigError(
        "schema", f"{where}: JSON Schema type {kind!r} is not read yet (objects, arrays and scalars are)"
    )
