"""Schema Registry serializers (`eos._registry._serializers`): confluent-kafka's own serializers and client,
against its in-process `mock://` registry and, for the HTTP path, the loopback stand-in of
tests/support/registry.py. Read back with confluent-kafka's deserializers."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

import eos
from eos._registry import _serializers
from eos._spark._datasource import settings_of
from eos.records import Outputs
from tests.support.configs import config as base_config
from tests.support.orders_pb2 import Order
from tests.support.registry import Registry
from tests.unit.test_task_logic import DLQ, IN, committed, task

ORDER = (
    '{"type": "record", "name": "Order", "namespace": "shop", "fields": ['
    '{"name": "id", "type": "long"}, {"name": "item", "type": "string"}]}'
)
ORDER_V2 = ORDER.replace('"string"}]', '"string"}, {"name": "note", "type": "string"}]')
ORDER_JSON = (
    '{"title": "Order", "type": "object", "properties": {"id": {"type": "integer"},'
    ' "item": {"type": "string"}}, "required": ["id", "item"]}'
)
STRUCT = pa.struct([("id", pa.int64()), ("item", pa.string())])


@pytest.fixture(autouse=True)
def fresh():
    _serializers.clear()  # each test a fresh worker and driver
    yield
    _serializers.clear()


def config(url: str = "mock://t", **kw) -> eos.Config:
    return base_config(
        **{
            "processing_guarantee": "exactly_once",
            "value_serializer": "avro",
            "value_schema": ORDER,
            "schema_registry": {"url": url, "retries.wait.ms": 10, "retries.max.wait.ms": 50},
            **kw,
        }
    )


def orders(n: int, start: int = 0) -> pa.Array:
    return pa.array([{"id": i, "item": f"item-{i}"} for i in range(start, start + n)], STRUCT)


def serialize(cfg: eos.Config, values, keys=None) -> Outputs:
    """`values` serialized as a worker does (after the driver's `resolve`)."""
    outputs = Outputs(values=values, topic="out", keys=keys, offsets=pa.array(range(len(values)), pa.int64()))
    return _serializers.Serializers.of(cfg).outputs(outputs, IN, 0)


def registry_of(cfg: eos.Config) -> SchemaRegistryClient:
    """A client of the registry: for mock://, the process's one (a mock's schemas are its own)."""
    if cfg.schema_registry["url"].startswith("mock://"):
        return _serializers._client(cfg)
    return SchemaRegistryClient(dict(cfg.schema_registry))


def read(cfg: eos.Config, framed, deserializer=AvroDeserializer, field=MessageField.VALUE, **kw) -> list:
    d = deserializer(schema_registry_client=registry_of(cfg), **kw)
    return [d(v, SerializationContext("out", field)) for v in framed.to_pylist()]


# -- config ----------------------------------------------------------------------------------------------


def test_the_serializer_takes_eos_names_and_confluents_java_class_names():
    assert (
        config(value_serializer="io.confluent.kafka.serializers.KafkaAvroSerializer").value_serializer
        == "avro"
    )
    assert config(value_serializer="JSON_SCHEMA", value_schema=ORDER_JSON).value_serializer == "json_schema"
    assert (
        config(value_serializer="org.apache.kafka.common.serialization.ByteArraySerializer").value_serializer
        is None
    )
    strategy = "io.confluent.kafka.serializers.subject.RecordNameStrategy"
    assert config(value_subject_name_strategy=strategy).value_subject_name_strategy == "record"
    with pytest.raises(eos.ConfigError, match="key_serializer.*'xml' is not 'avro'"):
        config(key_serializer="xml")


def test_kafka_style_keys_set_the_serializer_and_the_registry_client():
    cfg = eos.Config.from_properties(
        {
            "bootstrap.servers": "b:1",
            "app.id": "app",
            "output.topic": "out",
            "value.serializer": "io.confluent.kafka.serializers.KafkaAvroSerializer",
            "value.schema": ORDER,
            "value.subject.name.strategy": "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy",
            "auto.register.schemas": "false",
            "schema.registry.url": "http://registry:8081",
            "basic.auth.credentials.source": "USER_INFO",
            "basic.auth.user.info": "me:s3cret",
        }
    )
    assert (cfg.value_serializer, cfg.value_subject_name_strategy, cfg.auto_register_schemas) == (
        "avro",
        "topic_record",
        False,
    )
    assert dict(cfg.schema_registry) == {
        "url": "http://registry:8081",
        "basic.auth.credentials.source": "USER_INFO",
        "basic.auth.user.info": "me:s3cret",
    }
    assert "s3cret" not in repr(cfg)
    env = eos.Config.from_env(
        {"EOS_SCHEMA_REGISTRY_URL": "http://r:1", "EOS_VALUE_SERIALIZER": "avro", "EOS_VALUE_SCHEMA": ORDER},
        bootstrap_servers="b:1",
        app_id="app",
        output_topic="out",
    )
    assert dict(env.schema_registry) == {"url": "http://r:1"}


def test_format_eos_options_set_them_under_eos():
    settings = settings_of(
        {
            "kafka.bootstrap.servers": "b:1",
            "eos.app.id": "app",
            "topic": "out",
            "eos.value.serializer": "avro",
            "eos.value.schema": ORDER,
            "eos.schema.registry.url": "http://user:pw@registry:8081",
        }
    )
    cfg = settings.config
    assert (cfg.value_serializer, cfg.schema_registry["url"]) == ("avro", "http://user:pw@registry:8081")
    assert "pw@" not in repr(cfg) and "http://***@registry:8081" in repr(cfg)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"schema_registry": {}}, "schema_registry.url.*needs the Schema Registry's URL"),
        ({"value_schema": None}, "value_schema.*needs its schema"),
        ({"value_serializer": "protobuf", "value_schema": "Order"}, "not the import path"),
        (
            {"output_topic": None, "output_topic_column": "to"},
            "value_subject_name_strategy.*use 'record'",
        ),
    ],
)
def test_a_serializer_setting_that_cannot_work_is_refused_naming_it(kw, match):
    with pytest.raises(eos.ConfigError, match=match):
        config(**kw)


