"""on_error="dead_letter" with `process_batch` for real (real broker, real Spark): an output refused by
librdkafka or the broker carries no row of its own (it is an output of the call), so the dead letter
must still name the row that returned it, and every other row's output must reach the output topic
once (issue 39, point 2)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from conftest import run_query

import eos
from eos import testing

ROWS = 10
BAD = 2
#: the output topic takes at most 1,000 bytes a record: librdkafka sends 2,000 bytes, and the broker
#: refuses the whole record batch they travel in
SMALL_RECORDS = {"max.message.bytes": "1000"}
#: by case: the output topic's config, what the bad row returns, and the rows of each Arrow batch (so of
#: each process_batch call; "broker_calls": 0-3, 4-7, 8-9, whose outputs the broker refuses together)
CASES = {
    "too_large": ({}, {"value": b"x" * (2 * 1024 * 1024)}, None),  # MSG_SIZE_TOO_LARGE, by librdkafka
    "no_such_partition": ({}, {"partition": 99}, None),  # the output topic has one partition
    "broker": (SMALL_RECORDS, {"value": b"y" * 2_000}, None),
    "broker_calls": (SMALL_RECORDS, {"value": b"y" * 2_000}, 4),
}
ARROW_ROWS = "spark.sql.execution.arrow.maxRecordsPerBatch"


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_refused_output_of_process_batch_dead_letters_its_own_row_only(
    spark, bootstrap, names, tmp_path, case
):
    """One input partition, offsets 0-9; process_batch returns each row's key and value, except that row
    2's output is refused. Read read_committed: the outputs of rows 0, 1, 3-9, each once, in order; one
    dead letter, naming row 2 and carrying its input value."""
    topic_config, bad, arrow_rows = CASES[case]
    source, output, dead_letters = names("in"), names("out"), names("dlq")
    testing.create_topic(bootstrap, source, 1)
    testing.create_topic(bootstrap, output, 1, config=topic_config or None)
    testing.create_topic(bootstrap, dead_letters, 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(ROWS):
        producer.produce(source, b"v%d" % i, b"k%d" % i, partition=0)
    assert producer.flush(30) == 0

    def outputs(batch, state):
        values, partitions = [], []
        for offset, value in zip(
            batch.column("offset").to_pylist(), batch.column("value").to_pylist(), strict=True
        ):
            values.append(bad.get("value", value) if offset == BAD else value)
            partitions.append(bad.get("partition", 0) if offset == BAD else 0)
        columns = {"value": pa.array(values, pa.binary()), "key": batch.column("key")}
        if "partition" in bad:
            columns["partition"] = pa.array(partitions, pa.int32())
        return pa.RecordBatch.from_pydict(columns)

    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=output,
        processing_guarantee="exactly_once",
        on_error="dead_letter",
        dead_letter_topic=dead_letters,
    )
    sink = eos.sink(config, process_batch=outputs)
    if arrow_rows is None:
        run_query(spark, config, [source], tmp_path / "ckpt", sink=sink)
    else:
        before = spark.conf.get(ARROW_ROWS)
        spark.conf.set(ARROW_ROWS, str(arrow_rows))
        try:
            run_query(spark, config, [source], tmp_path / "ckpt", sink=sink)
        finally:
            spark.conf.set(ARROW_ROWS, before)

    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    good = [i for i in range(ROWS) if i != BAD]
    assert ([(r.key, r.value) for r in records], hanging) == ([(b"k%d" % i, b"v%d" % i) for i in good], [])
    letters, hanging = testing.read_topic(
        bootstrap, dead_letters, marker=testing.write_markers(bootstrap, dead_letters)
    )
    named = [dict(letter.headers)["__eos.errors.offset"] for letter in letters]
    assert (named, hanging) == ([str(BAD).encode()], []), "one dead letter, for the bad row only"
    (letter,) = letters
    headers = dict(letter.headers)
    assert (letter.key, letter.value) == (b"k%d" % BAD, b"v%d" % BAD)
    assert (headers["__eos.errors.topic"], headers["__eos.errors.partition"]) == (source.encode(), b"0")
    assert headers["__eos.errors.exception"] == b"eos.errors.ProduceError", headers
