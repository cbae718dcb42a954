"""eos._core._arrow: runs of one input topic-partition, the rows below a committed offset, pass-through
output columns, and the validation of what `process_batch` returns."""

from __future__ import annotations

import pyarrow as pa
import pytest

import eos
from eos._core._arrow import Layout, batch_outputs, below, passthrough, tp_runs

LAYOUT = Layout(value="value")
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def batch(*runs: tuple[str, int, list[int]]) -> pa.RecordBatch:
    """One record batch holding, in order, the given (topic, partition, offsets) runs."""
    topics, partitions, offsets = [], [], []
    for topic, partition, offs in runs:
        topics += [topic] * len(offs)
        partitions += [partition] * len(offs)
        offsets += offs
    return pa.RecordBatch.from_pydict(
        {
            "topic": pa.array(topics, pa.string()),
            "partition": pa.array(partitions, pa.int32()),
            "offset": pa.array(offsets, pa.int64()),
            "value": pa.array([b"v%d" % o for o in offsets], pa.binary()),
        }
    )


def runs_of(*batches: pa.RecordBatch) -> list[tuple[tuple[str, int], list[int]]]:
    return [(tp, run.column("offset").to_pylist()) for tp, run in tp_runs(batches, LAYOUT)]


# -- runs ------------------------------------------------------------------------------------------------


def test_one_topic_partition_per_batch_is_one_run_per_batch():
    assert runs_of(batch(("a", 0, [0, 1, 2])), batch(("a", 0, [3, 4]))) == [
        (("a", 0), [0, 1, 2]),
        (("a", 0), [3, 4]),
    ]


def test_a_batch_holding_several_topic_partitions_is_cut_at_their_boundaries():
    got = runs_of(batch(("a", 0, [5, 6]), ("a", 1, [0]), ("b", 0, [7, 9])), batch(("b", 0, [10])))
    assert got == [(("a", 0), [5, 6]), (("a", 1), [0]), (("b", 0), [7, 9]), (("b", 0), [10])]


def test_empty_batches_are_skipped():
    assert runs_of(batch(), batch(("a", 0, [1])), batch()) == [(("a", 0), [1])]


@pytest.mark.parametrize(
    "batches",
    [
        [batch(("a", 0, [1, 3, 2]))],  # out of order inside a batch
        [batch(("a", 0, [1, 2])), batch(("a", 0, [2, 3]))],  # repeated across batches
        [batch(("a", 0, [4, 4]))],  # repeated inside a batch
    ],
    ids=["unsorted", "repeated-across", "repeated-within"],
)
def test_offsets_must_strictly_increase(batches):
    with pytest.raises(eos.InputOrderError, match="strictly increasing") as info:
        runs_of(*batches)
    assert (info.value.topic, info.value.partition) == ("a", 0)


def test_a_topic_partition_split_into_two_runs_is_refused_before_the_second_is_yielded():
    seen = []
    with pytest.raises(eos.InputOrderError, match="two separate runs") as info:
        for tp, _ in tp_runs([batch(("a", 0, [1, 2]), ("b", 0, [1]), ("a", 0, [3]))], LAYOUT):
            seen.append(tp)
    assert seen == [("a", 0), ("b", 0)]
    assert (info.value.topic, info.value.partition, info.value.offset) == ("a", 0, 3)


@pytest.mark.parametrize(
    ("committed", "expected"), [(None, 0), (0, 0), (10, 0), (11, 1), (13, 3), (14, 4), (99, 4)]
)
def test_rows_below_the_committed_offset(committed, expected):
    run = batch(("a", 0, [10, 11, 12, 13]))
    assert below(run, LAYOUT, committed) == expected


# -- pass-through columns ---------------------------------------------------------------------------------


def test_passthrough_reads_value_key_headers_and_the_configured_columns():
    run = pa.RecordBatch.from_pydict(
        {
            "topic": ["in", "in"],
            "partition": pa.array([0, 0], pa.int32()),
            "offset": pa.array([4, 5], pa.int64()),
            "value": pa.array(["text", None], pa.string()),
            "key": pa.array([b"k", None], pa.binary()),
            "headers": pa.array([[{"key": "h", "value": b"1"}, {"key": "h", "value": None}], []], HEADERS),
            "dest": ["x", None],
            "dest_p": pa.array([2, None], pa.int32()),
        }
    )
    layout = Layout(value="value", key="key", headers="headers", out_topic="dest", out_partition="dest_p")
    out = passthrough(run, layout, "fallback")
    assert out.values.to_pylist() == ["text", None]
    assert out.keys.to_pylist() == [b"k", None]
    assert out.headers == [[("h", b"1"), ("h", None)], None]
    assert out.topic == ["x", None]
    assert out.partitions == [2, None]
    assert [out.offset_of(i) for i in range(2)] == [4, 5]
    assert out.origin(1) == ""


