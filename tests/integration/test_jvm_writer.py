"""The JVM data path (`data_path`, eos/_spark/jvm) through `eos.sink` on the real broker and real Spark:
output equal to the input read back read_committed, a batch re-run on the same checkpoint skipped by the
committed offsets, the stamps the Python path reads as its own (and the other way round: a query that
changes path between runs stays exactly once), what keeps a query on the Python path, and the JVM
writer's refusals raised as the Python path's own errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from functools import partial

import pytest
from confluent_kafka import Producer
from conftest import commit_foreign_offset, seed_one_big, write_available

import eos
from eos import testing
from eos._kafka import _offsets, _witness
from eos._spark import _jvm_writer
from eos.errors import ConfigError
from examples.pipeline import append_summary
from tests.support.deadletters import letters_by_input
from tests.support.summaries import read_summaries

PARTITIONS = 4
PER_PARTITION = 2_000


@pytest.fixture
def seeded(bootstrap, names):
    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, PARTITIONS)
    testing.create_topic(bootstrap, output, PARTITIONS)
    return source, output, testing.produce_sequence(bootstrap, source, PARTITIONS, PER_PARTITION)


@pytest.fixture(autouse=True)
def jar(request):
    # the classic session's (asked here, after conftest's pyspark_api_mode): a Connect server that lacks
    # eos's plugin though the jar is here fails its tests rather than skip them
    if not _jvm_writer.available(request.getfixturevalue("spark")):
        pytest.skip("the JVM writer needs eos's jar (make setup)")


def _config(bootstrap, app, output, **more):
    settings = dict(processing_guarantee="exactly_once", commit_every=500, data_path="jvm")
    return eos.Config(bootstrap_servers=bootstrap, app_id=app, output_topic=output, **{**settings, **more})


def _run(spark, config, source, checkpoint, before_start=lambda: None, per_trigger=3_000, **sink):
    summaries = []
    options = {} if per_trigger is None else {"maxOffsetsPerTrigger": per_trigger}
    df = eos.read_stream(spark, config, [source], **options)
    before_start()
    query = (
        df.writeStream.foreachBatch(eos.sink(config, on_batch=summaries.append, **sink))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return summaries


def _cli(bootstrap, *args: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EOS_") or k == "EOS_CACHE"}
    run = [sys.executable, "-m", "eos.cli", "--bootstrap-servers", bootstrap, *args]
    done = subprocess.run(run, capture_output=True, text=True, env=clean, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _forget_last_batch(checkpoint) -> None:
    """The last batch's commit log entry lost, as after a driver crash that followed the write."""
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)


def test_output_equals_input_and_a_rerun_batch_writes_nothing_twice(
    spark, bootstrap, names, seeded, tmp_path
):
    source, output, sent = seeded
    config = _config(bootstrap, names("app"), output)
    checkpoint = tmp_path / "ckpt"
    summaries = _run(spark, config, source, checkpoint)
    assert {s.data_path for s in summaries} == {"jvm"}, summaries
    # local mode places no tasks: the JVM writer reads the lineage and writes in one call
    assert {"lineage_ms" in s.driver for s in summaries} == {False}, summaries
    assert sum(s.records_out for s in summaries) == PARTITIONS * PER_PARTITION
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    assert result.exactly_once and result.missing == 0, result
    entries = _offsets.committed_entries(config, [(source, p) for p in range(PARTITIONS)])
    for p in range(PARTITIONS):
        offset, metadata = entries[(source, p)].offset, entries[(source, p)].metadata
        assert offset == PER_PARTITION and _offsets.is_own(config, metadata), (offset, metadata)
        assert f";w={output}:" in metadata, metadata  # the witnesses of its last transaction
        # read by the Python path's client exactly as committed (it reads a C string: the JVM writer
        # commits the NUL terminator the Python path's client commits)
        assert _witness.decode(_offsets.fields(metadata)[_witness.FIELD]), metadata

    # eos's CLI reads what the JVM writer committed as its own: the offsets, and the witnesses eos repair
    # reads back (nothing to repair)
    shown = json.loads(_cli(bootstrap, "offsets", "show", "--app", config.app_id, "--json"))
    assert [(p["committed"], p["lag"]) for p in shown["partitions"]] == [(PER_PARTITION, 0)] * PARTITIONS
    _cli(bootstrap, "repair", "--app", config.app_id)

    _forget_last_batch(checkpoint)
    rerun = _run(spark, config, source, checkpoint)
    rows = [row for s in rerun for row in s.per_partition]
    assert rows and all(r["skipped"] == r["records_in"] > 0 and r["records_out"] == 0 for r in rows), rows
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    assert result.exactly_once and result.missing == 0, result


