"""Reading Schema Registry data in Spark (`eos.from_confluent_avro`, `_protobuf`, `_json`) against the real
registry (Apicurio) and a real broker, in classic Spark and Spark Connect: records written by
confluent-kafka's own producer and by eos, under a schema evolved between them, read into structs; a
record that cannot be read is null (PERMISSIVE) or fails the query naming its topic/partition/offset
(FAILFAST)."""

from __future__ import annotations

import datetime
import json

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.sql import functions as F

import eos
from eos import testing
from eos._registry import _decoders, _serializers
from eos._registry._decoders import Reading
from eos._spark._decode import fit
from eos.records import Outputs
from tests.integration.conftest import kafka_stream, run_query, write_available
from tests.support import trades as trades_support
from tests.support.orders_pb2 import Order
from tests.support.readings_pb2 import Reading as ReadingMessage


def _trade(*extra: dict) -> str:
    fields = [{"name": "sym", "type": "string"}, {"name": "qty", "type": "long"}, *extra]
    return json.dumps({"type": "record", "name": "Trade", "namespace": "shop", "fields": fields})


V1 = _trade()
V2 = _trade({"name": "venue", "type": "string", "default": "XNAS"})


def _produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        producer.produce(topic, v, partition=partition)
    assert producer.flush(30) == 0


def _framed(topic: str, serializer, rows: list) -> list[bytes]:
    return [serializer(r, SerializationContext(topic, MessageField.VALUE)) for r in rows]


def _kafka(session, bootstrap: str, topic: str):
    return (
        session.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", "read_committed")
        .load()
    )


#: the Connect runs of the tests other than the first: `make chaos` (long-test)
_CONNECT_LONG = [pytest.param("classic"), pytest.param("connect", marks=pytest.mark.long)]


@pytest.fixture(params=["classic", "connect"])
def session(request, monkeypatch):
    """Each test under classic Spark and Spark Connect (`F` builds Connect Columns only in Connect mode:
    tests/integration/conftest.py, `pyspark_api_mode`)."""
    if request.param == "connect":
        connect = request.getfixturevalue("connect")
        monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
        return connect
    spark = request.getfixturevalue("spark")  # may start both sessions, and Connect mode with them
    for name in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE"):
        monkeypatch.delenv(name, raising=False)
    return spark


@pytest.fixture
def trades(session, bootstrap, names, schema_registry, checkpoint_dir):
    """A topic of Avro trades: three written by confluent-kafka's producer under V1, then three by an eos
    query under V2 (a field added with a default: BACKWARD-compatible, registered as version 2)."""
    source, topic = names("dec-src"), names("dec-trades")
    testing.create_topic(bootstrap, source, 1)
    testing.create_topic(bootstrap, topic, 1)
    schema_registry.put(f"/config/{topic}-value", {"compatibility": "BACKWARD"})
    client = SchemaRegistryClient({"url": schema_registry.url})
    v1 = AvroSerializer(client, V1)
    _produce(bootstrap, topic, _framed(topic, v1, [{"sym": s, "qty": 1} for s in "ABC"]))
    _produce(bootstrap, source, [b"D", b"E", b"F"])
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("dec-app"),
        output_topic=topic,
        processing_guarantee="exactly_once",
        value_serializer="avro",
        value_schema=V2,
        schema_registry={"url": schema_registry.url},
    )
    df = eos.read_stream(session, config, [source])
    df = df.withColumn(
        "value",
        F.struct(
            F.col("value").cast("string").alias("sym"),
            F.lit(2).cast("long").alias("qty"),
            F.lit("XLON").alias("venue"),
        ),
    )
    write_available(df, eos.sink(config), checkpoint_dir)
    assert schema_registry.get(f"/subjects/{topic}-value/versions") == [1, 2]
    return topic


