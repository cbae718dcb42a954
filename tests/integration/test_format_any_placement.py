"""`format("eos")` with input_mode "any": rows `eos.place` placed, so that a batch re-run split otherwise
(a file source after a restart on more cores) writes each row once; anything else is refused before a
part writes."""

from __future__ import annotations

from collections import Counter

import pytest

import eos
from eos import testing
from eos._core import _parts
from tests.support.aggregates import read_output
from tests.support.faults import fail_part_0_while

LINES = 240


def _files(directory, lines: int = LINES) -> list[bytes]:
    """Four text files, `lines` distinct lines in all; a line's key is its number modulo 7."""
    directory.mkdir()
    values = [f"line-{i:04d}".encode() for i in range(lines)]
    for f in range(4):
        (directory / f"part-{f}.txt").write_bytes(b"\n".join(values[f::4]) + b"\n")
    return values


def _start(spark, name, files, output, app_id, checkpoint, parts=3, bootstrap=None, transform=None, **conf):
    for key, value in conf.items():
        spark.conf.set(key, value)
    df = spark.readStream.format("text").load(str(files))
    df = df.selectExpr("CAST(substring(value, 6) % 7 AS STRING) AS key", "value")
    df = df.selectExpr("CAST(key AS BINARY) AS key", "CAST(value AS BINARY) AS value")
    if parts is not None:
        df = eos.place(df, parts=parts)
    if transform is not None:
        df = transform(df)
    writer = df.writeStream.format(name)
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "topic": output,
        "eos.app.id": app_id,
        "eos.input.mode": "any",
        "eos.processing.guarantee": "exactly_once",
        "checkpointLocation": str(checkpoint),
    }
    for key, value in options.items():
        writer = writer.option(key, value)
    return writer.trigger(availableNow=True).start()


def _committed(bootstrap, output) -> list[bytes]:
    """The output's committed values, in each output partition's log order (partition by partition)."""
    return [r.value for r in read_output(bootstrap, output)]


def _exactly_once(values, sent) -> dict[str, int]:
    counts = Counter(values)
    return {
        "missing": sum(1 for v in sent if v not in counts),
        "duplicated": sum(n - 1 for n in counts.values() if n > 1),
        "unexpected": sum(1 for v in counts if v not in set(sent)),
    }


@pytest.fixture
def split_conf(spark):
    """Restores the file-split settings the tests change (the Spark session is shared)."""
    keys = ("spark.sql.files.maxPartitionBytes", "spark.sql.files.minPartitionNum")
    before = {key: spark.conf.get(key, None) for key in keys}
    yield
    for key, value in before.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


def test_a_file_batch_re_run_split_otherwise_writes_each_line_once(
    spark, bootstrap, names, tmp_path, split_conf
):
    """Part 0 of batch 0 fails on every attempt while parts 1-2 commit; the query restarts with the file
    source splitting its files otherwise (as a restart on more cores does: minPartitionNum follows the
    cores). Placed by eos.place, each line's part is a function of the line: the committed parts write
    nothing, part 0 writes its lines once. Unplaced, Spark's partition p of the re-run held other lines
    than the first run's, and the lines of committed parts were written again."""
    sent = _files(tmp_path / "in")
    output, app_id = names("out"), names("app")
    testing.create_topic(bootstrap, output, 4)
    marker = tmp_path / "fail-part-0"
    marker.touch()
    name = eos.register(spark, f"eos-{app_id}", process_batch=fail_part_0_while(str(marker)))

    def run(**conf):
        return _start(
            spark, name, tmp_path / "in", output, app_id, tmp_path / "ckpt", bootstrap=bootstrap, **conf
        )

    query = run(**{"spark.sql.files.maxPartitionBytes": "400b", "spark.sql.files.minPartitionNum": "1"})
    with pytest.raises(Exception, match="part 0 fails"):
        query.awaitTermination()
    config = eos.Config(bootstrap_servers=bootstrap, app_id=app_id, output_topic=output)
    committed = {p for p, progress in _parts.read_progress(config, range(3)).items() if progress}
    assert committed == {1, 2}, f"the fault did not land mid-batch: parts committed {committed}"
    first = _committed(bootstrap, output)
    assert 0 < len(first) < LINES, len(first)

    marker.unlink()
    run(
        **{"spark.sql.files.maxPartitionBytes": "128m", "spark.sql.files.minPartitionNum": "8"}
    ).awaitTermination()
    result = _exactly_once(_committed(bootstrap, output), sent)
    assert result == {"missing": 0, "duplicated": 0, "unexpected": 0}, result


def test_an_unplaced_moved_or_replaced_placement_is_refused_before_a_part_writes(
    spark, bootstrap, names, tmp_path, split_conf
):
    """Each way out of the placement fails the batch naming what to do, and writes nothing: no
    eos.place; a repartition after it; a re-run of a part-committed batch placed in other parts (then,
    placed as its first run was, the batch finishes exactly once)."""
    sent = _files(tmp_path / "in")
    output, app_id = names("out"), names("app")
    testing.create_topic(bootstrap, output, 4)
    name = eos.register(spark, f"eos-{app_id}")

    def run(checkpoint, **kwargs):
        query = _start(
            spark, name, tmp_path / "in", output, app_id, tmp_path / checkpoint, bootstrap=bootstrap, **kwargs
        )
        with pytest.raises(Exception) as info:
            query.awaitTermination()
        return str(info.value)

    message = run("unplaced", parts=None)
    assert "BatchSchemaError" in message and "eos.place(df, parts=8)" in message, message
    message = run("moved", transform=lambda df: df.repartition(5))
    assert "NondeterministicBatchError" in message and "just before writeStream" in message, message
    assert _committed(bootstrap, output) == []

    marker = tmp_path / "fail-part-0"
    marker.touch()
    failing = eos.register(spark, f"eos-{app_id}-failing", process_batch=fail_part_0_while(str(marker)))
    query = _start(spark, failing, tmp_path / "in", output, app_id, tmp_path / "ckpt", bootstrap=bootstrap)
    with pytest.raises(Exception, match="part 0 fails"):
        query.awaitTermination()
    marker.unlink()
    first = _committed(bootstrap, output)
    assert first, "no part of the first run committed"
    message = run("ckpt", parts=4)
    assert "NondeterministicBatchError" in message and "first run placed parts=3" in message, message
    assert _committed(bootstrap, output) == first, "the refused run wrote something"
    _start(
        spark, name, tmp_path / "in", output, app_id, tmp_path / "ckpt", bootstrap=bootstrap
    ).awaitTermination()
    result = _exactly_once(_committed(bootstrap, output), sent)
    assert result == {"missing": 0, "duplicated": 0, "unexpected": 0}, result