@pytest.mark.parametrize("first,then", [("jvm", "python"), ("python", "jvm")])
def test_a_query_that_changes_path_between_runs_stays_exactly_once(
    spark, bootstrap, names, seeded, tmp_path, first, then
):
    """Each path takes the other's committed offsets, stamps and witnesses as its own."""
    source, output, sent = seeded
    app, checkpoint = names("app"), tmp_path / "ckpt"
    ran = _run(spark, _config(bootstrap, app, output, data_path=first), source, checkpoint, per_trigger=None)
    assert {s.data_path for s in ran} == {first}
    _forget_last_batch(checkpoint)  # the next run redoes the last batch on the other path: all skipped
    ran = _run(spark, _config(bootstrap, app, output, data_path=then), source, checkpoint)
    assert {s.data_path for s in ran} == {then}
    assert sum(s.skipped for s in ran) > 0 and sum(s.records_out for s in ran) == 0, ran
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    assert result.exactly_once and result.missing == 0, result


@pytest.mark.parametrize("shape", ["as_read", pytest.param("split", marks=pytest.mark.long)])
def test_connect_takes_the_jvm_data_path(connect, bootstrap, names, seeded, tmp_path, shape):
    """Under Spark Connect the sink runs in the server's foreachBatch worker, which has no JVM to call
    through Py4J: it asks eos's plugin in the server to read the batch's lineage and to run the JVM
    writer's tasks, in one request where the source read each input partition in one Spark partition.
    Output equal to the input, regrouped only where the source split the partitions (`split`:
    minPartitions), a re-run batch skipped, and a refusal raised as the Python path's own error."""
    source, output, sent = seeded
    config = _config(bootstrap, names("app"), output)
    path, checkpoint = tmp_path / "summaries.jsonl", tmp_path / "ckpt"
    options = {"minPartitions": 8} if shape == "split" else {}

    def run(before_start=lambda: None):
        df = eos.read_stream(connect, config, [source], maxOffsetsPerTrigger=3_000, **options)
        before_start()
        write_available(df, eos.sink(config, on_batch=partial(append_summary, str(path))), checkpoint)
        return read_summaries(path)

    summaries = run()
    assert {(s["data_path"], s["regrouped"]) for s in summaries} == {("jvm", shape == "split")}, summaries
    # as read, the plugin reads the lineage and writes the batch in one request (no lineage asked first)
    assert {"lineage_ms" in s["driver"] for s in summaries} == {shape == "split"}, summaries
    assert sum(s["records_out"] for s in summaries) == PARTITIONS * PER_PARTITION
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    assert result.exactly_once and result.missing == 0, result

    _forget_last_batch(checkpoint)
    path.unlink()
    rerun = run()
    assert {s["data_path"] for s in rerun} == {"jvm"}, rerun
    assert sum(s["skipped"] for s in rerun) == sum(s["records_in"] for s in rerun) > 0, rerun
    assert sum(s["records_out"] for s in rerun) == 0, rerun
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    assert result.exactly_once and result.missing == 0, result

    testing.produce_sequence(bootstrap, source, PARTITIONS, 5, start=PER_PARTITION)  # input for a new run
    checkpoint = tmp_path / "fresh"
    message = f"ForeignOffsetError: group '{config.app_id}' has offset 10 committed for input partition"
    with pytest.raises(Exception, match=message):  # partition 0's offset moved back by a non-eos consumer
        run(lambda: commit_foreign_offset(bootstrap, config.app_id, source, 0, 10))


