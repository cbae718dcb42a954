"""`eos._core._input.check_rows`: each row's topic/partition/offset against what Spark read, every way the
sink knows it (the integration tests run the same through Spark in every API)."""

from __future__ import annotations

import attrs
import pyarrow as pa
import pytest

from eos._core._arrow import Layout
from eos._core._input import (
    INPUT_COLUMN,
    READ_IN_COLUMN,
    Provenance,
    SourceRange,
    check_rows,
    checked_batches,
)
from eos.errors import InputCoordinateError, InputOrderError

LAYOUT = Layout(value="value")
INPUT_TYPE = pa.struct([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64())])


def _batch(rows, truth=None, read_in=None) -> pa.RecordBatch:
    arrays = {
        "topic": pa.array([r[0] for r in rows], pa.string()),
        "partition": pa.array([r[1] for r in rows], pa.int32()),
        "offset": pa.array([r[2] for r in rows], pa.int64()),
        "value": pa.array([b"v"] * len(rows), pa.binary()),
    }
    if truth is not None:
        arrays[INPUT_COLUMN] = pa.array(
            [
                None if t is None else dict(zip(("topic", "partition", "offset"), t, strict=True))
                for t in truth
            ],
            INPUT_TYPE,
        )
    if read_in is not None:
        arrays[READ_IN_COLUMN] = pa.array(read_in, pa.int32())
    return pa.RecordBatch.from_pydict(arrays)


BY_COLUMN = Provenance(column=INPUT_COLUMN)


def test_rows_that_are_their_records_pass():
    rows = [("in", 1, 10), ("in", 1, 11)]
    check_rows(_batch(rows, truth=rows), LAYOUT, BY_COLUMN, 0)


def test_eos_input_is_read_by_field_name_whatever_the_fields_order():
    """eos.foreach_writer builds its batches from row dicts, and pyarrow before 15 orders a struct
    inferred from dicts by field name (offset, partition, topic): read by position, every row failed
    with ArrowNotImplementedError (string against int64) on Spark 3.5's lowest pins."""
    schema = pa.schema(
        [
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("value", pa.binary()),
            (
                INPUT_COLUMN,
                pa.struct([("offset", pa.int64()), ("partition", pa.int64()), ("topic", pa.string())]),
            ),
        ]
    )
    coordinates = {"topic": "in", "partition": 1, "offset": 10}

    def batch(partition):
        return pa.RecordBatch.from_pylist(
            [{**coordinates, "partition": partition, "value": b"v", INPUT_COLUMN: coordinates}], schema=schema
        )

    check_rows(batch(1), LAYOUT, BY_COLUMN, 0)
    moved = batch(0)
    with pytest.raises(InputCoordinateError) as info:
        check_rows(moved, LAYOUT, BY_COLUMN, 0)
    assert info.value.column == "partition"


@pytest.mark.parametrize(
    ("row", "column"),
    [(("in", 0, 11), "partition"), (("other", 1, 11), "topic"), (("in", 1, 12), "offset")],
)
def test_the_first_differing_column_and_row_are_named(row, column):
    truth = [("in", 1, 10), ("in", 1, 11)]
    with pytest.raises(InputCoordinateError) as info:
        check_rows(_batch([truth[0], row], truth=truth), LAYOUT, BY_COLUMN, 0)
    err = info.value
    assert err.column == column
    assert (err.topic, err.partition, err.offset) == row
    assert "as in/1@11" in str(err) and f"says {row[0]}/{row[1]}@{row[2]}" in str(err)
    assert ("output_partition_column" in str(err)) == (column == "partition")


def test_a_row_that_is_no_record_is_refused():
    with pytest.raises(InputCoordinateError, match=r"no Kafka record \(null\)"):
        check_rows(_batch([("in", 0, 5)], truth=[None]), LAYOUT, BY_COLUMN, 0)


SOURCES = (SourceRange("in", 0, 0, 100), SourceRange("in", 1, 0, 100), SourceRange("in", 1, 100, 200))


def test_the_task_partition_names_the_range_its_rows_were_read_from():
    by_partition = Provenance(partitions=SOURCES)
    check_rows(_batch([("in", 1, 5), ("in", 1, 99)]), LAYOUT, by_partition, 1)
    with pytest.raises(InputCoordinateError, match=r"read it from in/0 \(offsets 0 to 99\)") as info:
        check_rows(_batch([("in", 1, 5)]), LAYOUT, by_partition, 0)
    assert info.value.column == "partition"
    with pytest.raises(InputCoordinateError) as info:
        check_rows(_batch([("in", 1, 99), ("in", 1, 100)]), LAYOUT, by_partition, 1)
    assert (info.value.column, info.value.offset) == ("offset", 100)