def test_avro_from_two_writers_across_an_evolution_reads_into_the_reader_schemas_struct(
    session, bootstrap, schema_registry, trades
):
    df = _kafka(session, bootstrap, trades)
    latest = df.select(
        eos.from_confluent_avro("value", schema_registry.url, subject=f"{trades}-value").alias("t")
    )
    assert latest.schema["t"].dataType.simpleString() == "struct<sym:string,qty:bigint,venue:string>"
    rows = sorted((r.t.sym, r.t.qty, r.t.venue) for r in latest.collect())
    # V1's records take V2's default; eos's records carry their own venue
    assert rows == [
        ("A", 1, "XNAS"),
        ("B", 1, "XNAS"),
        ("C", 1, "XNAS"),
        ("D", 2, "XLON"),
        ("E", 2, "XLON"),
        ("F", 2, "XLON"),
    ]

    # An older reader schema: the newer records read without the field it does not have.
    older = df.select(
        eos.from_confluent_avro(F.col("value"), {"url": schema_registry.url}, schema=V1).alias("t")
    )
    assert sorted((r.t.sym, r.t.qty) for r in older.collect()) == [(s, 1) for s in "ABC"] + [
        (s, 2) for s in "DEF"
    ]

    # A stream reads the same, in a query eos does not write.
    streamed = kafka_stream(session, bootstrap, trades).select(
        eos.from_confluent_avro("value", schema_registry.url, subject=f"{trades}-value").alias("t")
    )
    name = f"decoded_{trades.replace('-', '_')}"
    q = streamed.writeStream.format("memory").queryName(name).trigger(availableNow=True).start()
    q.awaitTermination()
    assert sorted(r.t.sym for r in session.sql(f"SELECT t FROM {name}").collect()) == list("ABCDEF")


@pytest.mark.parametrize("session", _CONNECT_LONG, indirect=True)
def test_a_record_that_cannot_be_read_is_null_or_fails_the_query_naming_it(
    session, bootstrap, names, schema_registry
):
    topic = names("dec-bad")
    testing.create_topic(bootstrap, topic, 1)
    client = SchemaRegistryClient({"url": schema_registry.url})
    good = _framed(topic, AvroSerializer(client, V1), [{"sym": "A", "qty": 1}])[0]
    schema_id = good[1:5]
    bad = [
        b'{"sym": "A"}',  # offset 1: not Confluent-framed
        b"\x00" + (987654).to_bytes(4, "big") + good[5:],  # 2: a schema id the registry does not have
        b"\x00" + schema_id + good[5:7],  # 3: a body cut short
        good + b"\x01\x02",  # 4: bytes left over after the record
    ]
    _produce(bootstrap, topic, [good, *bad, good])
    df = _kafka(session, bootstrap, topic)
    read = eos.from_confluent_avro("value", schema_registry.url, subject=f"{topic}-value", mode="PERMISSIVE")
    rows = [(r.offset, r.t) for r in df.select("offset", read.alias("t")).orderBy("offset").collect()]
    assert [(o, t.sym if t else None) for o, t in rows] == [
        (0, "A"),
        (1, None),
        (2, None),
        (3, None),
        (4, None),
        (5, "A"),
    ]

    failfast = eos.from_confluent_avro("value", schema_registry.url, subject=f"{topic}-value")
    with pytest.raises(Exception) as info:
        df.select(failfast.alias("t")).collect()
    text = str(info.value)
    assert "DeserializationError" in text and f"input record {topic}/0@1" in text, text[-2000:]
    assert "not Confluent-framed: magic byte 0x7b" in text, text[-2000:]


