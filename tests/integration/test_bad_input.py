"""Bad input gets a clear error naming the field or the record, and nothing committed changes."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from conftest import error_text, group_offsets
from pyspark.sql import functions as F

import eos
from eos import testing
from examples.pipeline import count_per_key

RECORDS = 200
BAD_OFFSET = 150


def _batch(spark, bootstrap, topic, start, end):
    """A static DataFrame of the Kafka source's rows [start, end) of partition 0, as foreachBatch gets."""
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", "read_committed")
        .option("startingOffsets", json.dumps({topic: {"0": start}}))
        .option("endingOffsets", json.dumps({topic: {"0": end}}))
        .load()
    )


@pytest.fixture
def committed_half(spark, bootstrap, names):
    """Input of 200 records; the first 100 already written and committed by a good batch."""
    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, 1)
    testing.create_topic(bootstrap, output, 1)
    testing.produce_sequence(bootstrap, source, 1, RECORDS)
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=output,
        processing_guarantee="exactly_once",
    )
    eos.sink(config)(_batch(spark, bootstrap, source, 0, 100), 0)
    before = _snapshot(bootstrap, config, source, output)
    assert len(before[0]) == 100 and before[1] == {0: 100}
    return config, source, output, before


def _snapshot(bootstrap, config, source, output):
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert hanging == []
    return [r.value for r in records], group_offsets(config, source, 1)


def _fails_naming_record(spark, bootstrap, committed_half, sink, *expected_text):
    config, source, output, before = committed_half
    with pytest.raises(Exception) as excinfo:
        sink(_batch(spark, bootstrap, source, 100, RECORDS), 1)
    message = error_text(excinfo.value)
    for text in (f"{source}/0@{BAD_OFFSET}", "transaction aborted", *expected_text):
        assert text in message, message[-3000:]
    assert _snapshot(bootstrap, config, source, output) == before


def test_process_raising_aborts_and_names_the_record(spark, bootstrap, committed_half):
    config = committed_half[0]

    def process(row, state):
        if row.offset == BAD_OFFSET:
            raise ValueError("cannot enrich this order")
        return eos.Output(row.value, row.key)

    _fails_naming_record(
        spark,
        bootstrap,
        committed_half,
        eos.sink(config, process),
        "ProcessError",
        "cannot enrich this order",
    )


def test_record_too_large_aborts_and_names_the_record(spark, bootstrap, committed_half):
    config = committed_half[0]

    def process(row, state):
        return eos.Output(b"x" * 2_000_000 if row.offset == BAD_OFFSET else row.value)

    _fails_naming_record(
        spark, bootstrap, committed_half, eos.sink(config, process), "ProduceError", "too large"
    )


def test_missing_output_topic_from_column_aborts_and_names_the_record(
    spark, bootstrap, committed_half, names
):
    config, source, output, _ = committed_half
    by_column = eos.Config(  # the same output_topic (the offsets' stamp), records routed by a column
        bootstrap_servers=bootstrap,
        app_id=config.app_id,
        output_topic=output,
        output_topic_column="target",
        processing_guarantee="exactly_once",
    )
    missing = names("no-such-topic")

    class Routed:
        """A sink over rows whose `target` column names a missing topic at BAD_OFFSET."""

        def __call__(self, df, batch_id):
            target = F.when(F.col("offset") == BAD_OFFSET, F.lit(missing)).otherwise(F.lit(output))
            eos.sink(by_column)(df.withColumn("target", target), batch_id)

    _fails_naming_record(spark, bootstrap, committed_half, Routed(), "ProduceError", missing)
    # The session broker creates topics on a client's metadata request (auto.create.topics.enable=true,
    # Apache's default): eos must not have asked for one.
    assert missing not in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics


def test_missing_configured_output_topic_fails_before_any_transaction(
    spark, bootstrap, committed_half, names
):
    config, source, output, before = committed_half
    missing = names("no-such-topic")
    sink = eos.sink(
        eos.Config(
            bootstrap_servers=bootstrap,
            app_id=config.app_id,
            output_topic=missing,
            processing_guarantee="exactly_once",
        )
    )
    with pytest.raises(eos.TopicNotFoundError, match=missing):
        sink(_batch(spark, bootstrap, source, 100, RECORDS), 1)
    assert _snapshot(bootstrap, config, source, output) == before


@pytest.mark.parametrize("drop", ["topic", "partition", "offset", "value"])
def test_batch_without_required_column_fails_before_any_transaction(spark, bootstrap, committed_half, drop):
    config, source, output, before = committed_half
    with pytest.raises(eos.BatchSchemaError, match=f"'{drop}'"):
        eos.sink(config)(_batch(spark, bootstrap, source, 100, RECORDS).drop(drop), 1)
    assert _snapshot(bootstrap, config, source, output) == before


