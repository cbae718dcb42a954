"""Input coordinates that are not the records' own fail the query before anything of that input partition
is written or skipped, in every API. Before this check, a `partition` column overwritten with 0 (what a
user migrating from Spark's Kafka sink writes for the output partition) made classic `foreachBatch` and
`eos.foreach_writer` exit 0 with 3 of 4 input partitions never written (their rows skipped as "already
written" under partition 0's committed offset), and `format("eos")` commit partition 0 from whichever
task came first before its driver-side check refused the batch."""

from __future__ import annotations

import json

import pytest
from conftest import after_failure, seed

import eos
from eos import testing
from eos._kafka import _offsets

PARTITIONS = 4
PER_PARTITION = 250

_FORMAT_EOS = pytest.mark.skipif(
    int(__import__("pyspark").__version__.split(".")[0]) < 4, reason="Python data sources need PySpark 4.0+"
)


def _overwrite(df, column: str, sql: str):
    """`df` with `column` replaced by the SQL expression `sql` (classic and Connect alike)."""
    return df.selectExpr(*(f"{sql} AS `{c}`" if c == column else f"`{c}`" for c in df.columns))


def _start(session, api, config, df, checkpoint):
    if api.startswith("foreachBatch"):
        writer = df.writeStream.foreachBatch(eos.sink(config))
    elif api == "format_eos":
        writer = df.writeStream.format("eos")
        options = {
            "kafka.bootstrap.servers": config.bootstrap_servers,
            "topic": config.output_topic,
            "eos.app.id": config.app_id,
            "eos.processing.guarantee": config.processing_guarantee,
        }
        for key, value in options.items():
            writer = writer.option(key, value)
    else:
        writer = df.writeStream.foreach(eos.foreach_writer(config))
    return writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()


def _failure(query) -> str:
    with pytest.raises(Exception) as info:
        query.awaitTermination()
    return str(info.value)


def _nothing_wrong_committed(spark, bootstrap, config, source, output, sent):
    """The output holds no record twice and no record that is not input; only partition 0 (whose rows
    say 0 rightly) may have moved its committed offset from where eos.read_stream started it (0), and
    only past its own rows."""

    def read():
        marker = testing.write_markers(bootstrap, output)
        records, hanging = testing.read_topic(bootstrap, output, marker=marker)
        committed = _offsets.committed(config, [(source, p) for p in range(PARTITIONS)])
        return testing.compare(testing.flatten(sent), records, hanging), committed

    def settled(read):
        return read[0].received == (read[1][(source, 0)] or 0)

    result, committed = after_failure(spark, read, settled)
    assert result.duplicated == result.unexpected == result.out_of_order == 0, result
    assert {p: committed[(source, p)] for p in range(1, PARTITIONS)} == dict.fromkeys(range(1, PARTITIONS), 0)
    assert committed[(source, 0)] in (0, PER_PARTITION)
    assert result.received == committed[(source, 0)], result


@pytest.mark.parametrize(
    "api",
    [
        "foreachBatch-classic",  # the JVM data path (data_path "auto" on a classic session)
        pytest.param("foreachBatch-classic-python", marks=pytest.mark.long),
        # Connect: `make chaos` (14 s; a clean clone of 154be98 took 16 min 42 s on a slow day);
        # test_sink's Connect tests run step 3a there
        pytest.param("foreachBatch-connect", marks=pytest.mark.long),
        # `make chaos`: on a classic session it takes the JVM data path, whose check (PassThrough.java)
        # foreachBatch-classic runs in make test
        pytest.param("format_eos", marks=[_FORMAT_EOS, pytest.mark.long]),
        "foreach_writer",  # the Python path's check (eos/_core/_input.py)
    ],
)
def test_a_partition_column_set_for_the_output_fails_before_anything_of_it_is_written(
    spark, bootstrap, names, tmp_path, api, request
):
    source, output, sent = seed(bootstrap, names, PER_PARTITION, PARTITIONS)
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=output,
        processing_guarantee="exactly_once",
        data_path="python" if api.endswith("-python") else "auto",
    )
    session = request.getfixturevalue("connect") if api == "foreachBatch-connect" else spark
    df = eos.read_stream(session, config, [source])
    checkpoint = tmp_path / "ckpt"

    message = _failure(_start(session, api, config, _overwrite(df, "partition", "0"), checkpoint))
    assert "InputCoordinateError" in message and "column 'partition'" in message, message
    assert f"a row says {source}/0@" in message and "output_partition_column" in message, message
    _nothing_wrong_committed(spark, bootstrap, config, source, output, sent)

    # The query fixed, on the same checkpoint: the failed batch runs again and every record is written once.
    _start(session, api, config, df, checkpoint).awaitTermination()
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    assert result.exactly_once, result