@pytest.mark.long
def test_a_connect_server_without_eos_plugin_keeps_the_query_in_python(bootstrap, names, seeded, tmp_path):
    """PySpark's own local Connect server, without eos's jar: "auto" writes through Python and says why
    once; "jvm" is refused at the first batch, naming what the server lacks.

    `make chaos` only (a Connect server of its own, ~30 s): make test keeps "auto" staying on the Python
    path where the JVM writer cannot write a query, and "jvm" refused for it
    (test_what_the_jvm_writer_cannot_write_stays_on_the_python_path), and the JVM path through eos's
    plugin under Connect (test_connect_takes_the_jvm_data_path)."""
    pytest.importorskip("pyspark.sql.connect.session")
    source, output, sent = seeded
    app = names("app")

    def run(data_path: str, checkpoint: str) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "tests.integration.no_plugin_app", bootstrap, app, source, output]
        argv += [str(tmp_path / checkpoint), str(tmp_path / "summaries.jsonl"), data_path]
        return subprocess.run(argv, capture_output=True, text=True, timeout=300)

    refused = run("jvm", "a")
    assert refused.returncode != 0
    why = "'jvm' cannot write this query: the Spark Connect server does not run eos's plugin"
    assert why in refused.stderr
    assert not (tmp_path / "summaries.jsonl").exists()
    done = run("auto", "b")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in (done.stdout + done.stderr).splitlines() if "data path" in line]
    assert len(lines) == 1 and "does not run eos's plugin" in lines[0], lines
    assert {s["data_path"] for s in read_summaries(tmp_path / "summaries.jsonl")} == {"python"}
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    assert result.exactly_once and result.missing == 0, result


def test_an_offset_another_app_committed_is_refused_as_the_python_path_refuses_it(
    spark, bootstrap, names, seeded, tmp_path
):
    source, output, _ = seeded
    app = names("app")
    config = _config(bootstrap, app, output)

    def intrude():  # after eos.read_stream's own check: the writer's is the one that must refuse it
        commit_foreign_offset(bootstrap, app, source, 0, 10)

    message = (
        f"eos.errors.ForeignOffsetError: group '{app}' has offset 10 committed for input partition"
        f" {source}/0 without an eos stamp"
    )
    with pytest.raises(Exception, match=message):
        _run(spark, config, source, tmp_path / "ckpt", intrude)
    records, _ = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert not [r for r in records if testing.parse_value(r.value)[1] == 0]


def test_what_the_jvm_writer_cannot_write_stays_on_the_python_path(spark, bootstrap, names, seeded, tmp_path):
    source, output, sent = seeded
    app = names("app")
    refused = "data_path': 'jvm' cannot write this query: the query has a process function"
    with pytest.raises(ConfigError, match=refused):
        eos.sink(_config(bootstrap, app, output), process=lambda row, state: [row])
    summaries = _run(
        spark,
        _config(bootstrap, app, output, data_path="auto"),
        source,
        tmp_path / "b",
        process=lambda row, state: [eos.Output(row["value"], key=row["key"])],
    )
    assert {s.data_path for s in summaries} == {"python"}
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    assert result.exactly_once and result.missing == 0, result
    with pytest.raises(ConfigError, match="data_path"):
        _config(bootstrap, app, output, data_path="scala")


