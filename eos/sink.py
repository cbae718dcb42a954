"""Driver side: the `foreachBatch` function.

Per micro-batch, `Sink.__call__`:
    1. checks the batch's columns (before any transaction begins);
    2. checks that a broker answers and the configured output topic exists;
    3. groups the rows so that each input topic-partition is one sorted run in one Spark task: a sort
       within partitions where the Kafka source already gave each topic-partition its own Spark
       partition (`_partitioning`), else a shuffle by (topic, partition) first, e.g. where the source
       split them (minPartitions / maxRecordsPerPartition);
    4. runs `eos._task.run_partition` on the executors and collects one small stats row per partition;
    5. logs a batch summary and keeps it in `Sink.history`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from functools import partial
from typing import Any

import attrs

from eos import _offsets, _partitioning
from eos._log import get_logger
from eos._task import Layout, OnCommit, Process, run_partition
from eos.config import Config
from eos.errors import BatchSchemaError
from eos.state import StoreSpec

_INPUT = {"topic": ("string",), "partition": ("int",), "offset": ("bigint", "int")}
_BYTES = ("binary", "string")
_HEADERS = "array<struct<key:string,value:binary>>"


@attrs.frozen
class BatchSummary:
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
    restored: int
    commit_ms_max: float
    seconds: float
    per_partition: tuple[dict[str, Any], ...] = attrs.field(repr=False)
    #: whether the rows went through the regrouping shuffle (step 3) or were already one run per task
    regrouped: bool = True

    def as_dict(self) -> dict[str, Any]:
        """The batch's figures as plain values (per-partition rows left out), e.g. for a metrics sink."""
        return {k: v for k, v in attrs.asdict(self).items() if k != "per_partition"}


class Sink:
    """`df.writeStream.foreachBatch(eos.sink(config))`. Keeps the summaries of the batches it wrote."""

    def __init__(
        self,
        config: Config,
        process: Process | None = None,
        stores: Mapping[str, StoreSpec | str] | None = None,
        on_commit: OnCommit | None = None,
    ) -> None:
        self.config = config
        self.process = process
        self.on_commit = on_commit
        self.stores = {
            name: spec if isinstance(spec, StoreSpec) else StoreSpec(value_serde=spec)
            for name, spec in (stores or {}).items()
        }
        if self.stores and process is None:
            raise ValueError("state stores are used by a process function: pass process= as well")
        self.history: list[BatchSummary] = []
        self.log = get_logger(app_id=config.app_id, guarantee=config.processing_guarantee)

    @property
    def last(self) -> BatchSummary | None:
        return self.history[-1] if self.history else None

    def summary(self, batch_id: int) -> BatchSummary | None:
        """The summary of a batch, for a StreamingQueryListener: `event.progress.batchId` names it."""
        for summary in reversed(self.history):
            if summary.batch_id == batch_id:
                return summary
        return None

    def __call__(self, batch_df, batch_id: int) -> None:
        started = time.monotonic()
        layout, columns = self._layout(batch_df)  # 1
        self._check_topics()  # 2
        selected = batch_df.select(*columns)
        regrouped = not _partitioning.one_topic_partition_per_task(selected)  # 3
        if regrouped:
            selected = selected.repartition("topic", "partition")
        grouped = selected.sortWithinPartitions("topic", "partition", "offset")
        task = partial(
            run_partition,
            self.config,
            batch_id,
            layout,
            self.process,
            stores=self.stores,
            on_commit=self.on_commit,
        )
        stats = grouped.rdd.mapPartitions(task).collect()  # 4
        summary = self._summarize(batch_id, stats, time.monotonic() - started, regrouped)  # 5
        self.history.append(summary)
        self.log.info("batch written", **summary.as_dict())

    def _layout(self, df) -> tuple[Layout, list[str]]:
        """Check the batch's columns; return where each one sits in the rows the tasks receive."""
        types = dict(df.dtypes)
        config = self.config

        def check(name: str, allowed: tuple[str, ...], why: str) -> str:
            if name not in types:
                raise BatchSchemaError(
                    f"batch has no {name!r} column ({why}); columns are {df.columns}. Nothing was written."
                )
            if types[name] not in allowed:
                raise BatchSchemaError(
                    f"column {name!r} has type {types[name]}, expected {' or '.join(allowed)}."
                    " Nothing was written."
                )
            return name

        why = "the input coordinate from the Kafka source; keep it in the batch"
        for name, allowed in _INPUT.items():
            check(name, allowed, why)
        if config.output_topic_column is not None:
            check(config.output_topic_column, ("string",), "named by output_topic_column")
        if config.output_partition_column is not None:
            check(config.output_partition_column, ("int",), "named by output_partition_column")
        if self.process is not None:
            # `process` sees whole rows; eos reads only the input coordinates from them.
            columns = list(df.columns)
            out_topic, out_partition = config.output_topic_column, config.output_partition_column
            layout = Layout(
                *(columns.index(c) for c in _INPUT),
                out_topic=columns.index(out_topic) if out_topic else None,
                out_partition=columns.index(out_partition) if out_partition else None,
            )
            return layout, columns

        check("value", _BYTES, "the output record's value, as in Spark's Kafka sink")
        columns = [*_INPUT, "value"]
        for name, allowed in (("key", _BYTES), ("headers", (_HEADERS,))):
            if name in types:
                columns.append(check(name, allowed, ""))
        for name in (config.output_topic_column, config.output_partition_column):
            if name is not None:
                columns.append(name)

        def at(name: str | None) -> int | None:
            return columns.index(name) if name is not None and name in columns else None

        layout = Layout(
            topic=0,
            partition=1,
            offset=2,
            value=3,
            key=at("key"),
            headers=at("headers"),
            out_topic=at(config.output_topic_column),
            out_partition=at(config.output_partition_column),
        )
        return layout, columns

    def _check_topics(self) -> None:
        _offsets.require_topics(
            self.config, [self.config.output_topic] if self.config.output_topic else [], "output"
        )

    def _summarize(
        self, batch_id: int, stats: list[dict[str, Any]], seconds: float, regrouped: bool = True
    ) -> BatchSummary:
        def total(key: str) -> int:
            return sum(s[key] for s in stats)

        return BatchSummary(
            batch_id=batch_id,
            guarantee=self.config.processing_guarantee,
            partitions=len(stats),
            records_in=total("records_in"),
            records_out=total("records_out"),
            skipped=total("skipped"),
            transactions=total("transactions"),
            aborted=total("aborted"),
            redos=total("redos"),
            producers_replaced=total("producers_replaced"),
            restored=total("restored"),
            commit_ms_max=round(max((s["commit_seconds_max"] for s in stats), default=0.0) * 1000, 1),
            seconds=round(seconds, 3),
            per_partition=tuple(stats),
            regrouped=regrouped,
        )


def sink(
    config: Config,
    process: Process | None = None,
    stores: Mapping[str, StoreSpec | str] | None = None,
    on_commit: OnCommit | None = None,
) -> Sink:
    """The `foreachBatch` function that writes each micro-batch exactly once (or at least once).

    `stores` names the state stores `process` may use, each with its StoreSpec (or a value serde name).
    `on_commit(eos.Commit)` is called on the executor after each commit of an input topic-partition.
    """
    return Sink(config, process, stores, on_commit)
