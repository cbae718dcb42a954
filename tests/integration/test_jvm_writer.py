"""The JVM writer (eos/_spark/jvm/PassThrough.java) on the real broker and real Spark: output equal to
the input read back read_committed, a batch re-run on the same checkpoint skipped by the committed
offsets, the stamp the Python path reads as its own, and a foreign offset refused."""

from __future__ import annotations

import shutil

import pytest
from confluent_kafka import Consumer, TopicPartition

import eos
from eos import testing
from eos._core._arrow import Layout
from eos._kafka import _offsets
from eos._spark import _jvm_writer

PARTITIONS = 4
PER_PARTITION = 2_000


@pytest.fixture
def seeded(bootstrap, names):
    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, PARTITIONS)
    testing.create_topic(bootstrap, output, PARTITIONS)
    return source, output, testing.produce_sequence(bootstrap, source, PARTITIONS, PER_PARTITION)


def _run(spark, config, source, checkpoint, stats, before_start=lambda: None):
    if not _jvm_writer.available(spark):
        pytest.skip("the JVM writer needs eos's jar (make setup)")
    layout = Layout(value="value", key="key")

    def each_batch(df, batch_id):
        selected = df.select("key", "value", "topic", "partition", "offset")
        stats.append(_jvm_writer.write(selected, config, batch_id, layout))

    df = eos.read_stream(spark, config, [source], maxOffsetsPerTrigger=3_000)
    before_start()
    query = (
        df.writeStream.foreachBatch(each_batch)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def test_output_equals_input_and_a_rerun_batch_writes_nothing_twice(
    spark, bootstrap, names, seeded, tmp_path
):
    source, output, sent = seeded
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=output,
        processing_guarantee="exactly_once",
        commit_every=500,
    )
    checkpoint, stats = tmp_path / "ckpt", []
    _run(spark, config, source, checkpoint, stats)
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    assert result.exactly_once and result.missing == 0, result
    rows = [row for batch in stats for row in batch]
    assert sum(r["records_out"] for r in rows) == PARTITIONS * PER_PARTITION
    assert all(r["transactions"] >= 1 for r in rows if r["records_out"])
    entries = _offsets.committed_entries(config, [(source, p) for p in range(PARTITIONS)])
    for p in range(PARTITIONS):
        offset, metadata = entries[(source, p)].offset, entries[(source, p)].metadata
        assert offset == PER_PARTITION and _offsets.is_own(config, metadata), (offset, metadata)
        assert f";w={output}:" in metadata, metadata  # the witnesses of its last transaction

    # the last batch's commit log entry lost, as after a driver crash that followed the write
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    rerun = []
    _run(spark, config, source, checkpoint, rerun)
    rows = [row for batch in rerun for row in batch]
    assert rows and all(r["skipped"] == r["records_in"] > 0 and r["records_out"] == 0 for r in rows), rows
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    assert result.exactly_once and result.missing == 0, result


def test_an_offset_another_app_committed_is_refused(spark, bootstrap, names, seeded, tmp_path):
    source, output, _ = seeded
    app = names("app")
    config = eos.Config(
        bootstrap_servers=bootstrap, app_id=app, output_topic=output, processing_guarantee="exactly_once"
    )

    def intrude():  # after eos.read_stream's own check: the writer's is the one that must refuse it
        intruder = Consumer({"bootstrap.servers": bootstrap, "group.id": app})  # no eos stamp
        intruder.commit(offsets=[TopicPartition(source, 0, 10)], asynchronous=False)
        intruder.close()

    with pytest.raises(Exception, match=f"eos.errors.ForeignOffsetError: input partition {source}/0"):
        _run(spark, config, source, tmp_path / "ckpt", [], intrude)
    records, _ = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert not [r for r in records if testing.parse_value(r.value)[1] == 0]
    shutil.rmtree(tmp_path / "ckpt", ignore_errors=True)
