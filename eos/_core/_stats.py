"""A task's figures: `PartitionStats`, the one list of them. The stats row each task returns to the
driver (`mapInArrow`'s output: `STATS_SCHEMA`, `STATS_DDL`), the batch totals (`totals`) and a batch's
`BatchSummary` derive from it."""

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
    #: fresh producers a task started with: this worker kept none for the transactional.id (its first
    #: task here, or the partition's last task ran in another worker)
    producers_created: int = 0
    commit_seconds_max: float = 0.0
    commit_seconds_total: float = 0.0
    first_offset: int | None = None
    last_offset: int | None = None
    committed_before: int | None = None
    restored: int = 0
    #: stores rebuilt from a snapshot and their changelog's tail (`restored` counts the tail's records)
    snapshots_restored: int = 0
    #: store snapshots written to `state_snapshot_location`
    snapshots_taken: int = 0
    #: bad records written to the dead-letter topic (committed), on_error="dead_letter"
    dead_letters: int = 0
    #: the executor the task ran on, where eos placed it (`executor_<host>_<id>`; None: Spark did)
    executor: str | None = None
    #: 1 where the task ran on the executor eos placed it on (`task_affinity`), else 0
    placed: int = 0
    # Where the partition's time went (`STEPS`), summed by the driver into BatchSummary.steps:
    #: the whole partition, steps 1-8
    seconds: float = 0.0
    #: steps 1-4: producer, committed offset and its proof, state store
    start_seconds: float = 0.0
    #: step 2: init_transactions of a fresh producer
    init_seconds: float = 0.0
    #: step 3: the committed offset read
    offsets_seconds: float = 0.0
    #: step 2 for a kept producer: the first transaction's check that it is current
    check_seconds: float = 0.0
    #: 7b: flush and delivery reports
    flush_seconds: float = 0.0
    #: 7c: the offset sent into the transaction
    send_offsets_seconds: float = 0.0
    #: 7d: EndTxn (commit_transaction)
    end_seconds: float = 0.0


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


#: the figures of where a partition's time went, in seconds (summed over a batch by `steps`)
STEPS = (
    "seconds",
    "start_seconds",
    "init_seconds",
    "offsets_seconds",
    "check_seconds",
    "commit_seconds_total",
    "flush_seconds",
    "send_offsets_seconds",
    "end_seconds",
)


