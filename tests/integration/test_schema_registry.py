"""Schema Registry serialization for real: a Kafka-sourced stream whose value is a struct column, written
as Confluent-framed Avro through the registry's HTTP API (the loopback stand-in of tests/support), records
that do not fit the schema dead-lettered in the same transactions; read back read_committed with
confluent-kafka's Avro deserializer."""

from __future__ import annotations

import json
from collections import Counter

from pyspark.sql import functions as F

import eos
from eos import testing
from tests.integration.conftest import write_available
from tests.support.registry import Registry, read_avro_output

PARTITIONS, PER_PARTITION = 2, 1_500
ORDER = (
    '{"type": "record", "name": "Order", "namespace": "shop", "fields": ['
    '{"name": "id", "type": "long"}, {"name": "item", "type": "string"}]}'
)


def test_a_struct_column_is_written_as_registered_avro_and_misfits_are_dead_lettered_exactly_once(
    spark, bootstrap, names, checkpoint_dir
):
    source, output, dead_letters = names("in"), names("out"), names("dlq")
    testing.create_topic(bootstrap, source, PARTITIONS)
    testing.create_topic(bootstrap, output, PARTITIONS)
    testing.create_topic(bootstrap, dead_letters, 1)
    sent = testing.produce_sequence(bootstrap, source, PARTITIONS, PER_PARTITION)
    bad = {(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION) if o % 500 == 7}
    with Registry(users={"spark": "s3cret"}) as registry:
        settings = {"url": registry.url, "basic.auth.user.info": "spark:s3cret"}
        config = eos.Config(
            bootstrap_servers=bootstrap,
            app_id=names("app"),
            output_topic=output,
            processing_guarantee="exactly_once",
            commit_every=500,
            value_serializer="avro",
            value_schema=ORDER,
            schema_registry=settings,
            on_error="dead_letter",
            dead_letter_topic=dead_letters,
        )
        df = eos.read_stream(spark, config, [source], maxOffsetsPerTrigger=1_000)
        # item is null at every 500th offset + 7: not a string, so the record does not fit the schema
        item = F.when(F.col("offset") % 500 == 7, F.lit(None)).otherwise(F.col("value").cast("string"))
        df = df.withColumn("value", F.struct(F.col("offset").alias("id"), item.alias("item")))
        write_available(df, eos.sink(config), checkpoint_dir)

        records, decoded, hanging = read_avro_output(bootstrap, output, settings)
        requests = Counter(registry.requests)

    good = [v for p, values in sent.items() for o, v in enumerate(values) if (p, o) not in bad]
    result = testing.compare(good, decoded, hanging)
    assert result.exactly_once, result  # nothing missing, nothing twice, order kept per input partition
    assert all(r.value[0] == 0 for r in records if r.value), "Confluent framing: magic byte 0"

    _assert_dead_letters(bootstrap, dead_letters, bad)

    assert requests[("POST", f"/subjects/{output}-value/versions")] == 1, "registered once, on the driver"
    lookups = requests[("POST", f"/subjects/{output}-value")]
    assert lookups <= 4, f"{lookups} lookups for {PARTITIONS * PER_PARTITION} records: one per Python worker"


def test_format_eos_takes_the_serializer_and_registry_as_options(spark, bootstrap, names, checkpoint_dir):
    """The same through `writeStream.format("eos")`: serializer, schema, registry URL and credentials as
    `eos.*` options, misfits dead-lettered; the credentials appear in no progress report."""
    source, output, dead_letters = names("in"), names("out"), names("dlq")
    testing.create_topic(bootstrap, source, PARTITIONS)
    testing.create_topic(bootstrap, output, PARTITIONS)
    testing.create_topic(bootstrap, dead_letters, 1)
    sent = testing.produce_sequence(bootstrap, source, PARTITIONS, 300)
    bad = {(p, o) for p in range(PARTITIONS) for o in range(300) if o % 500 == 7}
    with Registry(users={"spark": "s3cret"}) as registry:
        reader = eos.Config(bootstrap_servers=bootstrap, app_id=names("app"), output_topic=output)
        df = eos.read_stream(spark, reader, [source])
        item = F.when(F.col("offset") % 500 == 7, F.lit(None)).otherwise(F.col("value").cast("string"))
        df = df.withColumn("value", F.struct(F.col("offset").alias("id"), item.alias("item")))
        options = {
            "kafka.bootstrap.servers": bootstrap,
            "topic": output,
            "eos.app.id": reader.app_id,
            "eos.processing.guarantee": "exactly_once",
            "eos.value.serializer": "io.confluent.kafka.serializers.KafkaAvroSerializer",
            "eos.value.schema": ORDER,
            "eos.schema.registry.url": registry.url,
            "eos.schema.registry.basic.auth.user.info": "spark:s3cret",
            "eos.on.error": "dead_letter",
            "eos.dead.letter.topic": dead_letters,
        }
        query = (
            df.writeStream.format("eos")
            .options(**options)
            .option("checkpointLocation", str(checkpoint_dir))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        progress = "\n".join(p.json for p in query.recentProgress)
        settings = {"url": registry.url, "basic.auth.user.info": "spark:s3cret"}
        records, decoded, hanging = read_avro_output(bootstrap, output, settings)

    good = [v for p, values in sent.items() for o, v in enumerate(values) if (p, o) not in bad]
    result = testing.compare(good, decoded, hanging)
    assert result.exactly_once, result
    _assert_dead_letters(bootstrap, dead_letters, bad)
    assert '"sink"' in progress and "s3cret" not in progress, "a registry credential in a progress report"


def _assert_dead_letters(bootstrap, dead_letters, bad):
    """The dead letters are the records of `bad` (input partition, offset), each once, as JSON with the
    null item that did not fit."""
    letters, hanging = testing.read_topic(
        bootstrap, dead_letters, marker=testing.write_markers(bootstrap, dead_letters)
    )
    assert not hanging
    letters = [r for r in letters if dict(r.headers).get("__eos.errors.kind")]
    by_input = Counter(
        (dict(r.headers)["__eos.errors.partition"], dict(r.headers)["__eos.errors.offset"]) for r in letters
    )
    assert by_input == Counter((str(p).encode(), str(o).encode()) for p, o in bad), "each once"
    assert {dict(r.headers)["__eos.errors.kind"] for r in letters} == {b"SerializationError"}
    assert sorted(json.loads(r.value)["id"] for r in letters) == sorted(o for _, o in bad)
    assert {json.loads(r.value)["item"] for r in letters} == {None}, "the value that did not fit, as JSON"