def test_foreach_writer_refuses_serializers():
    with pytest.raises(eos.ConfigError, match="foreach_writer does not take Schema Registry serializers"):
        eos.foreach_writer(config())


# -- the three formats (mock://) --------------------------------------------------------------------------


def test_a_struct_column_is_written_in_confluent_framing_and_reads_back_as_it_was():
    cfg = config(key_serializer="avro", key_schema='"string"')
    _serializers.resolve(cfg)
    out = serialize(cfg, orders(3), keys=pa.array(["a", "b", None]))
    framed = out.values.to_pylist()
    assert all(v[0] == 0 for v in framed), "magic byte 0, then the schema id"
    assert read(cfg, out.values) == [{"id": i, "item": f"item-{i}"} for i in range(3)]
    assert read(cfg, out.keys, field=MessageField.KEY) == ["a", "b", None]
    client = registry_of(cfg)
    assert sorted(client.get_subjects()) == ["out-key", "out-value"]


def test_json_schema_and_protobuf():
    cfg = config(value_serializer="json_schema", value_schema=ORDER_JSON)
    _serializers.resolve(cfg)
    assert read(cfg, serialize(cfg, orders(2)).values, JSONDeserializer, schema_str=None) == [
        {"id": 0, "item": "item-0"},
        {"id": 1, "item": "item-1"},
    ]
    cfg = config(value_serializer="protobuf", value_schema="tests.support.orders_pb2.Order")
    _serializers.resolve(cfg)
    out = serialize(cfg, orders(2))
    client = registry_of(cfg)
    d = ProtobufDeserializer(Order, {"use.deprecated.format": False}, client)
    assert [d(v, SerializationContext("out", MessageField.VALUE)) for v in out.values.to_pylist()] == [
        Order(id=0, item="item-0"),
        Order(id=1, item="item-1"),
    ]


