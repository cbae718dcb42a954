"""Driver side: the `foreachBatch` function.

Per micro-batch, `Sink.__call__` runs D1-D5 of docs/protocol.md:
    D1. checks the batch's columns (before any transaction begins);
    D2. checks that a broker answers and the configured output topic exists (and, once, that
       transaction_timeout_ms is within the broker's transaction.max.timeout.ms);
    D3. decides what the tasks check each row's input coordinates against (`eos._core._input`): the Kafka
       range of the Spark partition it was read in, from the batch's lineage (`_partitioning`, classic
       Spark), else the `eos_input` column (Spark Connect), and groups the rows so that each input
       topic-partition is one run in offset order in one Spark task: nothing to do where the Kafka source
       already gave each topic-partition its own Spark partition, else a shuffle by (topic, partition)
       and a sort by offset, e.g. where the source split them (minPartitions / maxRecordsPerPartition);
       under Spark Connect (no lineage) the batch as it is, checked by step 3a, regrouped once that
       check fails it;
    D4. runs `eos._core._task.run_partition` on the executors through `mapInArrow` (Arrow record batches, no
       RDD API, so Spark Connect runs it too) and collects one small stats row per input partition;
    D5. logs a batch summary, keeps it in `Sink.history` and hands it to `on_batch`.

With `input_mode="any"` (rows without Kafka input coordinates) D3-D4 are P1-P2 of `eos._core._parts`: the
rows are placed in parts, each written once per batch id.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any

import attrs
import pyarrow as pa

from eos._core import _parts
from eos._core._arrow import Layout
from eos._core._input import READ_IN_COLUMN, Provenance
from eos._core._spec import OnCommit, Process, ProcessBatch, TaskSpec
from eos._core._stats import STATS_DDL, BatchSummary
from eos._core._task import run_partition
from eos._kafka import _producer
from eos._log import get_logger
from eos._spark import _jvm_writer, _metrics, _partitioning
from eos._spark._affinity import Affinity, executor_of_task
from eos._spark._parts_writer import PartsWriter
from eos._spark._preflight import (
    Preflight,
    functions,
    input_provenance,
    task_slots,
)
from eos.config import Config
from eos.errors import EosError, InputOrderError
from eos.state import StoreSpec

OnBatch = Callable[["BatchSummary"], None]


#: How many batch summaries a sink keeps by default (the most recent ones).
HISTORY_SIZE = 1_000


class Sink:
    """The `foreachBatch` function that writes each micro-batch exactly once (or at least once):
    `df.writeStream.foreachBatch(eos.sink(config))`.

    `process(row, state)` runs per input row; `process_batch(batch, state)` per Arrow record batch of
    one input partition, returning Arrow with the output columns. `stores` names the state stores they
    may use, each with its StoreSpec (or a value serde name). `on_commit(eos.Commit)` is called on the
    executor after each commit of an input topic-partition; `on_batch(eos.BatchSummary)` on the driver
    (the Connect server under Spark Connect) after each batch. `history_size`: how many recent batch
    summaries `history` keeps (a query runs for months: its driver must not keep them all).

    Under Spark Connect the server runs a pickled copy of the sink: `history` is kept there, so read
    the figures through `on_batch` (or the `batch written` log event) instead.

    Parameters:

    - `config`: the `eos.Config` the sink writes with: brokers, app id, output topic, guarantee and
      every other setting.
    - `process`: a function `process(row, state)` called once per input row, returning what to write
      for it: None (nothing), an `eos.Output`, a mapping with `Output`'s field names, a `bytes` or `str`
      value, or an iterable of these. `row` has the batch's columns (`row.value`, `row["key"]`,
      `row.asDict()`); `state` is an `eos.State`. None (the default): each row is itself the output, its
      `value`, `key` and `headers` columns written as Spark's Kafka sink writes them.
    - `stores`: the state stores `process` or `process_batch` may use, by name: each an
      `eos.StoreSpec`, or a value serde name ("json", "str", "bytes") for a StoreSpec with a str key.
      A name is 1-100 letters, digits, `.`, `_` or `-` (it names the store's changelog topic and
      files). Needs a function; not available with `input_mode="any"`.
    - `on_commit`: called with an `eos.Commit` on the executor after each committed transaction (under
      at_least_once, each offset commit) of an input topic-partition. None: nothing is called.
    - `process_batch`: instead of `process` (not both), a function `process_batch(batch, state)`
      called per `pyarrow.RecordBatch` of one input partition's rows, returning a pyarrow RecordBatch
      or Table whose columns are `Output`'s fields (`value` required; `key`, `headers`, `topic`,
      `partition`, `timestamp`), or None for no output.
    - `on_batch`: called with the batch's `eos.BatchSummary` on the driver (the Connect server under
      Spark Connect) after each batch is written. None: nothing is called.
    - `history_size`: how many of the most recent batch summaries `history` keeps, a positive integer
      (default 1000).
    """

    def __init__(
        self,
        config: Config,
        process: Process | None = None,
        stores: Mapping[str, StoreSpec | str] | None = None,
        on_commit: OnCommit | None = None,
        *,
        process_batch: ProcessBatch | None = None,
        on_batch: OnBatch | None = None,
        history_size: int = HISTORY_SIZE,
    ) -> None:
        if isinstance(history_size, bool) or not isinstance(history_size, int) or history_size < 1:
            raise ValueError(f"history_size must be a positive integer, got {history_size!r}")
        self.config = config
        self.functions = functions(process, process_batch, stores, on_commit)
        self.on_batch = on_batch
        _jvm_writer.require_eligible(config, self.functions)
        self.preflight = Preflight(config, self.functions)
        self._parts = PartsWriter(config, self.functions)
        self.history_size = history_size
        self._metrics = False  # whether this process records the sink's metrics (`metrics_port`)
        self._lags = _metrics.Lags()  # the input partitions of the query's run, for the lag figure
        #: whether batches without lineage (Spark Connect) are regrouped: from the first whose tasks found
        #: an input partition's records they did not hold (step 3a) on
        self._regroup_unseen = False
        self._affinity = Affinity()  # where each input partition's task ran last (D3)
        #: whether pass-through batches go through the JVM writer (`data_path`), decided at the first batch
        self._jvm: bool | None = None
        self.history: deque[BatchSummary] = deque(maxlen=history_size)
        self.log = get_logger("eos.sink", app_id=config.app_id, guarantee=config.processing_guarantee)

    def __getstate__(self) -> dict[str, Any]:
        # Spark Connect pickles the sink to run it on the server: the logger holds a stream.
        return {k: v for k, v in self.__dict__.items() if k not in ("log", "history")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.history = deque(maxlen=state["history_size"])
        self.log = get_logger(
            "eos.sink", app_id=self.config.app_id, guarantee=self.config.processing_guarantee
        )

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
        layout, columns = self.preflight.columns(batch_df.dtypes)  # 1
        driver = {"layout_ms": ms_since(started)}  # BatchSummary.driver
        mark = time.monotonic()
        self.preflight.topics(self.log)  # 2
        if self.config.metrics_port is not None and not self._metrics:
            _metrics.enable(
                self.config.metrics_port
            )  # where the sink runs (the Connect server under Spark Connect)
            self._metrics = True
        driver["topics_ms"] = ms_since(mark)
        if self.config.input_mode == "any":
            self._write_parts(batch_df, batch_id, layout, columns, started, driver)
            return
        if self._jvm is None:
            self._jvm = _jvm_writer.decide(self.config, self.functions, batch_df.sparkSession, self.log)
        mark = time.monotonic()
        if self._jvm and not (self.config.task_affinity and self._affinity.may_place(batch_df.sparkSession)):
            stats, lineage = self._write_with_lineage(batch_df, batch_id, layout, columns)  # 3-4 in one call
            if stats is not None:
                driver["job_ms"] = ms_since(mark)
                summary = self._summarize(batch_id, stats, time.monotonic() - started, False, driver)
                self._record(attrs.evolve(summary, data_path="jvm"))  # 5
                return
        else:
            lineage = _partitioning.lineage(batch_df, server=self._jvm)
        provenance, regrouped = input_provenance(lineage, batch_df.dtypes)  # 3
        driver["lineage_ms"] = ms_since(mark)
        mark = time.monotonic()
        stats = None
        jvm = self._jvm and provenance.partitions is not None
        if lineage is None and not self._regroup_unseen:  # Spark Connect
            stats = self._write_as_read(batch_df, batch_id, layout, columns, provenance)
        if stats is None:
            stats = self._write(batch_df, batch_id, layout, columns, provenance, regroup=regrouped, jvm=jvm)
        else:
            regrouped = False
        driver["job_ms"] = ms_since(mark)
        summary = self._summarize(batch_id, stats, time.monotonic() - started, regrouped, driver)
        self._record(attrs.evolve(summary, data_path="jvm" if jvm else "python"))  # 5

    def _write_with_lineage(
        self, batch_df, batch_id: int, layout: Layout, columns: list[str]
    ) -> tuple[list[dict[str, Any]] | None, _partitioning.Lineage | None]:
        """D3-D4 on the JVM path where no task placement needs the lineage first: the JVM writer reads
        it from the plan its tasks run and, where each Spark partition read one input partition that no
        other read, writes the batch in the same call (its stats rows); else the lineage, and nothing is
        written."""
        types = dict(batch_df.dtypes)
        written = [(name, types[name]) for name in columns]
        stats, lineage = _jvm_writer.write_with_lineage(batch_df, written, self.config, batch_id, layout)
        if stats is not None:
            self._affinity.ran(stats)
        return stats, lineage

    def _write_as_read(
        self, batch_df, batch_id: int, layout: Layout, columns: list[str], provenance: Provenance
    ) -> list[dict[str, Any]] | None:
        """D3-D4 for a batch without lineage: written as the Kafka source read it, each task proving by
        step 3a that it holds all of its input partition (and failing where nothing is committed to
        prove it from); None where a task refused, and from then on the sink regroups."""
        try:
            return self._write(batch_df, batch_id, layout, columns, provenance, regroup=False, prove=True)
        except Exception as exc:
            refusal = raised_in_task(exc, InputOrderError)
            if refusal is None:
                raise
            self._regroup_unseen = True
            self.log.warning(
                "batch regrouped",
                batch_id=batch_id,
                detail="a task did not hold all of an input partition's records between two of its"
                " rows or before its first (a filter, a shuffle, a split source, or nothing committed"
                " yet): this batch and the query's next ones are regrouped (shuffle and sort)",
                error=refusal,
            )
            return None

    def _write(
        self,
        batch_df,
        batch_id: int,
        layout: Layout,
        columns: list[str],
        provenance: Provenance,
        regroup: bool,
        prove: bool = False,
        jvm: bool = False,
    ) -> list[dict[str, Any]]:
        """D3-D4: the batch's rows, grouped (`regroup`: by a shuffle and a sort), written by the tasks;
        their stats rows. `prove`: the tasks run step 3a, and a partition with nothing committed fails.
        `jvm`: the tasks are the JVM writer's (`_jvm_writer`), not Python's (never with `prove`)."""
        plan = None
        if not regroup and self.config.task_affinity and provenance.partitions is not None:
            tps = [(r.topic, r.partition) for r in provenance.partitions]
            plan = self._affinity.plan(batch_df.sparkSession, tps, self.log)
        # the JVM's tasks cost no Python worker hand-off: one per Spark partition, as the source read them
        tasks = None if regroup or plan is not None or jvm else task_slots(batch_df, provenance)
        if tasks is not None or plan is not None:
            provenance = attrs.evolve(provenance, read_in=READ_IN_COLUMN)
        if provenance.column is not None and provenance.column not in columns:
            columns = [*columns, provenance.column]
        selected = batch_df
        if not jvm or provenance.read_in is not None or regroup:  # else the JVM writer selects them itself
            selected = selected.select(*columns)
        if provenance.read_in is not None:  # evaluated where the rows are read, before the shuffle
            selected = selected.selectExpr("*", f"spark_partition_id() AS {provenance.read_in}")
        if plan is not None:
            selected = self._affinity.apply(plan, selected, self.log)
        elif tasks is not None:
            selected = selected.coalesce(tasks)
        if regroup:
            selected = selected.repartition("topic", "partition").sortWithinPartitions(
                "topic", "partition", "offset"
            )
        if jvm:
            types = dict(batch_df.dtypes)
            written = [(name, types[name]) for name in columns]
            if provenance.read_in is not None:
                written.append((provenance.read_in, "int"))
            stats = _jvm_writer.write(selected, written, self.config, batch_id, layout, provenance)  # 4
            self._affinity.ran(stats)
            return stats
        job = TaskSpec(
            config=self.config,
            batch_id=batch_id,
            layout=layout,
            functions=self.functions,
            provenance=provenance,
            check_input=prove,
            start_known=prove,
        )
        try:
            rows = selected.mapInArrow(partial(_run_partition, job), STATS_DDL).collect()  # 4
        except Exception:
            self._fence(provenance)
            raise
        stats = [row.asDict() for row in rows]
        self._affinity.ran(stats)
        return stats

    def _fence(self, provenance: Provenance) -> None:
        """D4 failed: a task Spark cancelled had its Python worker killed, its transaction left open;
        each input partition of the batch is fenced, which aborts it (exactly_once; the JVM writer's
        tasks abort their own). Under Spark Connect without the batch's ranges, nothing is known to fence."""
        ranges = provenance.partitions or provenance.ranges
        if self.config.exactly_once and ranges:
            tps = sorted({(r.topic, r.partition) for r in ranges})
            _producer.fence(self.config, tps, self.log)
            self.log.info("batch failed: open transactions fenced", partitions=len(tps))

    def _write_parts(
        self,
        batch_df,
        batch_id: int,
        layout: Layout,
        columns: list[str],
        started: float,
        driver: dict[str, float],
    ) -> None:
        """input_mode "any": P0-P3 of docs/protocol.md (`eos._spark._parts_writer`)."""
        stats = self._parts.write(batch_df, batch_id, layout, columns, self.log)  # P0-P2
        seconds = time.monotonic() - started
        self._record(self._summarize(batch_id, stats, seconds, regrouped=True, driver=driver))  # P3

    def _placement(self, batch_id: int, columns: list[str], key: str | None) -> _parts.RowPlacement:
        """P0 (`PartsWriter.placement`)."""
        return self._parts.placement(batch_id, columns, key, self.log)

    def _record(self, summary: BatchSummary) -> None:
        self.history.append(summary)  # a bounded deque: the oldest summary goes
        announce(self.config, summary, self.log, self._lags if self._metrics else None)
        if self.on_batch is not None:
            self.on_batch(summary)

    def _summarize(
        self,
        batch_id: int,
        stats: list[dict[str, Any]],
        seconds: float,
        regrouped: bool = True,
        driver: dict[str, float] | None = None,
    ) -> BatchSummary:
        return BatchSummary.of(
            batch_id, self.config.processing_guarantee, stats, seconds, regrouped=regrouped, driver=driver
        )


