"""What Spark's real-time mode (PySpark 4.2+, `trigger(realTime=...)`) takes as a Python sink, on the real
Spark and broker: the evidence behind docs/design.md "Real-time mode". A Python `ForeachWriter` is
accepted and sees one task per input partition per epoch, open(partition, epoch) ... close(None) at
the epoch boundary; a Python data source (`format("eos")`) and `mapInArrow` (eos's data path) are
refused by the mode's allowlists. Should Spark change any of that, this fails and says which.

Skipped where PySpark's `trigger` has no `realTime` (below 4.2: Spark 4.1 added the mode to the JVM,
PySpark 4.1.1's `trigger` does not take it): `make matrix` runs it on the newest Spark.
"""

from __future__ import annotations

import inspect
import os
import sys
import time
from pathlib import Path

import pyspark
import pytest
from conftest import kafka_stream
from pyspark.sql.streaming import DataStreamWriter

from eos import testing

pytestmark = pytest.mark.skipif(
    "realTime" not in inspect.signature(DataStreamWriter.trigger).parameters,
    reason=f"PySpark {pyspark.__version__}'s trigger() takes no realTime (real-time mode: 4.2+)",
)

RECORDS = 100

if not pytestmark.args[0]:
    from pyspark import cloudpickle

    # The writer below goes to Python workers that cannot import this test module: ship it by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])