def test_record_name_strategies_name_the_subject_after_the_schema():
    cfg = config(value_subject_name_strategy="record")
    _serializers.resolve(cfg)
    cfg2 = config(
        value_subject_name_strategy="topic_record", value_serializer="json_schema", value_schema=ORDER_JSON
    )
    _serializers.resolve(cfg2)
    client = registry_of(cfg)
    assert sorted(client.get_subjects()) == ["out-Order", "shop.Order"]


def test_a_value_that_does_not_fit_is_a_bad_record_naming_its_input_and_subject():
    cfg = config()
    _serializers.resolve(cfg)
    bad = pa.array([{"id": 1, "item": "x"}, {"id": 2, "item": None}], STRUCT)
    with pytest.raises(eos.SerializationError) as info:
        serialize(cfg, bad)
    assert (info.value.topic, info.value.partition, info.value.offset, info.value.poison) == (IN, 0, 1, True)
    assert "does not fit its Avro schema (subject 'out-value')" in str(info.value)


# -- in the partition task (fake producer: tests/support/producers.py) ----------------------------------


def struct_rows(offsets, bad=()) -> pa.RecordBatch:
    offsets = list(offsets)
    return pa.RecordBatch.from_pydict(
        {
            "topic": pa.array([IN] * len(offsets), pa.string()),
            "partition": pa.array([0] * len(offsets), pa.int32()),
            "offset": pa.array(offsets, pa.int64()),
            "value": pa.array([{"id": o, "item": None if o in bad else f"i{o}"} for o in offsets], STRUCT),
        }
    )


def test_a_record_that_does_not_fit_goes_to_the_dead_letter_topic_with_the_rest_serialized(kafka):
    cfg = config(on_error="dead_letter", dead_letter_topic=DLQ)
    _serializers.resolve(cfg)
    stats = task(cfg).run([struct_rows(range(6), bad={2, 4})])
    assert committed(kafka, "out") == [0, 1, 3, 5] and committed(kafka, DLQ) == [2, 4]
    assert kafka.offset_commits == [6], "outputs, dead letters and the offset: one transaction"
    values = pa.array([v for t, v, _ in kafka.outputs if t == "out"], pa.binary())
    assert [r["id"] for r in read(cfg, values)] == [0, 1, 3, 5]
    letter = dict([p.out for p in kafka.produced if p.topic == DLQ][-1].headers)
    assert letter["__eos.errors.kind"] == b"SerializationError"
    assert stats.dead_letters == 2


def test_with_on_error_fail_it_fails_the_batch_naming_the_record(kafka):
    _serializers.resolve(config())
    with pytest.raises(eos.SerializationError, match=r"input record in/0@4"):
        task(config()).run([struct_rows(range(6), bad={4})])
    assert kafka.outputs == []


def test_a_process_batch_output_that_does_not_fit_is_found_row_by_row(kafka):
    def passthrough(batch, state):
        return pa.RecordBatch.from_arrays([batch.column("value")], ["value"])

    cfg = config(on_error="dead_letter", dead_letter_topic=DLQ)
    _serializers.resolve(cfg)
    task(cfg, process_batch=passthrough).run([struct_rows(range(5), bad={3})])
    assert committed(kafka, "out") == [0, 1, 2, 4] and committed(kafka, DLQ) == [3]


def test_process_returns_dicts_that_are_serialized(kafka):
    cfg = config()
    _serializers.resolve(cfg)
    task(cfg, lambda row, state: {"value": {"id": row.offset, "item": "p"}}).run([struct_rows(range(3))])
    values = pa.array([p.out.value for p in kafka.produced if p.topic == "out"], pa.binary())
    assert read(cfg, values) == [{"id": i, "item": "p"} for i in range(3)]


# -- the HTTP path (loopback stand-in) --------------------------------------------------------------------


@pytest.fixture
def registry():
    with Registry(users={"me": "s3cret"}) as r:
        yield r


def http_config(registry: Registry, **kw) -> eos.Config:
    settings = {"url": registry.url, "basic.auth.user.info": "me:s3cret", "retries.wait.ms": 10}
    return config(registry.url, schema_registry=settings, **kw)