@pytest.mark.parametrize(
    ("column", "sql", "source_options"),
    [
        ("offset", "offset + 1", {}),
        # `make chaos`: the same check as the offset's, on another column
        pytest.param("topic", "'elsewhere'", {}, marks=pytest.mark.long),
        # split by the source: the sink regroups, each row tagged with the Spark partition it was read in
        ("partition", "0", {"minPartitions": "8"}),
        # a shuffle in the query: the lineage names only the ranges the batch read; eos_input names the rows
        ("partition", "(partition + 1) % 4", {"repartition": True}),
    ],
)
def test_classic_lineage_and_eos_input_name_the_overwritten_column(
    spark, bootstrap, names, tmp_path, column, sql, source_options
):
    source, output, sent = seed(bootstrap, names, PER_PARTITION, PARTITIONS)
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=output,
        processing_guarantee="exactly_once",
    )
    options = dict(source_options)
    shuffle = options.pop("repartition", False)
    df = eos.read_stream(spark, config, [source], **options)
    if shuffle:
        df = df.repartition(3)
    query = _start(spark, "foreachBatch-classic", config, _overwrite(df, column, sql), tmp_path / "ckpt")
    message = _failure(query)
    assert "InputCoordinateError" in message and f"column '{column}'" in message, message
    records, _ = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert records == [], records
    result = testing.compare(testing.flatten(sent), records, [])
    assert result.duplicated == result.unexpected == 0, result


def test_rows_of_another_source_with_copied_coordinates_are_refused(spark, bootstrap, names, tmp_path):
    """A union of the Kafka stream with rows from elsewhere (the rate source) that carry made-up
    coordinates: the lineage is no longer one-to-one, and `eos_input` says those rows are no record."""
    source, output, sent = seed(bootstrap, names, PER_PARTITION, PARTITIONS)
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=output,
        processing_guarantee="exactly_once",
    )
    kafka = eos.read_stream(spark, config, [source]).select(
        "topic", "partition", "offset", "value", "eos_input"
    )
    made_up = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", "50")
        .load()
        .selectExpr(
            f"'{source}' AS topic",
            "0 AS partition",
            f"value + {PER_PARTITION} AS offset",
            "cast(cast(value AS string) AS binary) AS value",  # binary as Kafka's (3.5 refuses string)
            "cast(NULL AS struct<topic:string,partition:int,offset:bigint>) AS eos_input",
        )
    )
    query = (
        kafka.union(made_up)
        .writeStream.foreachBatch(eos.sink(config))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        message = _failure(query)
    finally:
        query.stop()
    assert "InputCoordinateError" in message and "no Kafka record (null)" in message, message
    records, _ = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    result = testing.compare(testing.flatten(sent), records, [])
    assert result.duplicated == result.unexpected == 0, result


def test_the_lineage_names_the_kafka_range_each_spark_partition_read(spark, connect, bootstrap, names):
    """The walk down a batch's lineage: each Spark partition's Kafka range where the steps down to the
    source are one-to-one, only the ranges read through a shuffle, nothing where no Kafka source is read.
    Made twice, the same answers: through Py4J on a classic session (`_partitioning`), and in the JVM
    (`Lineage.java`, what eos's plugin answers a Connect session's sink with, asked here both directly
    and through the plugin)."""
    from eos._core._input import SourceRange
    from eos._spark import _partitioning, _server
    from eos._spark._affinity import _Jvm

    source, _, _ = seed(bootstrap, names, PER_PARTITION, PARTITIONS)
    ends = json.dumps({source: {str(p): PER_PARTITION - p for p in range(PARTITIONS)}})
    expected = {SourceRange(source, p, 0, PER_PARTITION - p) for p in range(PARTITIONS)}

    def read(session):
        df = session.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
        df = df.option("subscribe", source).option("startingOffsets", "earliest")
        return df.option("endingOffsets", ends).load()

    def in_the_jvm(df):
        return _partitioning.parse(_Jvm.of(spark).shared("eos.spark.Lineage").read(df._jdf))

    df = read(spark)
    shapes = [df.select("topic", "partition", "offset", "value"), df.repartition(3), spark.range(10)]
    found, shuffled, none = (_partitioning.lineage(shape) for shape in shapes)
    assert found is not None and found.partitions is not None, found
    assert set(found.partitions) == expected and found.one_run_per_task, found
    assert shuffled is not None and shuffled.partitions is None and set(shuffled.ranges) == expected, shuffled
    assert none is None
    assert [in_the_jvm(shape) for shape in shapes] == [found, shuffled, none]

    remote = read(connect)
    assert _partitioning.parse(_server.lineage(remote.select("topic", "offset"))) == found
    assert _partitioning.parse(_server.lineage(remote.repartition(3))) == shuffled
    # the sink keeps only a lineage that names each Spark partition's range
    assert _partitioning.lineage(remote, server=True) == found
    assert _partitioning.lineage(remote.repartition(3), server=True) is None
