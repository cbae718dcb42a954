"""`eos.MetricsListener`: the figures of `format("eos")` and `eos.foreach_writer` queries, in the driver
process, beside each batch's `StreamingQueryProgress`.

`foreachBatch(eos.sink(config))` has the batch in the driver (its `metrics_port`, `on_batch`); these two
write and commit in Spark's workers, so their figures travel another way:

- `format("eos")`: the commit (S3, a Python worker on the driver's host) writes each batch's
  per-partition figures to the query's ledger and announces the ledger's location for the query id
  (`_ledger.announce`); on the query's progress the listener reads the batches since the last one it
  counted.
- `foreach_writer`: each task adds its partition's figures to a Spark accumulator (`figures_of`),
  which Spark merges into the driver as tasks end (classic Spark only: Spark Connect has no
  accumulators); the listener counts what grew since the query's last progress.

The listener counts them into the Prometheus families of `_metrics` (served on its port) and hands
`on_progress(progress, summary)` Spark's progress with the batch's `BatchSummary`. The input lag is the
source's `latestOffset` of the progress minus the offset eos committed. Spark 4.0 gives a Python sink no
way to put figures into the progress itself (docs/guide/observability.md).
"""

from __future__ import annotations

import ast
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

import attrs
from pyspark.accumulators import AccumulatorParam
from pyspark.sql.streaming import StreamingQueryListener

from eos._core._stats import COUNTS, STEPS, BatchSummary
from eos._log import get_logger
from eos._spark import _ledger, _metrics
from eos.config import Config, port_number
from eos.errors import ConfigError

OnProgress = Callable[[Any, BatchSummary], None]

#: a partition's figures that only grow, summed as tasks add them (the rest: `_merge`)
_SUMMED = (*COUNTS, *STEPS)


def _merge(into: Mapping[str, Any], figures: Mapping[str, Any]) -> dict[str, Any]:
    """A partition's figures of one epoch with one more task's added (a new dict: the accumulator's
    value is read by the listener's thread while Spark's accumulator server merges into it)."""
    merged = dict(into)
    for name in _SUMMED:
        merged[name] = into.get(name, 0) + (figures.get(name) or 0)
    merged["commit_seconds_max"] = max(
        into.get("commit_seconds_max", 0.0), figures.get("commit_seconds_max") or 0.0
    )
    offsets = [o for o in (into.get("last_offset"), figures.get("last_offset")) if o is not None]
    merged["last_offset"] = max(offsets) if offsets else None
    for name in ("transactional_id", "guarantee"):
        merged[name] = figures.get(name) or into.get(name)
    return merged


class Figures(AccumulatorParam):
    """foreach_writer's accumulator: {(query id, app id, topic, partition, epoch): the figures of the
    partition's tasks of that epoch}. Spark merges a task's into the driver's as the task ends, before
    the epoch's progress; the listener takes an epoch's entries out when it counts them."""

    def zero(self, value):
        return {}

    def addInPlace(self, value1, value2):  # noqa: N802 - PySpark's name
        for key, figures in value2.items():
            value1[key] = _merge(value1.get(key, {}), figures)
        return value1


_lock = threading.Lock()
_accumulator: list[Any] = []  # the process's foreach_writer accumulator, with the SparkContext it is of
_listening: dict[tuple[int, int], MetricsListener] = {}  # (id of a session, port): its listener


