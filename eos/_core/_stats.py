"""A task's figures: `PartitionStats`, the one list of them. The stats row each task returns to the
driver (`mapInArrow`'s output: `STATS_SCHEMA`, `STATS_DDL`) and the batch totals (`totals`) derive from it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import pyarrow as pa


@attrs.define
class PartitionStats:
    topic: str
    partition: int
    transactional_id: str | None
    records_in: int = 0
    skipped: int = 0
    records_out: int = 0
    transactions: int = 0
    aborted: int = 0
    redos: int = 0
    producers_replaced: int = 0
    commit_seconds_max: float = 0.0
    commit_seconds_total: float = 0.0
    first_offset: int | None = None
    last_offset: int | None = None
    committed_before: int | None = None
    restored: int = 0
    #: bad records written to the dead-letter topic (committed), on_error="dead_letter"
    dead_letters: int = 0


#: The one row per input partition that each task returns to the driver (`mapInArrow`'s output): the
#: fields of PartitionStats, a Kafka partition number as Spark's int, every other int as bigint.
_SQL_TYPES = {
    "str": ("string", pa.string()),
    "int": ("bigint", pa.int64()),
    "float": ("double", pa.float64()),
}
_STATS_COLUMNS = {
    f.name: ("int", pa.int32()) if f.name == "partition" else _SQL_TYPES[f.type.removesuffix(" | None")]
    for f in attrs.fields(PartitionStats)
}
#: the figures that add up over a batch's partitions: PartitionStats' counts (its ints that start at 0)
COUNTS = tuple(f.name for f in attrs.fields(PartitionStats) if f.type == "int" and f.default == 0)
STATS_SCHEMA = pa.schema([(name, arrow) for name, (_, arrow) in _STATS_COLUMNS.items()])
STATS_DDL = ", ".join(f"{name} {sql}" for name, (sql, _) in _STATS_COLUMNS.items())


def totals(stats: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Each of COUNTS summed over a batch's stats rows (one per input partition, or per part)."""
    return {name: sum(row[name] for row in stats) for name in COUNTS}