class EpochWriter:
    """Writes what Spark calls, one file per task: the open, the rows' coordinates, the close."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def open(self, partition_id, epoch_id):
        self.lines = [f"open {partition_id} {epoch_id}"]
        self.name = f"p{partition_id}-e{epoch_id}-{os.getpid()}"
        return True

    def process(self, row):
        self.lines.append(f"row {row.partition} {row.offset}")

    def close(self, error):
        self.lines.append(f"close {error is None}")
        Path(self.folder, self.name).write_text("\n".join(self.lines))


def _wait(query, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and query.exception() is None:
        if len(query.recentProgress) >= 3:
            return
        time.sleep(0.5)


def test_a_python_foreach_writer_is_a_real_time_sink_with_one_task_per_partition_and_epoch(
    spark, bootstrap, names, tmp_path
):
    topic = names("rtm-in")
    testing.create_topic(bootstrap, topic, 2)
    testing.produce_sequence(bootstrap, topic, 2, RECORDS)
    seen = tmp_path / "seen"
    seen.mkdir()
    query = (
        kafka_stream(spark, bootstrap, topic)
        .writeStream.foreach(EpochWriter(str(seen)))
        .trigger(realTime="5 seconds")
        .outputMode("update")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    try:
        _wait(query, 90)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    tasks = [path.read_text().splitlines() for path in sorted(seen.iterdir())]
    opened = {tuple(int(x) for x in lines[0].split()[1:]) for lines in tasks}
    assert {(0, 0), (1, 0)} <= opened, opened  # epoch 0: one task per input partition
    for lines in tasks:
        partition, epoch = (int(x) for x in lines[0].split()[1:])
        assert lines[-1] == "close True", lines[-3:]
        offsets = [int(line.split()[2]) for line in lines[1:-1]]
        assert {int(line.split()[1]) for line in lines[1:-1]} <= {partition}  # rows of its partition only
        assert offsets == sorted(offsets)
        if epoch == 0:
            assert offsets == list(range(RECORDS)), (partition, offsets[:5], len(offsets))


@pytest.mark.parametrize("shape", ["python_data_source", "map_in_arrow"])
def test_real_time_mode_refuses_a_python_data_source_and_map_in_arrow(
    spark, bootstrap, names, tmp_path, shape
):
    from pyspark.sql.datasource import DataSource, DataSourceStreamWriter, WriterCommitMessage

    topic = names("rtm-refused")
    testing.create_topic(bootstrap, topic, 1)
    testing.produce_sequence(bootstrap, topic, 1, 10)
    source = kafka_stream(spark, bootstrap, topic)

    class Writer(DataSourceStreamWriter):
        def write(self, iterator):
            return WriterCommitMessage()

        def commit(self, messages, batchId):
            pass

        def abort(self, messages, batchId):
            pass

    class Probe(DataSource):
        @classmethod
        def name(cls):
            return "rtm_probe"

        def streamWriter(self, schema, overwrite):
            return Writer()

    if shape == "python_data_source":
        spark.dataSource.register(Probe)
        writer, expected = source.writeStream.format("rtm_probe"), "PythonTable is not in the sink allowlist"
    else:
        writer = source.mapInArrow(lambda batches: batches, source.schema).writeStream.foreach(
            EpochWriter(str(tmp_path))
        )
        expected = "MapInArrowExec is not in the operator allowlist"
    try:
        query = (
            writer.trigger(realTime="5 seconds")
            .outputMode("update")
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .start()
        )
    except Exception as exc:  # noqa: BLE001 - refused at start (the data source) ...
        message = str(exc)
    else:
        try:  # ... or when the first batch is planned (mapInArrow)
            query.awaitTermination(90)
            message = str(query.exception())
        except Exception as exc:  # noqa: BLE001 - awaitTermination raises the query's failure
            message = str(exc)
        finally:
            query.stop()
    assert "OPERATOR_OR_SINK_NOT_IN_ALLOWLIST" in message and expected in message, message[:500]


def _count(bootstrap: str, topic: str) -> int:
    records, _ = testing.read_topic(bootstrap, topic, marker=testing.write_markers(bootstrap, topic))
    return len(records)


def test_foreach_writer_in_real_time_mode_survives_driver_kills(bootstrap, names, tmp_path):
    """`foreach(eos.foreach_writer(config))` in real-time mode: the driver's process group is SIGKILLed
    twice mid-epoch (after some transactions committed), and one Python worker SIGKILLs itself between
    produce and offsets; every restart replays the epoch from Spark's checkpoint and eos skips what its
    transactions committed. The read_committed output is the input, once, in order per partition."""
    from conftest import kill_after_commits, start_pipeline

    source, output = names("rtm-in"), names("rtm-out")
    testing.create_topic(bootstrap, source, 2)
    testing.create_topic(bootstrap, output, 2)
    sent = testing.produce_sequence(bootstrap, source, 2, 3_000)
    once = tmp_path / "once"
    once.mkdir()
    commits = tmp_path / "commits.jsonl"
    env = {
        "EOS_PROCESSING_GUARANTEE": "exactly_once",
        "EOS_CRASH_AT": "after_produce",
        "EOS_CRASH_ONCE_DIR": str(once),
        "EOS_SPARK_MASTER": "local[2, 4]",  # real-time mode holds a core per input partition
    }
    flags = {"realtime": 5, "commit_every": 200, "commits": commits}
    app_id, checkpoint = names("app"), tmp_path / "ckpt"

    logs = []
    for attempt in range(3):
        summaries = tmp_path / f"run{attempt}.jsonl"
        proc = start_pipeline(bootstrap, app_id, source, output, checkpoint, summaries, env=env, **flags)
        logs.append(summaries.with_suffix(".log"))
        if attempt < 2:  # kill after a few more commits
            kill_after_commits(proc, commits, 3 + attempt * 2)
            continue
        deadline = time.monotonic() + 180  # let the last run write everything, then stop it
        while proc.running() and time.monotonic() < deadline and _count(bootstrap, output) < 6_000:
            time.sleep(2)
        assert proc.kill(), proc.log_tail()
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    result = testing.compare(testing.flatten(sent), records, hanging)
    skipped = [
        int(word.split("=")[1])
        for log in logs
        for line in log.read_text().splitlines()
        if "partition written" in line
        for word in line.split()
        if word.startswith("skipped=")
    ]
    print(
        f"real-time mode, 2 driver kills: {len(skipped)} partition epochs, skipped {sum(skipped)}: {result}"
    )
    assert result.exactly_once, result
    assert (once / "crashed-after_produce").exists(), "the worker crash point never fired"
    assert sum(skipped) > 0, "no kill landed mid-epoch: nothing was replayed"


def test_foreach_writer_commits_on_its_interval_while_rows_trickle(spark, bootstrap, names, tmp_path):
    """Real-time mode with epochs of 40 s, longer than the transaction timeout (10 s): 1,000 records at
    once (a transaction opens), then one record every 0.5 s. Before, that transaction stayed open until
    1,000 more rows or the epoch's end, so the broker aborted it and every epoch ended in
    TransactionTimeoutError, outputs waiting a whole epoch. Now commits come every commit_interval_ms (2 s)
    whatever the rows do: outputs are visible long before the first epoch ends."""
    import threading

    from confluent_kafka import Producer

    import eos

    source, output = names("rtm-in"), names("rtm-out")
    testing.create_topic(bootstrap, source, 1)
    testing.create_topic(bootstrap, output, 1)
    sent = testing.produce_sequence(bootstrap, source, 1, 1_000)
    trickled: list[bytes] = []

    def trickle() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        for seq in range(1_000, 1_040):
            value = testing.seq_value(source, 0, seq)
            producer.produce(source, value, b"k", partition=0)
            producer.flush(10)
            trickled.append(value)
            time.sleep(0.5)

    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=output,
        processing_guarantee="exactly_once",
        transaction_timeout_ms=10_000,
        commit_interval_ms=2_000,
    )
    df = eos.read_stream(spark, config, [source])
    query = (
        df.writeStream.foreach(eos.foreach_writer(config))
        .outputMode("update")
        .trigger(realTime="40 seconds")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    producer = threading.Thread(target=trickle, daemon=True)
    started = time.monotonic()
    producer.start()
    try:
        time.sleep(15)  # well inside the first epoch
        visible = _count(bootstrap, output)
        assert query.exception() is None, query.exception()
        assert visible >= 1_000 + 10, f"{visible} outputs visible 15 s into a 40 s epoch"
        producer.join(60)
        deadline = time.monotonic() + 60
        while _count(bootstrap, output) < 1_040 and time.monotonic() < deadline and query.exception() is None:
            time.sleep(1)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    sent[0].extend(trickled)
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    print(
        f"trickle: {visible} outputs visible at 15 s;"
        f" all {result.received} after {time.monotonic() - started:.0f}s"
    )
    assert result.exactly_once, result
