"""Avro values through a Confluent Schema Registry, exactly once.

Make the `value` column a struct with the schema's fields and name the serializer: eos registers the
schema under `<output topic>-value` before any transaction (a schema the registry refuses fails the
query with nothing written) and writes each value Confluent-framed (magic byte, schema id, Avro), with
confluent-kafka's own serializer, inside the transaction. A value that does not fit the schema is a bad
record (`SerializationError`; see dead_letters.py to route it to a dead-letter topic).
Needs `pip install 'eos-spark[schema-registry]'`.

    python examples/avro_registry.py --bootstrap localhost:9092 --registry-url http://localhost:8081

creates the topics, writes 10 sample orders per partition (`--sample 0` uses the topics as they are),
writes them as Avro `shop.Order` records and stops.
"""

from __future__ import annotations

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.sql import functions as F

import eos
from eos import testing

ORDER = """{"type": "record", "name": "Order", "namespace": "shop",
            "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}]}"""


def main(spark, bootstrap, input_topic, output_topic, checkpoint, app_id, registry_url):
    """Write what `input_topic` holds now to `output_topic` as Avro Orders; returns the finished query."""
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=app_id,
        output_topic=output_topic,
        processing_guarantee="exactly_once",
        value_serializer="avro",  # or "json_schema", "protobuf"; key_serializer for the key
        value_schema=ORDER,
        schema_registry={"url": registry_url},  # and "basic.auth.user.info", "ssl.*", ... as needed
    )
    df = eos.read_stream(spark, config, [input_topic])
    order = F.struct(F.col("offset").alias("id"), F.col("value").cast("string").alias("item"))
    query = (
        df.withColumn("value", order)
        .writeStream.foreachBatch(eos.sink(config))
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return query


if __name__ == "__main__":
    from _cli import parse, seed  # examples/_cli.py: the command line the examples share

    args = parse(
        __doc__,
        "avro",
        "example-orders-avro",
        more=lambda p: p.add_argument("--registry-url", default="http://127.0.0.1:8081"),
    )
    seed(args)
    spark = eos.spark_session("example-avro")
    main(spark, args.bootstrap, args.input, args.output, args.checkpoint, args.app_id, args.registry_url)
    records, _ = testing.read_topic(args.bootstrap, args.output)  # read_committed
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": args.registry_url}))
    last = deserialize(records[-1].value, SerializationContext(args.output, MessageField.VALUE))
    print(f"{args.output}: {len(records)} committed records, e.g. {last}")
    spark.stop()