def test_why_a_record_cannot_be_read(names, schema_registry):
    """The reasons, from the workers' reader itself (no Spark: the Spark path is the test above)."""
    topic = names("dec-why")
    client = SchemaRegistryClient({"url": schema_registry.url})
    good = _framed(topic, AvroSerializer(client, V1), [{"sym": "A", "qty": 1}])[0]
    reading = Reading("avro", _decoders.registry_settings(schema_registry.url), _decoders.own_schema(V2))
    framed = [
        good,
        None,
        b"\x00\x00",
        b"\x00" + (987654).to_bytes(4, "big") + good[5:],
        good[:7],
        good + b"\x01\x02",
    ]
    values, errors = fit(reading, _decoders.arrow_type(reading), framed)
    assert values[:2] == [{"sym": "A", "qty": 1, "venue": "XNAS"}, None]
    assert errors[:2] == [None, None], "a null value is null, not an error"
    assert errors[2] == "2 bytes, too short for Confluent's framing (magic byte and schema id)"
    assert errors[3] == "schema id 987654 is not in the registry"
    assert errors[4].startswith(f"corrupt Avro body (writer schema id {int.from_bytes(good[1:5], 'big')})")
    assert errors[5].endswith("2 bytes left over after the record")


@pytest.mark.parametrize("session", _CONNECT_LONG, indirect=True)
def test_protobuf_and_json_schema_read_into_structs(session, bootstrap, names, schema_registry):
    client = SchemaRegistryClient({"url": schema_registry.url})
    topic = names("dec-proto")
    testing.create_topic(bootstrap, topic, 1)
    proto = ProtobufSerializer(Order, client, {"use.deprecated.format": False})
    _produce(bootstrap, topic, _framed(topic, proto, [Order(id=1, item="x", quantity=3), Order(id=2)]))
    # and one framed by eos's own serializers, as its sink writes a struct column with value_serializer
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("dec-proto-app"),
        output_topic=topic,
        value_serializer="protobuf",
        value_schema="tests.support.orders_pb2.Order",
        schema_registry={"url": schema_registry.url},
    )
    _serializers.resolve(config)
    struct = pa.array(
        [{"id": 3, "item": "z", "quantity": 9}],
        pa.struct([("id", pa.int64()), ("item", pa.string()), ("quantity", pa.int32())]),
    )
    outputs = Outputs(values=struct, topic=topic, offsets=pa.array([0], pa.int64()))
    _produce(
        bootstrap, topic, _serializers.Serializers.of(config).outputs(outputs, "in", 0).values.to_pylist()
    )
    df = _kafka(session, bootstrap, topic)
    read = eos.from_confluent_protobuf("value", "tests.support.orders_pb2.Order")
    assert [tuple(r.o) for r in df.select(read.alias("o")).orderBy("offset").collect()] == [
        (1, "x", 3),
        (2, "", 0),
        (3, "z", 9),
    ]

    topic = names("dec-json")
    testing.create_topic(bootstrap, topic, 1)
    schema = json.dumps(
        {
            "title": "Trade",
            "type": "object",
            "properties": {
                "sym": {"type": "string"},
                "qty": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
        }
    )
    _produce(
        bootstrap,
        topic,
        _framed(
            topic,
            JSONSerializer(schema, client),
            [{"sym": "A", "qty": 1, "tags": ["x"]}, {"sym": "B", "qty": 2}],
        ),
    )
    _produce(bootstrap, topic, [b"\x00" + (1).to_bytes(4, "big") + b'{"sym": 5, "qty": "many"}'])
    df = _kafka(session, bootstrap, topic)
    read = eos.from_confluent_json("value", schema, mode="PERMISSIVE")
    rows = [r.t for r in df.select(read.alias("t")).orderBy("offset").collect()]
    assert [tuple(t) if t else None for t in rows] == [("A", 1, ["x"]), ("B", 2, None), None]


def test_bad_arguments_are_refused_naming_them(schema_registry):
    with pytest.raises(eos.ConfigError, match="schema"):
        eos.from_confluent_avro("value", schema_registry.url)
    with pytest.raises(eos.ConfigError, match="subject"):
        eos.from_confluent_avro("value", schema_registry.url, subject="no-such-subject-value")
    with pytest.raises(eos.ConfigError, match='only \\["null", T\\] unions'):
        eos.from_confluent_avro(
            "value",
            schema_registry.url,
            schema='{"type": "record", "name": "R", "fields": [{"name": "u", "type": ["int", "string"]}]}',
        )
    with pytest.raises(eos.ConfigError, match="mode"):
        eos.from_confluent_avro("value", schema_registry.url, schema=V1, mode="DROPMALFORMED")
    with pytest.raises(eos.ConfigError, match="message"):
        eos.from_confluent_protobuf("value", "no.such.Message")


def _unreadable(good: bytes) -> list[bytes]:
    """Three records that cannot be read: not framed, a schema id the registry lacks, a cut body."""
    return [b'{"sym": "A"}', b"\x00" + (987654).to_bytes(4, "big") + good[5:], good[:7]]


def _trades_input(bootstrap, schema_registry, topic: str, partitions: int, per_partition: int, bad_at: set):
    """Avro V1 trades written by confluent-kafka's producer, `per_partition` in each partition, with
    unreadable records at the offsets `bad_at` of each; {partition: [(offset, bytes, sym or None)]}."""
    client = SchemaRegistryClient({"url": schema_registry.url})
    serialize = AvroSerializer(client, V1)
    sent: dict[int, list] = {}
    for p in range(partitions):
        rows, bad = [], iter(range(len(bad_at)))
        for offset in range(per_partition):
            if offset in bad_at:
                good = _framed(topic, serialize, [{"sym": "Z", "qty": 0}])[0]
                rows.append((offset, _unreadable(good)[next(bad) % 3], None))
            else:
                sym = f"p{p}o{offset}"
                rows.append((offset, _framed(topic, serialize, [{"sym": sym, "qty": offset}])[0], sym))
        _produce(bootstrap, topic, [v for _, v, _ in rows], partition=p)
        sent[p] = rows
    return sent


def test_an_eos_query_reads_avro_input_and_dead_letters_what_it_cannot_read_exactly_once(
    spark, bootstrap, names, schema_registry, checkpoint_dir
):
    source, output, dead = names("deser-in"), names("deser-out"), names("deser-dlq")
    testing.create_topic(bootstrap, source, 2)
    testing.create_topic(bootstrap, output, 2)
    testing.create_topic(bootstrap, dead, 1)
    sent = _trades_input(bootstrap, schema_registry, source, 2, 300, bad_at={7, 150, 299})
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("deser-app"),
        output_topic=output,
        processing_guarantee="exactly_once",
        commit_every=100,
        value_deserializer="io.confluent.kafka.serializers.KafkaAvroDeserializer",
        value_deserializer_schema=V2,  # newer than the writer's: each trade takes venue's default
        schema_registry={"url": schema_registry.url},
        on_error="dead_letter",
        dead_letter_topic=dead,
    )
    run_query(spark, config, [source], checkpoint_dir, trades_support.describe, maxOffsetsPerTrigger=250)

    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert hanging == []
    got = [r.value.decode() for r in records]
    want = [f"{sym}|{offset}|XNAS" for p in sent for offset, _, sym in sent[p] if sym is not None]
    assert sorted(got) == sorted(want), "nothing missing, nothing twice"
    for out in {r.partition for r in records}:  # each output partition in input order
        seen = [r.value.decode().split("|")[0] for r in records if r.partition == out]
        for p in sent:
            offsets = [int(s.split("o")[1]) for s in seen if s.startswith(f"p{p}o")]
            assert offsets == sorted(offsets), f"input partition {p}'s order in output partition {out}"

    letters, hanging = testing.read_topic(bootstrap, dead, marker=testing.write_markers(bootstrap, dead))
    assert hanging == []
    letters = [r for r in letters if dict(r.headers).get("__eos.errors.kind")]
    expected = {(str(p), str(o)): v for p in sent for o, v, sym in sent[p] if sym is None}
    by_input = {
        (
            dict(r.headers)["__eos.errors.partition"].decode(),
            dict(r.headers)["__eos.errors.offset"].decode(),
        ): r
        for r in letters
    }
    assert len(letters) == len(expected) == 6 and set(by_input) == set(expected), "each once"
    for where, letter in by_input.items():
        headers = dict(letter.headers)
        assert letter.value == expected[where], "the input's bytes, as read"
        assert headers["__eos.errors.kind"] == b"DeserializationError"
        assert headers["__eos.errors.message"].startswith(b"the value cannot be read as avro: ")