def test_a_regrouped_row_is_checked_against_the_partition_it_was_read_in_and_the_tag_dropped():
    tagged = Provenance(partitions=SOURCES, read_in=READ_IN_COLUMN)
    good = _batch([("in", 1, 99), ("in", 1, 100)], read_in=[1, 2])
    (out,) = checked_batches([good], LAYOUT, tagged, 7)
    assert out.schema.names == ["topic", "partition", "offset", "value"]
    with pytest.raises(InputCoordinateError) as info:
        check_rows(_batch([("in", 1, 99), ("in", 1, 100)], read_in=[1, 0]), LAYOUT, tagged, 7)
    assert (info.value.column, info.value.offset) == ("partition", 100)


def test_through_a_shuffle_rows_must_lie_in_the_ranges_the_batch_read():
    ranges = Provenance(ranges=SOURCES)
    check_rows(_batch([("in", 1, 0), ("in", 1, 199), ("in", 0, 3)]), LAYOUT, ranges, 0)
    with pytest.raises(InputCoordinateError, match="read in/1 at offsets 0-199") as info:
        check_rows(_batch([("in", 1, 199), ("in", 1, 200)]), LAYOUT, ranges, 0)
    assert info.value.column == "offset"
    with pytest.raises(InputCoordinateError, match="read no such input partition") as info:
        check_rows(_batch([("in", 2, 0)]), LAYOUT, ranges, 0)
    assert info.value.column == "partition"


def test_without_provenance_batches_pass_unchecked():
    batch = _batch([("in", 9, 1)])
    assert list(checked_batches([batch], LAYOUT, None, 0)) == [batch]


# -- D3: one wave of tasks -----------------------------------------------------------------------------


class _Context:
    def __init__(self, cores: int) -> None:
        self.defaultParallelism = cores


class _Batch:
    """What `task_slots` reads of a classic batch: its session's SparkContext."""

    def __init__(self, cores: int) -> None:
        self.sparkSession = type("Session", (), {"sparkContext": _Context(cores)})()


def _partitions(n: int) -> tuple[SourceRange, ...]:
    return tuple(SourceRange("in", p, 0, 10) for p in range(n))


def test_a_batch_with_more_input_partitions_than_cores_runs_in_one_task_per_core():
    from eos._spark._preflight import task_slots

    assert task_slots(_Batch(2), Provenance(partitions=_partitions(4))) == 2
    assert task_slots(_Batch(4), Provenance(partitions=_partitions(4))) is None  # one wave already
    assert task_slots(_Batch(8), Provenance(partitions=_partitions(4))) is None
    # regrouped (rows tagged already), ranges only, or the rows' own column: not coalesced
    assert task_slots(_Batch(2), Provenance(partitions=_partitions(4), read_in=READ_IN_COLUMN)) is None
    assert task_slots(_Batch(2), Provenance(ranges=_partitions(4))) is None
    assert task_slots(_Batch(2), Provenance(column=INPUT_COLUMN)) is None
    assert task_slots(object(), Provenance(partitions=_partitions(4))) is None  # Spark Connect


def test_a_coalesced_task_checks_each_run_against_the_partition_it_was_read_in():
    """Two input partitions in one task (coalesced): each row is checked against the range of the
    Spark partition it was read in, as the tag says, not against the task's own partition."""
    sources = (SourceRange("in", 0, 0, 2), SourceRange("in", 1, 5, 7))
    provenance = Provenance(partitions=sources, read_in=READ_IN_COLUMN)
    good = pa.RecordBatch.from_pydict(
        {
            "topic": ["in"] * 4,
            "partition": pa.array([0, 0, 1, 1], pa.int32()),
            "offset": pa.array([0, 1, 5, 6], pa.int64()),
            READ_IN_COLUMN: pa.array([0, 0, 1, 1], pa.int32()),
        }
    )
    [out] = checked_batches([good], LAYOUT, provenance, task_partition=0)
    assert READ_IN_COLUMN not in out.schema.names and out.num_rows == 4
    moved = good.set_column(1, "partition", pa.array([0, 0, 0, 0], pa.int32()))  # overwritten
    with pytest.raises(InputCoordinateError, match="partition"):
        list(checked_batches([moved], LAYOUT, provenance, task_partition=0))


