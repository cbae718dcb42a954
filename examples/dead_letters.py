"""Bad records to a dead-letter topic, beside the good ones, exactly once: `on_error="dead_letter"`.

`to_text` turns each order into upper-case text; a value that is not UTF-8 makes it raise. By default
that record would stop the query, at every restart. With a dead-letter topic eos writes the record there
instead, in the same transaction as the other records' outputs and the input offset, with headers
naming the error and the input record (`__eos.errors.*`).

    python examples/dead_letters.py --bootstrap localhost:9092

creates the topics, writes 10 sample orders per partition and one that is not UTF-8 (`--sample 0` uses
the topics as they are), writes what the input holds and stops. `eos dlq show --topic TOPIC` groups the
dead letters by error; `eos dlq replay` copies them back once the code is fixed.
"""

from __future__ import annotations

from confluent_kafka import Producer

import eos
from eos import testing


def to_text(row, state):
    """The order as upper-case text; UnicodeDecodeError on bytes that are not UTF-8: a bad record."""
    return eos.Output(value=row.value.decode("utf-8").upper(), key=row.key)


def main(spark, bootstrap, input_topic, output_topic, checkpoint, app_id, dead_letter_topic):
    """Write what `input_topic` holds now to `output_topic`, its bad records to `dead_letter_topic`;
    returns the finished query."""
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=app_id,
        output_topic=output_topic,
        processing_guarantee="exactly_once",
        on_error="dead_letter",
        dead_letter_topic=dead_letter_topic,  # it must exist
        max_dead_letters_per_batch=100,  # more bad records than this in an input partition's batch fail it
    )
    query = (
        eos.read_stream(spark, config, [input_topic])
        .writeStream.foreachBatch(eos.sink(config, process=to_text))
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
        "dead-letters",
        "example-orders-text",
        input_topic="example-raw-orders",
        more=lambda p: p.add_argument("--dead-letters", default="example-orders-dlq"),
    )
    seed(args, [(args.dead_letters, 1)])
    if args.sample:
        producer = Producer({"bootstrap.servers": args.bootstrap})
        producer.produce(args.input, b"\xff\xfe not UTF-8", key=b"k1", partition=0)
        producer.flush(30)
    spark = eos.spark_session("example-dead-letters")
    main(spark, args.bootstrap, args.input, args.output, args.checkpoint, args.app_id, args.dead_letters)
    records, _ = testing.read_topic(args.bootstrap, args.output)  # read_committed
    letters, _ = testing.read_topic(args.bootstrap, args.dead_letters)
    print(
        f"{args.output}: {len(records)} committed records; {args.dead_letters}: {len(letters)} dead letters"
    )
    for letter in letters[-3:]:
        headers = dict(letter.headers)
        print(f"  {letter.value!r}: {headers['__eos.errors.message'].decode()}")
    spark.stop()