def test_with_on_error_fail_an_unreadable_record_fails_the_batch_naming_it_and_commits_nothing(
    spark, bootstrap, names, schema_registry, checkpoint_dir
):
    source, output = names("deser-fail-in"), names("deser-fail-out")
    testing.create_topic(bootstrap, source, 1)
    testing.create_topic(bootstrap, output, 1)
    _trades_input(bootstrap, schema_registry, source, 1, 20, bad_at={5})
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("deser-fail-app"),
        output_topic=output,
        processing_guarantee="exactly_once",
        value_deserializer="avro",
        value_deserializer_schema=V1,
        schema_registry={"url": schema_registry.url},
    )
    df = eos.read_stream(spark, config, [source])
    query = (
        df.writeStream.foreachBatch(eos.sink(config, trades_support.symbol))
        .option("checkpointLocation", str(checkpoint_dir))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception) as info:
        query.awaitTermination()
    assert f"input record {source}/0@5" in str(info.value) and "not Confluent-framed" in str(info.value)
    records, _ = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert records == [], "the batch's transaction was aborted"


def test_a_deserializer_setting_that_cannot_work_is_refused_naming_it(
    spark, bootstrap, names, schema_registry
):
    base = {"bootstrap_servers": bootstrap, "app_id": names("deser-bad"), "output_topic": "out"}
    with pytest.raises(eos.ConfigError, match="value_deserializer_schema"):
        eos.Config(**base, value_deserializer="avro", schema_registry={"url": schema_registry.url})
    with pytest.raises(eos.ConfigError, match="schema_registry.url"):
        eos.Config(**base, value_deserializer="avro", value_deserializer_schema=V1)
    with pytest.raises(eos.ConfigError, match="input_mode"):
        eos.Config(**base, value_deserializer="json_schema", value_deserializer_schema="{}", input_mode="any")
    config = eos.Config(
        **base,
        value_deserializer="avro",
        value_deserializer_schema=V1,
        schema_registry={"url": schema_registry.url},
    )
    df = spark.createDataFrame([("t", 0, 0, b"x")], "topic string, partition int, offset long, value binary")
    with pytest.raises(eos.ConfigError, match="value_serializer"):
        eos.sink(config)(df, 0)
    registry = {"schema_registry": {"url": schema_registry.url}}
    keyed = eos.Config(**base, key_deserializer="avro", key_deserializer_schema=V1, **registry)
    df = spark.createDataFrame(
        [("t", 0, 0, b"x", b"k")], "topic string, partition int, offset long, value binary, key binary"
    )
    with pytest.raises(eos.ConfigError, match="key_serializer"):
        eos.sink(keyed)(df, 0)
    broken = eos.Config(
        **base, value_deserializer="avro", value_deserializer_schema='{"type": "recrd"}', **registry
    )
    with pytest.raises(eos.ConfigError, match="value_deserializer_schema"):
        eos.sink(broken, trades_support.symbol)(df, 0)  # on the driver, before any task
    plain = "org.apache.kafka.common.serialization.ByteArrayDeserializer"
    assert eos.Config(**base, value_deserializer=plain).value_deserializer is None


