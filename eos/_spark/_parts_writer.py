"""P0-P2 of docs/protocol.md, on the driver: a batch without Kafka input coordinates written in parts
(`input_mode="any"`), each part once per batch id. The one engine of `eos.sink` under input_mode "any"
and of batch jobs (`eos.write`); `format("eos")` receives its rows placed already (`eos.place`) and
checks P0 in its tasks instead."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import attrs
import pyarrow as pa

from eos._core import _parts
from eos._core._arrow import Layout
from eos._core._spec import Functions
from eos._core._stats import STATS_DDL
from eos._kafka import _topics
from eos._spark._rows_to_parts import place_batch
from eos.config import Config
from eos.errors import ConfigError, NondeterministicBatchError


class PartsWriter:
    """Writes batches of one app in parts: P0 (the placement), P1 (the rows placed), P2 (one task per
    part), and the check a part no task ran for makes."""

    def __init__(self, config: Config, functions: Functions) -> None:
        self.config = config
        self.functions = functions

    def write(self, batch_df, batch_id: int, layout: Layout, columns: list[str], log: Any) -> list[dict]:
        """P0-P2 for batch `batch_id`; each part's stats row."""
        _topics.ensure_parts_topic(self.config)  # asks the broker once per process
        key = layout.key or ("key" if "key" in columns else None)  # process functions see every column
        placement = self.placement(batch_id, columns, key, log)  # P0
        placed = place_batch(batch_df, columns, key, placement)  # P1
        job = _parts.PartSpec(
            config=self.config,
            batch_id=batch_id,
            layout=layout,
            parts=placement.parts,
            functions=self.functions,
            placement=placement,
        )
        rows = placed.mapInArrow(partial(_run_parts, job), STATS_DDL).collect()  # P2
        stats = [row.asDict() for row in rows]
        ran = {s["partition"] for s in stats}
        for part in range(placement.parts or 0):
            if part not in ran:  # Spark planned no task for it (an empty DataFrame has no partitions):
                # the check its task makes on no rows, here (rare: one progress read per such part)
                stats.append(attrs.asdict(_parts.PartTask(job, part).run_empty()))
        return stats

    def placement(self, batch_id: int, columns: list[str], key: str | None, log: Any) -> _parts.RowPlacement:
        """P0: the placement of batch `batch_id`'s first run where it committed parts (a re-run places
        its rows the same way, whatever parts / part_columns say now: they apply from the next batch),
        else this config's. One that this batch cannot have is refused before any part writes."""
        config = self.config
        asked = _parts.RowPlacement.of(config, key)
        unknown = [c for c in asked.columns if c not in columns]
        if unknown:
            raise ConfigError(
                "part_columns",
                f"names {', '.join(map(repr, unknown))}, not a column of the batch's output"
                f" ({', '.join(columns)}): part_columns must name columns eos writes (after process"
                " functions' pass-through selection). Nothing of the batch was written.",
            )
        first = _parts.batch_placement(config, batch_id, log)
        if first is not None and first.by is None and first.parts is not None:
            # Recorded before placements were: eos then placed as the config says (the count aside).
            first = _parts.RowPlacement(first.parts, asked.by)
        if first is None or first == asked:
            return asked
        where = f"batch {batch_id} was first run placed {first.describe()}"
        missing = [c for c in first.columns if c not in columns] or (
            ["key"] if first.by == "key" and key is None else []
        )
        if missing:
            raise NondeterministicBatchError(
                f"{where}, and some of its parts are committed; this run's output lacks"
                f" {', '.join(map(repr, missing))}, so it cannot place the rest of the batch as its first"
                " run did. Nothing of the batch was written. Run the batch with the output it had, then"
                " change it (it applies from the next batch).",
                batch_id=batch_id,
                part=-1,
            )
        if first.parts is not None:
            _topics.ensure_parts_topic(attrs.evolve(config, parts=max(first.parts, config.parts)))
        log.warning(
            "re-run of a batch placed as its first run: the new placement applies from the next batch",
            batch_id=batch_id,
            first=first.describe(),
            configured=asked.describe(),
        )
        return first


def _run_parts(job: _parts.PartSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """P2's `mapInArrow` function: `eos._core._parts.run_parts` told the Spark partition of its task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return _parts.run_parts(job, batches, context.partitionId() if context is not None else 0)