def figures_of(config: Config):
    """The accumulator a foreach_writer with `metrics_port` adds its figures to, in the active classic
    session of this process (the one that starts the query), whose listener serves them on the port."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    context = SparkContext._active_spark_context
    session = SparkSession.getActiveSession()
    if context is None or session is None:
        raise ConfigError(
            "metrics_port",
            "foreach_writer's figures reach the driver through a Spark accumulator: create the writer in"
            " the driver of a classic Spark session (Spark Connect has no accumulators). Under Spark"
            ' Connect, format("eos") with eos.register(spark, metrics_port=...) or'
            " foreachBatch(eos.sink(config)) serve them",
        )
    with _lock:
        if not _accumulator or _accumulator[1] is not context:
            _accumulator[:] = [context.accumulator({}, Figures()), context]
        accumulator = _accumulator[0]
    listen(session, config.metrics_port)
    return accumulator


def listen(session, port: int) -> MetricsListener:
    """The MetricsListener serving `port` (`metrics_port`) for `session`, added to it on the first call
    (a port that cannot be served fails here, and a later call tries again)."""
    key = (id(session), port_number(port, "metrics_port"))
    with _lock:
        listener = _listening.get(key)
    if listener is None:
        listener = MetricsListener(port, field="metrics_port")
        # outside _lock: a Spark Connect session's listener bus holds its own lock while it calls
        # listeners, which take _lock
        session.streams.addListener(listener)
        with _lock:
            listener = _listening.setdefault(key, listener)
    return listener


@attrs.define
class _Run:
    """What this process counted of one query: its app, the last batch (and its summary), and the
    input offset eos committed for each partition."""

    app: str | None = None
    guarantee: str | None = None
    last_batch: int | None = None
    last: BatchSummary | None = None
    committed: dict[tuple[str, int], int] = attrs.field(factory=dict)
    warned: bool = False  # that the query keeps no ledger


#: per query id: what this process counted (shared by its listeners: a batch is counted once)
_runs: dict[str, _Run] = {}


class MetricsListener(StreamingQueryListener):
    """A StreamingQueryListener for `format("eos")` and `eos.foreach_writer` queries: each batch's figures
    into eos's Prometheus metrics, served on `port` from this process (0: recorded in prometheus_client's
    registry, not served; a port that cannot be served fails here), and `on_progress(progress, summary)`
    with Spark's StreamingQueryProgress and eos's BatchSummary of the batch.
    `spark.streams.addListener(eos.MetricsListener(9108))`.

    Queries of `foreachBatch(eos.sink(config))` are left to the sink (its `metrics_port`, `on_batch`).

    Parameters:

    - `port`: the port to serve the metrics on, 0-65535; default 0: recorded in prometheus_client's
      registry, not served. Needs prometheus_client (`pip install 'eos-spark[metrics]'`).
    - `on_progress`: called with Spark's StreamingQueryProgress and eos's `BatchSummary` of each batch of
      an eos query; an exception it raises is logged, not raised. None (the default): nothing is called.
    - `field`: the setting a ConfigError about the port names, default "port"; eos gives "metrics_port"
      where that setting created the listener.
    """

    def __init__(self, port: int = 0, on_progress: OnProgress | None = None, *, field: str = "port") -> None:
        self.port = port_number(port, field)
        self.on_progress = on_progress
        self._field = field
        _metrics.enable(self.port, field)

    def onQueryStarted(self, event) -> None:  # noqa: N802 - Spark's names
        pass

    def onQueryIdle(self, event) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event) -> None:  # noqa: N802
        try:
            ended(str(event.id))
        except Exception as exc:  # noqa: BLE001 - a listener must not fail Spark's listener bus
            get_logger("eos.sink").warning("metrics not recorded", query_id=str(event.id), error=repr(exc))

    def onQueryProgress(self, event) -> None:  # noqa: N802
        progress = event.progress
        try:
            _metrics.enable(self.port, self._field)  # a listener unpickled in another process
            found = counted(progress)
        except Exception as exc:  # noqa: BLE001 - a listener must not fail Spark's listener bus
            get_logger("eos.sink").warning(
                "metrics not recorded",
                query_id=str(progress.id),
                batch_id=progress.batchId,
                error=f"{type(exc).__name__}: {exc}",
            )
            return
        if found is not None and self.on_progress is not None:
            try:
                self.on_progress(progress, found)
            except Exception as exc:  # noqa: BLE001
                get_logger("eos.sink").warning(
                    "on_progress failed",
                    query_id=str(progress.id),
                    batch_id=progress.batchId,
                    error=f"{type(exc).__name__}: {exc}",
                )


def counted(progress) -> BatchSummary | None:
    """The summary of `progress`'s batch (and of the query's batches since its last progress, which
    Spark's listener bus may have dropped), counted into the metrics the first time a listener of this
    process asks; None for a query that is not eos's format("eos") or foreach_writer."""
    query = str(progress.id)
    with _lock:
        run = _runs.setdefault(query, _Run())
        if run.last is not None and run.last_batch == progress.batchId:
            return run.last
        found = _from_ledger(query, progress, run) or _from_accumulator(query, progress.batchId, run)
        if found is None:
            return None
        app, batches, stats, guarantee, data_path = found
        summary = BatchSummary.of(
            progress.batchId, guarantee, stats, _seconds(progress), regrouped=False, data_path=data_path
        )
        run.app, run.guarantee, run.last_batch, run.last = app, guarantee, progress.batchId, summary
        _count(query, run, summary, batches, _latest_offsets(progress))
        return summary


def ended(query: str) -> None:
    """Query `query` ended: what its foreach_writer tasks added since its last progress is counted (the
    tasks of a failed epoch that did commit), its lag gauges go, and its records are dropped."""
    with _lock:
        run = _runs.pop(query, None)
        _ledger.forget(query)
        if run is None:
            run = _Run()
        found = _from_accumulator(query, None, run)
        if found is not None:
            run.app = found[0]
            summary = BatchSummary.of(run.last_batch or 0, found[3], found[2], 0.0, regrouped=False)
            _count(query, run, summary, 0, {})
        if run.app is not None:
            _metrics.show_lags(run.app, {}, owner=query)