def steps(stats: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Each of STEPS summed over a batch's stats rows, in milliseconds (absent in a row: 0)."""
    return {name: round(1000 * sum(row.get(name) or 0.0 for row in stats), 1) for name in STEPS}


def totals(stats: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Each of COUNTS summed over a batch's stats rows (one per input partition, or per part); a figure
    a row lacks (a ledger an earlier eos wrote) counts 0."""
    return {name: sum(row.get(name) or 0 for row in stats) for name in COUNTS}


@attrs.frozen
class BatchSummary:
    """What one batch did, summed over its input partitions: what `on_batch` receives, `eos.write`
    returns, `Sink.history` keeps and a `MetricsListener` hands `on_progress`; logged as `batch written`.

    Fields:

    - `batch_id`: the Spark micro-batch id (0 for `eos.write`).
    - `guarantee`: the `processing_guarantee` it was written with, "exactly_once" or "at_least_once".
    - `partitions`: how many input partitions the batch's tasks wrote (with `input_mode="any"` and
      `eos.write`: how many parts).
    - `records_in`: the input records the tasks received, those skipped included.
    - `records_out`: the output records committed (dead letters are counted in `dead_letters`).
    - `skipped`: input records skipped as already committed (a batch run again after a failure).
    - `transactions`: transactions committed (at_least_once: offset commits).
    - `aborted`: transactions aborted, after an error or while finding a record a broker refused.
    - `redos`: transactions written again after an abort.
    - `producers_replaced`: producers thrown away for a fresh one during the batch (fenced by another
      writer, a transaction in doubt, a failed delivery, a kept producer no longer current).
    - `producers_created`: fresh producers the tasks started with, where their worker kept none for the
      partition's `transactional.id`.
    - `restored`: state records read back from changelog topics to rebuild stores.
    - `commit_ms_max`: the longest single commit of the batch, in milliseconds.
    - `seconds`: the batch's time on the driver from its start to its summary, in seconds (for a
      `MetricsListener`, Spark's `addBatch` duration).
    - `per_partition`: each input partition's (or part's) figures as a dict: its `topic`, `partition`,
      `transactional_id`, the counts above, `first_offset` and `last_offset`, its time figures, ...
      Left out of `as_dict()` and of the repr.
    - `regrouped`: whether the rows went through a shuffle before they were written: by topic and
      partition, sorted by offset, where Spark's partitions did not each hold one input partition in
      offset order; into parts, always, with `input_mode="any"` and `eos.write`. Always False for a
      `MetricsListener`.
    - `dead_letters`: bad records committed to the dead-letter topic (`on_error="dead_letter"`).
    - `snapshots_restored`: stores rebuilt from a snapshot (`state_snapshot_location`) and the tail of
      their changelog.
    - `snapshots_taken`: store snapshots written to `state_snapshot_location`.
    - `placed`: input partitions whose task ran on the executor eos placed it on (`task_affinity`).
    - `steps`: where the tasks' time went, in milliseconds summed over the partitions, by name:
      `seconds` (all of it), `start_seconds` (starting: producer, committed offset, state stores),
      `init_seconds` (init_transactions of fresh producers), `offsets_seconds` (reading committed
      offsets), `check_seconds` (checking a kept producer is still current), `commit_seconds_total`
      (commits), `flush_seconds` (flushes and delivery reports), `send_offsets_seconds` (the offsets sent
      into the transactions), `end_seconds` (commit_transaction).
    - `driver`: where the sink's time on the driver went, in milliseconds: `layout_ms` (checking the
      batch's columns), `topics_ms` (checking the topics and the cluster), `lineage_ms` (finding which
      Kafka partition each Spark partition read), `job_ms` (the Spark job that writes); the keys the
      batch's path took. Empty for a `MetricsListener`.
    - `data_path`: which code wrote the rows: "python" (the Python workers) or "jvm" (the executors'
      Kafka client; the `data_path` setting).
    """

    batch_id: int
    guarantee: str
    partitions: int
    records_in: int
    records_out: int
    skipped: int
    transactions: int
    aborted: int
    redos: int
    producers_replaced: int
    #: fresh producers tasks started with (no kept one in their worker for the partition)
    producers_created: int
    restored: int
    commit_ms_max: float
    seconds: float
    per_partition: tuple[dict[str, Any], ...] = attrs.field(repr=False)
    #: whether the rows went through the regrouping shuffle (D3) or were already one run per task
    regrouped: bool = True
    #: bad records written to the dead-letter topic (on_error="dead_letter")
    dead_letters: int = 0
    #: stores rebuilt from a snapshot and their changelog's tail, and snapshots written
    snapshots_restored: int = 0
    snapshots_taken: int = 0
    #: input partitions whose task ran on the executor eos placed it on (`task_affinity`, on a cluster)
    placed: int = 0
    #: where the tasks' time went, in ms summed over the batch's partitions (PartitionStats' seconds
    #: fields: `seconds` is all of it, `start_seconds` steps 1-4, ...)
    steps: dict[str, float] = attrs.field(factory=dict)
    #: where the sink's own time on the driver went, in ms: the batch's columns (D1), the topics and
    #: cluster checks (D2), the lineage (D3) and the Spark job that runs the tasks (D4)
    driver: dict[str, float] = attrs.field(factory=dict)
    #: which code wrote the batch's rows: "python" (the Python workers) or "jvm" (the executors' Kafka
    #: client: `data_path`)
    data_path: str = "python"

    def as_dict(self) -> dict[str, Any]:
        """The batch's figures as plain values (per-partition rows left out), e.g. for a metrics sink."""
        return {k: v for k, v in attrs.asdict(self).items() if k != "per_partition"}

    @classmethod
    def of(
        cls,
        batch_id: int,
        guarantee: str,
        stats: Sequence[Mapping[str, Any]],
        seconds: float,
        *,
        regrouped: bool = True,
        driver: dict[str, float] | None = None,
        data_path: str = "python",
    ) -> BatchSummary:
        """The summary of a batch from its stats rows (one per input partition, or per part)."""
        return cls(
            batch_id=batch_id,
            guarantee=guarantee,
            partitions=len(stats),
            **totals(stats),
            commit_ms_max=round(max((s["commit_seconds_max"] for s in stats), default=0.0) * 1000, 1),
            seconds=round(seconds, 3),
            per_partition=tuple(stats),
            regrouped=regrouped,
            steps=steps(stats),
            driver=driver or {},
            data_path=data_path,
        )
