"""The open transaction's input, kept for a redo (8a, 8b of docs/protocol.md): Arrow slices of the rows
written since the last commit, at most `commit_every` rows and at most one Arrow batch beyond
`commit_max_bytes`."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa

from eos._core import _arrow
from eos._core._arrow import Layout


class RedoBuffer:
    """The rows of the open transaction, in offset order; emptied by each commit."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self._chunks: list[pa.RecordBatch] = []
        #: the chunk being written, until it is added (a refusal found while writing it names its rows)
        self.writing: pa.RecordBatch | None = None

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return iter(self._chunks)

    def add(self, chunk: pa.RecordBatch) -> None:
        self._chunks.append(chunk)
        self.writing = None

    def clear(self) -> None:
        self._chunks = []
        self.writing = None

    def rows(self) -> int:
        return sum(chunk.num_rows for chunk in self._chunks)

    def row(self, offset: int) -> pa.RecordBatch | None:
        """The kept row of input offset `offset` (or of the chunk being written), if any."""
        chunks = self._chunks if self.writing is None else [*self._chunks, self.writing]
        for chunk in chunks:
            offsets = chunk.column(self.layout.offset)
            if offsets[0].as_py() <= offset <= offsets[len(offsets) - 1].as_py():
                index = _arrow.index_of(offsets, offset)
                if index is not None:
                    return chunk.slice(index, 1)
        return None

    def trim(self, skip: Callable[[pa.RecordBatch], pa.RecordBatch]) -> None:
        """Drop what `skip` says is committed (a new incarnation found the committed offset moved)."""
        self._chunks = [chunk for chunk in map(skip, self._chunks) if chunk.num_rows]