def test_logical_types_and_maps_are_read_by_the_reader_schema(spark, bootstrap, names, schema_registry):
    """A writer of plain longs, ints and bytes read by a reader whose fields are timestamps, a date and a
    decimal (compatible: Avro resolves logical types by their underlying types) gives the reader's
    values, as Spark's from_avro does; a map reads as a map."""
    topic = names("dec-logical")
    testing.create_topic(bootstrap, topic, 1)
    plain = {
        "type": "record",
        "name": "E",
        "fields": [
            {"name": "ts", "type": "long"},
            {"name": "day", "type": "int"},
            {"name": "amount", "type": "bytes"},
            {"name": "counts", "type": {"type": "map", "values": "long"}},
        ],
    }
    logical = json.loads(json.dumps(plain))
    logical["fields"][0]["type"] = {"type": "long", "logicalType": "timestamp-millis"}
    logical["fields"][1]["type"] = {"type": "int", "logicalType": "date"}
    logical["fields"][2]["type"] = {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}
    client = SchemaRegistryClient({"url": schema_registry.url})
    row = {
        "ts": 1_700_000_000_123,
        "day": 19_000,
        "amount": (-1234).to_bytes(2, "big", signed=True),
        "counts": {"a": 1},
    }
    _produce(bootstrap, topic, _framed(topic, AvroSerializer(client, json.dumps(plain)), [row]))
    df = _kafka(spark, bootstrap, topic)
    read = eos.from_confluent_avro(
        "value", {"url": schema_registry.url, "timeout": 10}, schema=json.dumps(logical)
    )
    ((ms, got),) = [
        (r.ms, r.e) for r in df.select(F.unix_millis(read["ts"]).alias("ms"), read.alias("e")).collect()
    ]
    assert ms == 1_700_000_000_123, "the writer's long, as the reader's timestamp-millis"
    assert got.day == datetime.date(2022, 1, 8) and str(got.amount) == "-12.34" and got.counts == {"a": 1}