# -- process_batch output ---------------------------------------------------------------------------------

CALL = {"default_topic": "out", "topic": "in", "partition": 2, "first": 100, "last": 149}


def test_batch_output_columns_are_eos_output_fields():
    result = pa.table(
        {
            "value": pa.array([b"a", None], pa.binary()),
            "key": pa.array(["k", "k"], pa.string()),
            "headers": pa.array([[{"key": "h", "value": b"1"}], None], HEADERS),
            "topic": pa.array(["other", None], pa.string()),
            "partition": pa.array([1, None], pa.int64()),
        }
    )
    out = batch_outputs(result, **CALL)
    assert out.values.to_pylist() == [b"a", None]
    assert out.keys.to_pylist() == ["k", "k"]
    assert out.headers == [[("h", b"1")], None]
    assert out.topic == ["other", None]  # None: the configured output topic
    assert out.partitions == [1, None]
    assert out.offset_of(1) == 100
    assert "input offsets 100-149" in out.origin(0)


def test_value_alone_goes_to_the_default_topic_and_none_writes_nothing():
    out = batch_outputs(pa.RecordBatch.from_pydict({"value": [b"x"]}), **CALL)
    assert (out.values.to_pylist(), out.topic, out.keys, out.partitions) == ([b"x"], "out", None, None)
    assert len(batch_outputs(None, **CALL)) == 0


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (pa.RecordBatch.from_pydict({"key": [b"k"]}), "no 'value' column"),
        (
            pa.RecordBatch.from_pydict({"value": [1]}),
            "column 'value' has type int64, expected binary or string",
        ),
        (pa.RecordBatch.from_pydict({"value": [b"v"], "key": [1.5]}), "column 'key' has type double"),
        (pa.RecordBatch.from_pydict({"value": [b"v"], "topic": [b"t"]}), "column 'topic' has type binary"),
        (
            pa.RecordBatch.from_pydict({"value": [b"v"], "partition": ["1"]}),
            "column 'partition' has type string",
        ),
        (pa.RecordBatch.from_pydict({"value": [b"v"], "headers": [{"k": "v"}]}), "column 'headers' has type"),
        (
            pa.RecordBatch.from_pydict({"value": [b"v"], "offset": [1], "timestamp": [2]}),
            "columns ['offset'] that are not output fields",
        ),
        ([b"v"], "returned a list, not a pyarrow RecordBatch or Table"),
    ],
    ids=[
        "no-value",
        "int-value",
        "float-key",
        "binary-topic",
        "str-partition",
        "map-headers",
        "input",
        "list",
    ],
)
def test_bad_batch_output_names_the_column_and_the_input_records(result, message):
    with pytest.raises(eos.ProcessError) as info:
        batch_outputs(result, **CALL)
    assert message in str(info.value)
    assert (info.value.topic, info.value.partition, info.value.offset) == ("in", 2, 100)
    assert "process_batch over input offsets 100-149" in str(info.value)
    assert "in/2@100" in str(info.value)


def test_a_row_without_topic_needs_a_configured_output_topic():
    result = pa.RecordBatch.from_pydict({"value": [b"a", b"b"], "topic": ["t", None]})
    with pytest.raises(eos.ProcessError, match="output row 1 has no topic"):
        batch_outputs(result, **{**CALL, "default_topic": None})


def test_output_timestamps_as_epoch_milliseconds():
    from eos._core._arrow import timestamps_ms

    micros = pa.array([1_795_780_800_123_456, None, 999], pa.timestamp("us", tz="Europe/Paris"))
    assert timestamps_ms(micros) == [1_795_780_800_123, None, 0]
    assert timestamps_ms(pa.array([5, None], pa.int64())) == [5, None]
    assert timestamps_ms(pa.array([None, None], pa.int64())) is None


def test_a_process_batch_timestamp_column_needs_a_time_zone_or_epoch_milliseconds():
    ok = pa.RecordBatch.from_pydict(
        {"value": [b"a"], "timestamp": pa.array([7_000], pa.timestamp("ms", tz="UTC"))}
    )
    assert batch_outputs(ok, **CALL).timestamps == [7_000]
    naive = pa.RecordBatch.from_pydict({"value": [b"a"], "timestamp": pa.array([7_000], pa.timestamp("ms"))})
    with pytest.raises(
        eos.ProcessError,
        match="column 'timestamp' has type timestamp.ms., expected a timestamp with a time zone",
    ):
        batch_outputs(naive, **CALL)