def _count(query: str, run: _Run, summary: BatchSummary, batches: int, latest: Mapping) -> None:
    _metrics.count(run.app, summary, batches)
    for stats in summary.per_partition:
        committed = _metrics.next_offset(stats)
        if committed is not None:
            run.committed[(stats["topic"], stats["partition"])] = committed
    if latest:
        lags = {tp: max(latest[tp] - offset, 0) for tp, offset in run.committed.items() if tp in latest}
        _metrics.show_lags(run.app, lags, owner=query)


def _from_ledger(query: str, progress, run: _Run):
    """format("eos"): every attempt of the ledger's batches after the last counted, up to the
    progress's (a failed attempt's tasks that succeeded committed their transactions; a re-run skips
    what they wrote). (app, batches, stats rows, guarantee, data path), or None."""
    location = _ledger.announced(query)
    batch_id = progress.batchId
    if location == "" and not run.warned:
        run.warned = True
        get_logger("eos.sink").warning(
            "metrics not recorded",
            query_id=query,
            detail='this format("eos") query keeps no ledger, where its figures would be: give it a'
            " checkpointLocation option or eos.ledger.dir",
        )
    if not location or (run.last_batch is not None and batch_id <= run.last_batch):
        return None
    first = batch_id if run.last_batch is None else run.last_batch + 1
    stats: list[dict[str, Any]] = []
    app = guarantee = None
    data_path = "python"
    batches = 0
    for entry in _ledger.read_batches(location, list(range(first, batch_id + 1))):
        # another query's attempts where two share an eos.ledger.dir (attempts without one: an earlier eos)
        attempts = [a for a in entry["attempts"] if a.get("query") in (None, query)]
        if not attempts:
            continue
        batches += 1
        app, guarantee = attempts[-1]["app_id"], attempts[-1]["guarantee"]
        data_path = attempts[-1].get("data_path", "python")  # "jvm": eos.DefaultSource's route
        for attempt in attempts:
            stats.extend(attempt["partitions"])
    if app is None:
        return None
    return app, batches, stats, guarantee, data_path


def _from_accumulator(query: str, batch_id: int | None, run: _Run):
    """foreach_writer: the figures its tasks added for epochs up to `batch_id` (None: all), taken out
    of the accumulator; (app, epochs, stats rows, guarantee, data path), or None."""
    if not _accumulator:
        return None
    values = _accumulator[0].value
    mine = [
        key for key in list(values) if key[0] == query and (batch_id is None or key[4] <= batch_id)
    ]  # entries of an epoch whose progress came get no more updates: taken out, no race
    if not mine and run.app is None:
        return None
    merged: dict[tuple[str, int], dict[str, Any]] = {}
    app, guarantee = run.app, run.guarantee
    for key in mine:
        figures = values.pop(key, None)
        if figures is None:
            continue
        _, app, topic, partition, _ = key
        guarantee = figures.get("guarantee") or guarantee
        merged[(topic, partition)] = _merge(merged.get((topic, partition), {}), figures)
    stats = [
        {
            **{name: figures.get(name, 0) for name in _SUMMED},
            "topic": topic,
            "partition": partition,
            "transactional_id": figures.get("transactional_id"),
            "commit_seconds_max": figures.get("commit_seconds_max", 0.0),
            "last_offset": figures.get("last_offset"),
        }
        for (topic, partition), figures in merged.items()
    ]
    if app is None:
        return None
    epochs = len({key[4] for key in mine})
    return app, epochs if batch_id is None else max(epochs, 1), stats, guarantee, "python"


def _seconds(progress) -> float:
    """The batch's write: Spark's `addBatch` duration (the sink's part of the trigger)."""
    return (progress.durationMs or {}).get("addBatch", 0) / 1000


def _latest_offsets(progress) -> dict[tuple[str, int], int]:
    """Each input partition's end offset as the Kafka source last saw it (`sources[].latestOffset`)."""
    ends: dict[tuple[str, int], int] = {}
    for source in progress.sources or ():
        text = source.latestOffset
        try:
            offsets = json.loads(text) if isinstance(text, str) else text
        except ValueError:
            try:  # a Spark Connect client's progress holds the offsets as Python's repr of the JSON
                offsets = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                continue
        if not isinstance(offsets, dict):
            continue
        for topic, partitions in offsets.items():
            if isinstance(partitions, dict):
                for partition, offset in partitions.items():
                    if str(partition).lstrip("-").isdigit() and isinstance(offset, int):
                        ends[(topic, int(partition))] = offset
    return ends
