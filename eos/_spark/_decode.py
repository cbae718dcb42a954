"""Column functions that read Confluent-framed Schema Registry data into Spark structs, in any query
(`eos.from_confluent_avro`, `eos.from_confluent_protobuf`, `eos.from_confluent_json`): Spark's `from_avro`
cannot read Confluent's framing, and no open-source PySpark library does.

The reader's Spark type is fixed on the driver when the column is made (from the schema given, or the
subject's latest version), as Spark's `from_avro` takes its schema; each worker then reads any writer
schema id, fetched once per id per process (`eos._registry._decoders`). A pandas UDF reads a whole Arrow
batch per call. `mode`, as Spark's `from_avro` and `from_json` name it: "FAILFAST" fails the query naming
the record's topic/partition/offset and why; "PERMISSIVE" gives null for a record that cannot be read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eos._registry import _decoders
from eos._registry._decoders import Reading
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
    errors (the Kafka source's; None where the DataFrame has none).

    Parameters:

    - `data`: the column of Confluent-framed Avro bytes, by name or as a Column (e.g. "value").
    - `registry`: the Schema Registry: its URL, a mapping of confluent-kafka's client settings with
      `url`, or an `eos.Config` (its `schema_registry` settings).
    - `schema`: the reader schema as Avro JSON text; give it or `subject`, not both.
    - `subject`: the registry subject whose schema is the reader schema, fetched on the driver when the
      column is made; give it or `schema`, not both.
    - `version`: the version of `subject` to use, only with `subject`; None (the default): its latest.
    - `mode`: what a record that cannot be read does (any case): "FAILFAST" (the default) fails the
      query with DeserializationError naming the record and why; "PERMISSIVE" gives null for it.
    - `coordinates`: the names of the topic, partition and offset columns that a FAILFAST error names
      the record by; default the Kafka source's ("topic", "partition", "offset"). None where the
      DataFrame has no such columns. Not used in PERMISSIVE mode.
    """
    settings = _decoders.registry_settings(registry)
    if (schema is None) == (subject is None):
        raise ConfigError(
            "schema", "give the reader schema as `schema` (Avro text) or `subject`, one of them"
        )
    if version is not None and subject is None:
        raise ConfigError("version", "is a version of `subject`: give a subject with it")
    bundle = (
        _decoders.own_schema(schema)
        if schema is not None
        else _decoders.subject_schema(settings, subject, version)
    )
    return _column(Reading("avro", settings, bundle), data, mode, coordinates)


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
    bytes.

    Parameters:

    - `data`: the column of Confluent-framed Protobuf bytes, by name or as a Column (e.g. "value").
    - `message`: the import path of the generated message class, `module.Class`.
    - `mode`: what a record that cannot be read does (any case): "FAILFAST" (the default) fails the
      query with DeserializationError naming the record and why; "PERMISSIVE" gives null for it.
    - `coordinates`: the names of the topic, partition and offset columns that a FAILFAST error names
      the record by; default the Kafka source's ("topic", "partition", "offset"). None where the
      DataFrame has no such columns. Not used in PERMISSIVE mode.
    """
    return _column(Reading("protobuf", (), message), data, mode, coordinates)


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
    cannot be read.

    Parameters:

    - `data`: the column of Confluent-framed JSON bytes, by name or as a Column (e.g. "value").
    - `schema`: the reader's JSON Schema, as text; the struct's Spark type is made from it.
    - `mode`: what a record that cannot be read does (any case): "FAILFAST" (the default) fails the
      query with DeserializationError naming the record and why; "PERMISSIVE" gives null for it.
    - `coordinates`: the names of the topic, partition and offset columns that a FAILFAST error names
      the record by; default the Kafka source's ("topic", "partition", "offset"). None where the
      DataFrame has no such columns. Not used in PERMISSIVE mode.
    """
    return _column(Reading("json_schema", (), schema), data, mode, coordinates)


def _column(reading: Reading, data: Any, mode: str, coordinates: Sequence[str] | None):
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StringType, StructField, StructType

    mode = str(mode).upper()
    if mode not in MODES:
        raise ConfigError("mode", f"{mode!r} is not one of {', '.join(MODES)}")
    if coordinates is not None and len(coordinates) != 3:
        raise ConfigError("coordinates", "names the topic, partition and offset columns, or is None")
    if mode != "FAILFAST":
        coordinates = None  # only an error names a record
    arrow = _decoders.arrow_type(reading)
    spark_type = from_arrow_type(arrow, prefer_timestamp_ntz=True)
    pair = StructType([StructField("value", spark_type), StructField("error", StringType())])
    udf = _udf(reading, arrow, pair, mode == "FAILFAST", coordinates is not None)
    column = F.col(data) if isinstance(data, str) else data
    args = [column, *(F.col(c) for c in coordinates)] if coordinates is not None else [column]
    read = udf(*args)
    return F.when(read["error"].isNull(), read["value"])


def _udf(reading: Reading, arrow: Any, pair: Any, fail: bool, named: bool):
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    kind = {"avro": "from_confluent_avro", "protobuf": "from_confluent_protobuf"}.get(
        reading.format, "from_confluent_json"
    )

    def read(data: pd.Series, where: tuple[pd.Series, ...]) -> pd.DataFrame:
        values, errors = fit(reading, arrow, data.tolist())
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


def fit(reading: Reading, arrow: Any, data: list) -> tuple[list, list]:
    """`data` read, each value checked against the reader's Arrow type (JSON's may not fit); the values
    (None where one cannot be read) and the errors."""
    strict = reading.format == "json_schema"
    values, errors = _decoders.to_arrow(_decoders.read(reading, data), arrow, strict=strict)
    return values.to_pylist(maps_as_pydicts="strict"), errors  # PySpark takes a map as a dict