def test_producer_settings_reach_the_jvm_writers_producers(spark, bootstrap, names, seeded, tmp_path):
    """`Config.producer` (librdkafka's names) on the JVM data path: the Java client's own settings
    write the query; a message.max.bytes below one record's size refuses that record, named, as the
    Python path's client does (the Java client's default would take it); a setting the Java client
    has no match for keeps the query on the Python path ("auto"), or is refused by name ("jvm")."""
    source, output, sent = seeded
    app = names("app")
    settings = {
        "linger.ms": 20,
        "compression.type": "lz4",
        "acks": "all",
        "queue.buffering.max.kbytes": 32768,
    }
    config = _config(bootstrap, app, output, producer=settings)
    summaries = _run(spark, config, source, tmp_path / "a")
    assert {s.data_path for s in summaries} == {"jvm"}
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    assert result.exactly_once and result.missing == 0, result

    # the limit set for the producer alone, or for every client (`kafka`, where format("eos")'s
    # kafka.max.request.size goes): the Python path's producers take both
    for n, where in enumerate(("producer", "kafka")):
        big, big_out = seed_one_big(bootstrap, names, f"big{n}", records=6, big_at=5, size=3_000)
        limited = _config(bootstrap, names("app"), big_out, **{where: {"message.max.bytes": 1000}})
        with pytest.raises(Exception) as failed:
            _run(spark, limited, big, tmp_path / f"b{n}")
        message = str(failed.value)
        assert f"input record {big}/0@5" in message and "too large" in message.lower(), (
            where,
            message[-3000:],
        )
        records, _ = testing.read_topic(bootstrap, big_out, marker=testing.write_markers(bootstrap, big_out))
        assert records == []  # the transaction holding the refused record aborted: nothing of it committed

    other = {"batch.num.messages": "1000"}
    with pytest.raises(ConfigError, match="producer.batch.num.messages"):
        eos.sink(_config(bootstrap, app, output, producer=other))
    auto = _run(
        spark,
        _config(bootstrap, names("app"), output, producer=other, data_path="auto"),
        source,
        tmp_path / "c",
    )
    assert {s.data_path for s in auto} == {"python"}


def test_dead_letters_are_the_python_paths_own(spark, bootstrap, names, tmp_path):
    """on_error="dead_letter", pass-through, exactly_once, both paths over one input: the outputs the
    output topic refuses as too large go to the dead-letter topic once each, with the same key and
    headers (the input's, then the error's, the value left out and its size said) whichever path wrote
    them; past max_dead_letters_per_batch both refuse the batch with the same error."""
    source = names("in")
    testing.create_topic(bootstrap, source, 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(60):
        value = b"x" * 100_000 if i % 10 == 4 else b"v%d" % i
        producer.produce(source, value, b"k%d" % i, partition=0, headers=[("h", b"%d" % i)])
    assert producer.flush(30) == 0

    def run(path: str, most: int):
        output, dead = names(f"out-{path}-{most}"), names(f"dlq-{path}-{most}")
        testing.create_topic(bootstrap, output, 1, config={"max.message.bytes": "65536"})
        testing.create_topic(bootstrap, dead, 1)
        config = _config(
            bootstrap,
            names(f"app-{path}-{most}"),
            output,
            data_path=path,
            on_error="dead_letter",
            dead_letter_topic=dead,
            max_dead_letters_per_batch=most,
        )
        df = eos.read_stream(spark, config, [source], includeHeaders="true")
        summaries = []
        query = (
            df.writeStream.foreachBatch(eos.sink(config, on_batch=summaries.append))
            .option("checkpointLocation", str(tmp_path / f"ckpt-{path}-{most}"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        assert {s.data_path for s in summaries} == {path}
        records, _ = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
        letters = letters_by_input(bootstrap, dead, source)
        return records, letters

    def shown(letter) -> tuple:
        headers = [
            (k, v) for k, v in letter.headers if k not in ("__eos.errors.app.id", "__eos.errors.message")
        ]
        message = dict(letter.headers)["__eos.errors.message"].decode()
        assert message.startswith("output to 'out-"), message
        return letter.key, letter.value, headers

    written = {}
    for path in ("python", "jvm"):
        records, letters = run(path, 100)
        assert [r.value for r in records] == [b"v%d" % i for i in range(60) if i % 10 != 4]
        assert sorted(letters) == [(0, i) for i in range(4, 60, 10)]
        assert all(len(found) == 1 for found in letters.values())
        written[path] = {where: shown(found[0]) for where, found in letters.items()}
        sizes = {dict(found[0].headers).get("__eos.errors.value.bytes") for found in letters.values()}
        assert sizes == {b"100000"}, sizes
    assert written["jvm"] == written["python"]

    errors = {}
    for path in ("python", "jvm"):
        with pytest.raises(Exception) as failed:
            run(path, 3)
        errors[path] = re.findall(
            r"TooManyDeadLettersError: (.*?more than max_dead_letters_per_batch \(3\))", str(failed.value)
        )
    assert errors["jvm"] and errors["jvm"][-1] == errors["python"][-1], errors