def _scope(first: int):
    from eos import Config
    from eos._scope import PartitionScope

    config = Config(bootstrap_servers="localhost:1", app_id="app", output_topic="out")
    return attrs.evolve(PartitionScope.of(config, "in", 0, 1, query="q1"), first=first)


def test_a_task_whose_rows_lie_below_another_tasks_commit_is_told_they_were_not_written():
    """Task 20 committed offset 99 in this batch and this task's rows begin at 21: its rows 21-98 lie
    below that offset, unwritten (rows dealt out by key), however early the other task began."""
    from eos._core._input import require_unshared
    from eos._kafka import _offsets

    entry = _offsets.Committed(99, _offsets.stamp(_scope(20).config, "q1", 1, 20))
    with pytest.raises(InputOrderError) as info:
        require_unshared(_scope(21), entry)
    assert "rows from 21 to 98 were not written" in str(info.value)
    assert "Nothing is lost" not in str(info.value)
    assert '"in": {"0": 21}' in str(info.value)


def test_a_task_whose_rows_follow_another_tasks_commit_loses_nothing():
    from eos._core._input import require_unshared
    from eos._kafka import _offsets

    entry = _offsets.Committed(50, _offsets.stamp(_scope(20).config, "q1", 1, 20))
    with pytest.raises(InputOrderError, match="Nothing is lost"):
        require_unshared(_scope(50), entry)


@pytest.mark.parametrize(
    ("committed", "reset_from", "resumes_at", "gap"),
    [
        (1450, 1500, 1500, True),  # set back, the checkpoint resumes where the reset moved it from
        (1450, 1500, 1600, True),
        (1450, -1, 1500, True),  # an older eos's reset: any gap with records in it
        (1450, 1500, 1450, False),  # a new checkpoint: it reads from the committed offset
        (1450, 1500, 1460, False),  # ... its first rows filtered out: read, not skipped
        (1450, 1500, 1400, False),  # a batch run again from below: rows below 1450 skipped as written
        (1550, 1500, 1500, False),  # set forward: rows up to 1550 skipped, as the reset asks
        (1450, None, 1500, False),  # not reset: the app's own offset (a filter drops rows)
        (None, 1500, 1500, False),
    ],
)
def test_a_reset_set_back_is_refused_only_where_this_run_resumes_past_it(
    monkeypatch, committed, reset_from, resumes_at, gap
):
    from eos._core._input import require_reset_honoured
    from eos._kafka import _reads
    from eos.errors import InputGapError

    looked = []

    def unseen_record(config, topic, partition, low, high):
        looked.append((low, high))
        return low  # a record in every gap looked at

    monkeypatch.setattr(_reads, "unseen_record", unseen_record)
    if not gap:
        require_reset_honoured(_scope(resumes_at), committed, reset_from, resumes_at)
        assert looked == []
        return
    with pytest.raises(InputGapError) as info:
        require_reset_honoured(_scope(resumes_at), committed, reset_from, resumes_at)
    assert (info.value.offset, info.value.resumes_at) == (committed, resumes_at)
    assert looked == [(committed, resumes_at)]
    assert "new checkpointLocation" in str(info.value)
    assert f'--to \'{{"in": {{"0": {resumes_at}}}}}\'' in str(info.value)


def test_a_gap_after_a_reset_that_holds_no_record_passes(monkeypatch):
    """Offsets without a record (a transaction's marker, aborted records) are what the source skips too."""
    from eos._core._input import require_reset_honoured
    from eos._kafka import _reads

    monkeypatch.setattr(_reads, "unseen_record", lambda *args: None)
    require_reset_honoured(_scope(1500), 1450, 1500, 1500)


def test_where_the_source_began_reading_comes_from_the_lineage_where_there_is_one():
    from eos._core._input import Provenance, SourceRange, read_start

    split = (SourceRange("in", 0, 100, 150), SourceRange("in", 0, 150, 200), SourceRange("in", 1, 7, 9))
    assert read_start(Provenance(partitions=split), "in", 0) == 100
    assert read_start(Provenance(ranges=split), "in", 1) == 7
    assert read_start(Provenance(column="eos_input"), "in", 0) is None
    assert read_start(None, "in", 0) is None