def test_json_and_protobuf_values_are_read_as_their_types_say(names, schema_registry):
    """JSON values of another type than the reader's are unreadable, not coerced (1.5 is no integer);
    Protobuf keeps presence (an unset optional or oneof branch is null, not 0) and reads a uint64 above
    2^63 as Spark's from_protobuf does (wrapped into a long)."""
    schema = json.dumps({"type": "object", "properties": {"i": {"type": "integer"}, "n": {"type": "number"}}})
    reading = Reading("json_schema", (), schema)
    body = [
        b"\x00\x00\x00\x00\x01" + json.dumps(v).encode() for v in ({"i": 1, "n": 2}, {"i": 1.5}, {"n": True})
    ]
    values, errors = fit(reading, _decoders.arrow_type(reading), body)
    assert values == [{"i": 1, "n": 2.0}, None, None]
    assert errors[1].endswith("i is float, not an integer") and errors[2].endswith("n is bool, not a number")

    reading = Reading("protobuf", (), "tests.support.readings_pb2.Reading")
    client = SchemaRegistryClient({"url": schema_registry.url})
    serialize = ProtobufSerializer(ReadingMessage, client, {"use.deprecated.format": False})
    topic = names("dec-presence")
    message = ReadingMessage(b=7, u64=2**63 + 5)
    message.counts["k"] = 3
    values, errors = fit(
        reading, _decoders.arrow_type(reading), _framed(topic, serialize, [message, ReadingMessage(opt=0)])
    )
    assert errors == [None, None]
    assert values[0] == {
        "opt": None,
        "a": None,
        "b": 7,
        "u64": 2**63 + 5 - 2**64,
        "counts": {"k": 3},
        "inner": None,
    }
    assert values[1]["opt"] == 0 and values[1]["b"] is None


def test_a_registry_that_is_not_one_is_an_error_not_a_bad_record(names, schema_registry):
    """A 404 that is not the registry's 'schema not found' (a wrong URL path) fails loudly: it is not
    every record's fault."""
    wrong = schema_registry.url.replace("/v7", "/v9")
    reading = Reading("avro", _decoders.registry_settings(wrong), _decoders.own_schema(V1))
    with pytest.raises(eos.SchemaRegistryError, match="HTTP 404"):
        fit(reading, _decoders.arrow_type(reading), [b"\x00\x00\x00\x00\x01\x02A\x02"])