def test_value_of_wrong_type_fails_before_any_transaction(spark, bootstrap, committed_half):
    config, source, output, before = committed_half
    df = _batch(spark, bootstrap, source, 100, RECORDS).withColumn("value", F.col("offset"))
    with pytest.raises(eos.BatchSchemaError, match="'value' has type bigint"):
        eos.sink(config)(df, 1)
    assert _snapshot(bootstrap, config, source, output) == before


@pytest.mark.timeout(120)
def test_unreachable_broker_is_an_error_not_a_hang(spark, bootstrap, committed_half):
    from eos.session import free_port

    config, source, output, before = committed_half
    nowhere = eos.Config(
        bootstrap_servers=f"127.0.0.1:{free_port()}",
        app_id=config.app_id,
        output_topic=output,
        processing_guarantee="exactly_once",
        operation_timeout_ms=3_000,
    )
    with pytest.raises(eos.BrokerUnreachableError, match="no Kafka broker"):
        eos.read_stream(spark, nowhere, [source])
    with pytest.raises(eos.BrokerUnreachableError, match="no Kafka broker"):
        eos.sink(nowhere)(_batch(spark, bootstrap, source, 100, RECORDS), 1)
    assert _snapshot(bootstrap, config, source, output) == before


# -- bad input that escaped as raw errors (issue 23, hole 10) ---------------------------------------------


@pytest.mark.parametrize(
    ("output", "named"),
    [
        ({"partition": "3"}, "output field 'partition' must be an int >= 0"),
        # `make chaos`: the same check on another field
        pytest.param(
            {"topic": 123},
            "output field 'topic' must be a topic name (str) or None, not 123",
            marks=pytest.mark.long,
        ),
    ],
)
def test_an_output_routed_by_a_mistyped_field_names_the_field_and_the_record(
    spark, bootstrap, committed_half, output, named
):
    """Before, confluent-kafka's produce() raised a bare TypeError that named neither."""
    config = committed_half[0]

    def process(row, state):
        return eos.Output(row.value, row.key, **(output if row.offset == BAD_OFFSET else {}))

    _fails_naming_record(spark, bootstrap, committed_half, eos.sink(config, process), "ProcessError", named)


def test_a_record_without_a_key_in_a_keyed_store_says_what_to_do(spark, bootstrap, names):
    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, 1)
    testing.create_topic(bootstrap, output, 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        producer.produce(source, b"v%d" % i, None if i == 3 else b"k", partition=0)
    assert producer.flush(30) == 0
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=output,
        processing_guarantee="exactly_once",
    )

    def count(row, state):
        counts = state.store("counts")
        counts.put(row.key, counts.get(row.key, 0) + 1)
        return eos.Output(row.value, row.key)

    with pytest.raises(Exception) as info:
        eos.sink(config, count, {"counts": "json"})(_batch(spark, bootstrap, source, 0, 5), 0)
    message = str(info.value)
    assert "ProcessError" in message and f"{source}/0@3" in message, message[-2000:]
    assert "a key cannot be None" in message and "skip it" in message, message[-2000:]


@pytest.mark.parametrize("store", ["sqlite", "rocksdb"])
def test_a_damaged_store_file_is_restored_from_the_changelog(spark, bootstrap, names, tmp_path, store):
    """Before, a damaged store (SQLite's "file is not a database", RocksDB's "Corruption") failed every
    attempt of the task. (What the log says is checked in tests/unit/test_recovery_decisions.py: worker
    logs do not reach pytest.)"""
    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, 1)
    testing.create_topic(bootstrap, output, 1)
    sent = testing.produce_sequence(bootstrap, source, 1, 200)
    app_id = names("app")
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=app_id,
        output_topic=output,
        processing_guarantee="exactly_once",
        state_dir=str(tmp_path / "state"),
        state_store=store,
    )
    sink = eos.sink(config, count_per_key, {"counts": "json"})
    sink(_batch(spark, bootstrap, source, 0, 100), 0)
    # A disk or a copy gone wrong: SQLite's header and first page, RocksDB's manifest (its file list)
    directory = tmp_path / "state" / app_id / f"{source}-0"
    if store == "sqlite":
        with open(directory / "counts.sqlite", "r+b") as f:
            f.write(b"\xde\xad" * 2048)
    else:
        (manifest,) = (directory / "counts.rocksdb").glob("MANIFEST-*")
        manifest.write_bytes(b"\xde\xad" * 2048)
    sink(_batch(spark, bootstrap, source, 100, 200), 1)

    assert sink.last.restored > 0
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    result = testing.compare(
        testing.flatten(sent), records, hanging, running_counts=testing.expected_running_counts(sent)
    )
    assert result.exactly_once and result.state_mismatches == 0, result
