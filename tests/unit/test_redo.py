"""eos._core._redo: the open transaction's input kept for a redo — found by offset, trimmed to what a new
incarnation has not committed, emptied by a commit. No broker, no Spark."""

from __future__ import annotations

import pyarrow as pa

from eos._core._arrow import Layout
from eos._core._redo import RedoBuffer

LAYOUT = Layout(value="value")


def rows(offsets: list[int]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "topic": pa.array(["in"] * len(offsets), pa.string()),
            "partition": pa.array([0] * len(offsets), pa.int32()),
            "offset": pa.array(offsets, pa.int64()),
            "value": pa.array([b"v%d" % o for o in offsets], pa.binary()),
        }
    )


def kept(buffer: RedoBuffer) -> list[int]:
    return [o for chunk in buffer for o in chunk.column("offset").to_pylist()]


def test_rows_are_kept_in_order_and_found_by_offset():
    buffer = RedoBuffer(LAYOUT)
    buffer.add(rows([3, 4, 5]))
    buffer.add(rows([7, 9]))  # a gap: offset 8 is a transaction marker
    assert kept(buffer) == [3, 4, 5, 7, 9] and buffer.rows() == 5
    assert buffer.row(9).column("value").to_pylist() == [b"v9"]
    assert buffer.row(8) is None and buffer.row(2) is None and buffer.row(10) is None


def test_trim_drops_what_a_new_incarnation_found_committed_and_empty_chunks():
    buffer = RedoBuffer(LAYOUT)
    buffer.add(rows([3, 4, 5]))
    buffer.add(rows([6, 7]))
    committed = 5
    buffer.trim(lambda chunk: chunk.filter(pa.compute.greater_equal(chunk.column("offset"), committed)))
    assert kept(buffer) == [5, 6, 7] and buffer.rows() == 3
    buffer.trim(lambda chunk: chunk.slice(chunk.num_rows))
    assert kept(buffer) == [] and list(buffer) == []


def test_a_commit_empties_it():
    buffer = RedoBuffer(LAYOUT)
    buffer.add(rows([1]))
    buffer.clear()
    assert buffer.rows() == 0 and buffer.row(1) is None
