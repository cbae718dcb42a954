"""Output record timestamps: `output_timestamp_column` (the Kafka source's `timestamp` carries each input
record's time to its outputs), `Output.timestamp`, a `process_batch` output's `timestamp` column; read
back from the output topic by a read_committed consumer, beside the exactly-once comparison."""

from __future__ import annotations

import time

import attrs
import pyarrow as pa
from confluent_kafka import Producer
from conftest import group_offsets, run_query

import eos
from eos import testing

PARTITIONS = 2
PER_PARTITION = 30
HOUR_MS = 3_600_000


def _seed(bootstrap, names, future_at: int | None = None):
    """Input records each with its own create time, an hour ago plus seq seconds (partition 0's record
    `future_at` two days ahead); returns (source, output, sent, time of each value)."""
    source, output = names("ts-in"), names("ts-out")
    testing.create_topic(bootstrap, source, PARTITIONS, {"message.timestamp.after.max.ms": str(2**63 - 1)})
    # the output refuses a create time more than an hour ahead, as a broker may (KIP-937)
    testing.create_topic(bootstrap, output, PARTITIONS, {"message.timestamp.after.max.ms": str(HOUR_MS)})
    base = int(time.time() * 1000) - HOUR_MS
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    times: dict[bytes, int] = {}
    for seq in range(PER_PARTITION):
        for p in range(PARTITIONS):
            value = testing.seq_value(source, p, seq)
            at = base + seq * 1000 + p
            if p == 0 and seq == future_at:
                at = base + 50 * HOUR_MS
            producer.produce(source, value, key=b"k%d" % seq, partition=p, timestamp=at)
            sent[p].append(value)
            times[value] = at
    assert producer.flush(30) == 0
    return source, output, sent, times


def _config(bootstrap, names, output, **kw) -> eos.Config:
    return eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("ts-app"),
        output_topic=output,
        processing_guarantee="exactly_once",
        **kw,
    )


def _read(bootstrap, output, sent):
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert hanging == []
    result = testing.compare(testing.flatten(sent), records)
    assert result.exactly_once, result
    return records


def test_the_input_records_timestamp_reaches_its_outputs(spark, bootstrap, names, tmp_path):
    """Pass-through rows with output_timestamp_column="timestamp" (the whole-column produce path is
    off for them): each output has its input record's create time, not the producer's clock."""
    source, output, sent, times = _seed(bootstrap, names)
    config = _config(bootstrap, names, output, output_timestamp_column="timestamp")
    run_query(spark, config, [source], tmp_path / "ckpt")
    records = _read(bootstrap, output, sent)
    assert [r.timestamp for r in records] == [times[r.value] for r in records]


def test_process_outputs_take_their_own_timestamp_or_their_rows(spark, bootstrap, names, tmp_path):
    """`process`: an Output with a timestamp keeps it; one without takes the row's column; a second
    query without the setting gets the producer's clock."""
    source, output, sent, times = _seed(bootstrap, names)

    def stamp(row, state):
        if row.offset % 2:
            return eos.Output(row.value, key=row.key, timestamp=row.timestamp)  # a naive local datetime
        return eos.Output(row.value, key=row.key)

    config = _config(bootstrap, names, output, output_timestamp_column="timestamp")
    run_query(spark, config, [source], tmp_path / "ckpt", process=stamp)
    records = _read(bootstrap, output, sent)
    assert [r.timestamp for r in records] == [times[r.value] for r in records]

    started = int(time.time() * 1000)
    plain = eos.Config(bootstrap_servers=bootstrap, app_id=names("ts-clock"), output_topic=names("ts-plain"))
    testing.create_topic(bootstrap, plain.output_topic, PARTITIONS)
    run_query(spark, plain, [source], tmp_path / "ckpt2", process=lambda row, state: eos.Output(row.value))
    clock, _ = testing.read_topic(bootstrap, plain.output_topic)
    assert len(clock) == PARTITIONS * PER_PARTITION
    assert all(r.timestamp >= started for r in clock)


def test_process_batch_returns_a_timestamp_column(spark, bootstrap, names, tmp_path):
    source, output, sent, times = _seed(bootstrap, names)

    def upper(batch, state):
        return pa.RecordBatch.from_arrays(
            [batch.column("value"), batch.column("timestamp")], ["value", "timestamp"]
        )

    config = _config(bootstrap, names, output)
    sink = eos.sink(config, process_batch=upper)
    run_query(spark, config, [source], tmp_path / "ckpt", sink=sink)
    records = _read(bootstrap, output, sent)
    assert [r.timestamp for r in records] == [times[r.value] for r in records]


def test_a_timestamp_the_output_topic_refuses_is_named_and_can_be_a_dead_letter(
    spark, bootstrap, names, tmp_path
):
    """One input record two days ahead, beside good ones, on an output topic that refuses a create time
    more than an hour ahead: the query fails naming that record and nothing is visible; with dead
    letters on, it alone is the dead letter and every other output lands once, with its time."""
    future = 7
    source, output, sent, times = _seed(bootstrap, names, future_at=future)
    config = _config(bootstrap, names, output, output_timestamp_column="timestamp")
    try:
        run_query(spark, config, [source], tmp_path / "ckpt")
    except Exception as exc:  # noqa: BLE001 - Spark wraps it: the message is what matters
        message = str(exc)
    else:
        raise AssertionError("the refused timestamp did not fail the query")
    assert f"input record {source}/0@{future}" in message, message[-3000:]
    assert "timestamp" in message.lower(), message[-3000:]
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert hanging == []
    assert not [r for r in records if testing.parse_value(r.value)[1] == 0]  # input partition 0's
    assert group_offsets(config, source, PARTITIONS)[0] in (None, 0)

    dlq = names("ts-dlq")
    testing.create_topic(bootstrap, dlq, 1)
    dead_config = attrs.evolve(config, on_error="dead_letter", dead_letter_topic=dlq)
    run_query(spark, dead_config, [source], tmp_path / "ckpt-dlq")
    expected = {p: [v for v in values if v != sent[0][future]] for p, values in sent.items()}
    records = _read(bootstrap, output, expected)
    assert [r.timestamp for r in records] == [times[r.value] for r in records]
    dead, _ = testing.read_topic(bootstrap, dlq, marker=testing.write_markers(bootstrap, dlq))
    assert [r.key for r in dead] == [b"k%d" % future], dead
    assert group_offsets(dead_config, source, PARTITIONS) == {0: PER_PARTITION, 1: PER_PARTITION}