def announce(config: Config, summary: BatchSummary, log: Any, lags: _metrics.Lags | None) -> None:
    """D5 (P3): a written batch's summary logged, and recorded in the metrics where this process serves
    them (`lags`: the query's input partitions, for the lag figure)."""
    if lags is not None:
        _metrics.record(config, summary, lags=lags, log=log)
    shown = {k: v for k, v in summary.as_dict().items() if k not in ("steps", "driver")}
    log.info("batch written", **shown)


def ms_since(mark: float) -> float:
    return round(1000 * (time.monotonic() - mark), 1)


def raised_in_task(exc: BaseException, error: type[EosError]) -> str | None:
    """The message of the `error` a Spark task failed with, where `exc` is what reached the driver (or
    the Connect server) for it, else None. Spark hands a task's exception over as text: a PythonException
    (classic and Connect alike) whose message is the worker's traceback, which ends in Python's own line
    for the exception, its class's full name first (`eos.errors.InputOrderError: input partition ...`).
    That line is what is matched, not the name anywhere in the text: an error whose message only
    mentions the class (a ProcessError quoting the user's exception) is not it. `exc` itself counts
    where it was raised in this process."""
    if isinstance(exc, error):
        return str(exc)
    name = f"{error.__module__}.{error.__qualname__}"
    lines = re.findall(rf"^[ \t]*{re.escape(name)}: (.*)$", str(exc), re.MULTILINE)
    return f"{name}: {lines[-1]}" if lines else None


#: `df.writeStream.foreachBatch(eos.sink(config, ...))`: the name a pipeline calls (see `Sink`).
sink = Sink


def _run_partition(job: TaskSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """D4's `mapInArrow` function, on the executors: `eos._core._task.run_partition` told the Spark partition
    its task read."""
    from pyspark import TaskContext

    context = TaskContext.get()
    task_partition = context.partitionId() if context is not None else -1
    return run_partition(job, batches, task_partition, executor_of_task(context))
