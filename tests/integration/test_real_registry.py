"""eos's Schema Registry serializers against a real registry (Apicurio, Confluent's API; the session's
`schema_registry`): the three formats written and read back, the three subject-name strategies, a schema
evolved under BACKWARD compatibility (and an incompatible one refused with the registry's own 409), and a
schema that references another subject's. What the loopback stand-in (tests/support/registry.py) still
covers, and why: Basic auth (Apicurio takes credentials only through an OpenID Connect server), and
injected 503s. Written through the worker's path (`Serializers`), read with confluent-kafka's
deserializers on clients of their own, so every schema is fetched over HTTP."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

import eos
from eos._registry import _serializers
from eos.records import Outputs
from tests.support.orders_pb2 import Order


def _trade(namespace: str, *extra: dict) -> str:
    fields = [{"name": "sym", "type": "string"}, {"name": "qty", "type": "long"}, *extra]
    return json.dumps({"type": "record", "name": "Trade", "namespace": namespace, "fields": fields})


VENUE = {"name": "venue", "type": "string", "default": "XNAS"}  # added with a default: BACKWARD-compatible
PRICE = {"name": "px", "type": "double"}  # added without one: not
TRADE_JSON = json.dumps(
    {
        "title": "Trade",
        "type": "object",
        "properties": {"sym": {"type": "string"}, "qty": {"type": "integer"}},
        "required": ["sym", "qty"],
    }
)


@pytest.fixture(autouse=True)
def fresh():
    _serializers.clear()
    yield
    _serializers.clear()


def _config(registry, topic: str, **kw) -> eos.Config:
    return eos.Config(
        bootstrap_servers="127.0.0.1:1",  # no broker: the serializers alone
        app_id="registry-test",
        output_topic=topic,
        processing_guarantee="exactly_once",
        schema_registry={"url": registry.url},
        **{"value_serializer": "avro", **kw},
    )


def _write(cfg: eos.Config, values: list, struct: pa.DataType | None = None) -> list[bytes]:
    """`values` serialized as a worker serializes a batch's outputs, after the driver's `resolve`."""
    _serializers.resolve(cfg)
    array = pa.array(values, struct) if struct is not None else pa.array(values)
    outputs = Outputs(values=array, topic=cfg.output_topic, offsets=pa.array(range(len(values)), pa.int64()))
    return _serializers.Serializers.of(cfg).outputs(outputs, "in", 0).values.to_pylist()


def _read(registry, topic: str, framed: list[bytes], deserializer=AvroDeserializer, **kw) -> list:
    client = SchemaRegistryClient({"url": registry.url})  # its own cache: schemas fetched over HTTP
    d = deserializer(schema_registry_client=client, **kw)
    return [d(v, SerializationContext(topic, MessageField.VALUE)) for v in framed]


TRADES = pa.struct([("sym", pa.string()), ("qty", pa.int64())])


def test_avro_json_schema_and_protobuf_written_and_read_back(schema_registry, names):
    rows = [{"sym": "A", "qty": 1}, {"sym": "B", "qty": 2}]
    avro_topic = topic = names("sr-avro")
    framed = _write(_config(schema_registry, topic, value_schema=_trade("shop")), rows, TRADES)
    assert {v[0] for v in framed} == {0}, "Confluent's framing: magic byte 0, then the schema id"
    assert _read(schema_registry, topic, framed) == rows

    json_topic = topic = names("sr-json")
    cfg = _config(schema_registry, topic, value_serializer="json_schema", value_schema=TRADE_JSON)
    assert _read(schema_registry, topic, _write(cfg, rows, TRADES), JSONDeserializer, schema_str=None) == rows

    topic = names("sr-proto")
    cfg = _config(
        schema_registry, topic, value_serializer="protobuf", value_schema="tests.support.orders_pb2.Order"
    )
    framed = _write(
        cfg,
        [{"id": 1, "item": "x", "quantity": 3}],
        pa.struct([("id", pa.int64()), ("item", pa.string()), ("quantity", pa.int32())]),
    )
    d = ProtobufDeserializer(
        Order, {"use.deprecated.format": False}, SchemaRegistryClient({"url": schema_registry.url})
    )
    assert [d(v, SerializationContext(topic, MessageField.VALUE)) for v in framed] == [
        Order(id=1, item="x", quantity=3)
    ]
    assert {f"{avro_topic}-value", f"{json_topic}-value", f"{topic}-value"} <= set(
        schema_registry.get("/subjects")
    )


def test_the_three_subject_name_strategies(schema_registry, names):
    topic = names("sr-strategy")
    namespace = topic.replace("-", "_")
    for strategy in ("topic", "record", "topic_record"):
        cfg = _config(
            schema_registry, topic, value_schema=_trade(namespace), value_subject_name_strategy=strategy
        )
        _write(cfg, [{"sym": "A", "qty": 1}], TRADES)
    subjects = set(schema_registry.get("/subjects"))
    assert {f"{topic}-value", f"{namespace}.Trade", f"{topic}-{namespace}.Trade"} <= subjects


def test_an_evolved_schema_is_accepted_and_an_incompatible_one_refused_with_the_registrys_409(
    schema_registry, names
):
    topic = names("sr-evolve")
    subject = f"{topic}-value"
    schema_registry.put(f"/config/{subject}", {"compatibility": "BACKWARD"})
    old = _write(
        _config(schema_registry, topic, value_schema=_trade("shop")), [{"sym": "A", "qty": 1}], TRADES
    )
    _serializers.clear()  # the next batch of a redeployed query, with the evolved schema
    with_venue = pa.struct([("sym", pa.string()), ("qty", pa.int64()), ("venue", pa.string())])
    new = _write(
        _config(schema_registry, topic, value_schema=_trade("shop", VENUE)),
        [{"sym": "B", "qty": 2, "venue": "XLON"}],
        with_venue,
    )
    assert schema_registry.get(f"/subjects/{subject}/versions") == [1, 2]
    # Read with the evolved schema: the older record takes the new field's default.
    assert _read(schema_registry, topic, old + new, schema_str=_trade("shop", VENUE)) == [
        {"sym": "A", "qty": 1, "venue": "XNAS"},
        {"sym": "B", "qty": 2, "venue": "XLON"},
    ]

    _serializers.clear()
    with pytest.raises(eos.SchemaRegistryError) as info:
        _serializers.resolve(_config(schema_registry, topic, value_schema=_trade("shop", VENUE, PRICE)))
    assert (info.value.subject, info.value.status) == (subject, 409)
    assert "incompatible with its latest version 2" in str(info.value)
    assert "Nothing was written" in str(info.value)
    assert schema_registry.get(f"/subjects/{subject}/versions") == [1, 2], "nothing registered"


def test_a_schema_that_references_another_subjects_schema(schema_registry, names):
    topic = names("sr-ref")
    address = json.dumps(
        {
            "type": "record",
            "name": "Address",
            "namespace": "shop",
            "fields": [{"name": "city", "type": "string"}],
        }
    )
    person = json.dumps(
        {
            "type": "record",
            "name": "Person",
            "namespace": "shop",
            "fields": [{"name": "name", "type": "string"}, {"name": "addr", "type": "shop.Address"}],
        }
    )
    client = SchemaRegistryClient({"url": schema_registry.url})
    client.register_schema(f"{topic}-address", Schema(address, "AVRO"))
    client.register_schema(
        f"{topic}-value", Schema(person, "AVRO", [SchemaReference("shop.Address", f"{topic}-address", 1)])
    )
    # The operator registered the schemas; eos writes with the subject's latest one.
    cfg = _config(
        schema_registry, topic, value_schema=None, use_latest_version=True, auto_register_schemas=False
    )
    rows = [{"name": "n", "addr": {"city": "c"}}]
    framed = _write(
        cfg, rows, pa.struct([("name", pa.string()), ("addr", pa.struct([("city", pa.string())]))])
    )
    assert _read(schema_registry, topic, framed) == rows