def test_the_driver_registers_once_and_a_worker_looks_up_once_not_per_record(registry):
    cfg = http_config(registry)
    _serializers.resolve(cfg)
    assert registry.requests == [("POST", "/subjects/out-value/versions")]
    _serializers.resolve(cfg)
    assert len(registry.requests) == 1, "a later batch asks nothing"
    serialize(cfg, orders(1000))
    serialize(cfg, orders(1000, start=1000))
    assert registry.requests[1:] == [("POST", "/subjects/out-value")], "one lookup for 2,000 records"


def test_an_incompatible_schema_fails_at_the_driver_naming_subject_and_version(registry):
    registry.register("out-value", ORDER)
    registry.incompatible.add("out-value")
    with pytest.raises(eos.SchemaRegistryError) as info:
        _serializers.resolve(http_config(registry, value_schema=ORDER_V2))
    assert (info.value.subject, info.value.status) == ("out-value", 409)
    assert "incompatible with its latest version 1" in str(info.value)
    assert "Nothing was written" in str(info.value)


def test_unregistered_with_auto_register_off_and_no_subject_with_use_latest_version(registry):
    with pytest.raises(eos.SchemaRegistryError, match="no such subject under subject 'out-value'"):
        _serializers.resolve(http_config(registry, auto_register_schemas=False))
    registry.register("out-value", '"string"')
    with pytest.raises(eos.SchemaRegistryError, match="no such schema.*auto_register_schemas is false"):
        _serializers.resolve(http_config(registry, auto_register_schemas=False))
    _serializers.resolve(
        http_config(registry, use_latest_version=True, value_schema=None)
    )  # the "string" one
    assert read(
        http_config(registry),
        serialize(http_config(registry, use_latest_version=True, value_schema=None), pa.array(["a"])).values,
    ) == ["a"]


def test_wrong_credentials_are_a_401_that_names_the_setting_not_the_secret(registry):
    cfg = config(registry.url, schema_registry={"url": registry.url, "basic.auth.user.info": "me:wrong"})
    with pytest.raises(eos.SchemaRegistryError) as info:
        _serializers.resolve(cfg)
    assert info.value.status == 401 and "basic.auth.user.info" in str(info.value)
    assert "wrong" not in str(info.value) and "wrong" not in repr(cfg)


def test_transient_failures_are_retried_by_the_client(registry):
    registry.fail_next(2, status=503)
    _serializers.resolve(http_config(registry))
    assert [p for _, p in registry.requests] == ["/subjects/out-value/versions"] * 3


def test_a_registry_down_at_start_is_retried_until_operation_timeout_ms(registry):
    registry.stop()
    began = time.monotonic()
    with pytest.raises(
        eos.SchemaRegistryError, match="did not answer.*retried for operation_timeout_ms 1500"
    ):
        _serializers.resolve(http_config(registry, operation_timeout_ms=1500, commit_interval_ms=1000))
    assert time.monotonic() - began >= 1.5
    threading.Timer(1.0, registry.start).start()  # back within the deadline: the query starts
    _serializers.resolve(http_config(registry, operation_timeout_ms=10_000, commit_interval_ms=1000))
    assert registry.requests == [("POST", "/subjects/out-value/versions")]


def test_a_registry_down_mid_stream_stops_only_a_new_worker_and_not_as_a_bad_record(registry):
    cfg = http_config(registry)
    _serializers.resolve(cfg)
    serialize(cfg, orders(10))
    seen = len(registry.requests)
    registry.stop()
    assert len(read_back := serialize(cfg, orders(10)).values) == 10, "this worker has the schema"
    assert len(registry.requests) == seen
    _serializers.clear()  # a new Python worker
    with pytest.raises(eos.SchemaRegistryError, match="did not answer for subject 'out-value'") as info:
        serialize(cfg, orders(10))
    assert not isinstance(info.value, eos.RecordError), "the registry's fault fails the task, no dead letter"
    registry.start()
    assert read(cfg, read_back)[0] == {"id": 0, "item": "item-0"}
