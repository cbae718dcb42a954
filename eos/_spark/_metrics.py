"""Prometheus figures of the sinks in this process (`metrics_port`): prometheus_client's default registry,
served over HTTP on the port (0: not served by eos; an application that serves the default registry
itself shows them too).

Per input partition (labels app_id, topic, partition): the records of each batch (in, out, skipped as
already committed, dead letters), transactions, aborts, redos, state records restored, seconds spent
committing, and the input lag after the batch (the partition's stable end minus the offset eos
committed; input_mode "kafka"). input_mode "any" labels its parts as partitions of its progress topic.
Per app: batches (and of them, those the JVM data path wrote), the last batch id, and each batch's
seconds (a histogram).

The lag figure costs one ListOffsets request per batch for every input partition the query's run has
written (`Lags`), bounded by LAG_TIMEOUT_S: a cluster that does not answer by then (a leader down, no
broker reachable) leaves the figure out for that batch, logged, rather than hold the batch up. An app's
lag gauges are those of its query's current run: the partitions of an earlier run (another topic, a new
checkpoint) or of a topic that no longer exists are removed, not left at their last value.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import attrs

from eos._kafka import _admin
from eos.config import Config
from eos.errors import ConfigError, EosError

#: how long a batch waits for the input partitions' end offsets of its lag figure (at most
#: operation_timeout_ms): a cluster that answers does so in milliseconds
LAG_TIMEOUT_S = 2.0

_lock = threading.Lock()
_families: dict[str, Any] = {}
_served: dict[int, Any] = {}
#: per (app_id, query: None for the sink), the (topic, partition) whose input lag gauge it set
_lag_shown: dict[tuple[str, str | None], set[tuple[str, int]]] = {}

#: per-partition counters: name -> (BatchSummary per_partition key, help)
_COUNTERS = {
    "eos_records_in": ("records_in", "input records the sink received"),
    "eos_records_out": ("records_out", "output records committed"),
    "eos_records_skipped": ("skipped", "input records skipped as already committed (a re-run batch)"),
    "eos_dead_letters": ("dead_letters", "bad records committed to the dead-letter topic"),
    "eos_transactions": ("transactions", "transactions committed (at_least_once: offset commits)"),
    "eos_transactions_aborted": ("aborted", "transactions aborted"),
    "eos_redos": ("redos", "transactions written again after an abort"),
    "eos_restored_records": ("restored", "state records restored from changelogs"),
    "eos_snapshots_restored": (
        "snapshots_restored",
        "stores rebuilt from a snapshot and the changelog's tail",
    ),
    "eos_snapshots_taken": ("snapshots_taken", "store snapshots written to state_snapshot_location"),
    "eos_commit_seconds": ("commit_seconds_total", "seconds spent committing transactions"),
}


def _client(field: str):
    try:
        import prometheus_client
    except ImportError:
        raise ConfigError(field, "needs prometheus_client: pip install 'eos-spark[metrics]'") from None
    return prometheus_client


def enable(port: int, field: str = "metrics_port") -> None:
    """Register eos's metric families (once per process) and serve them on `port` (once per port; 0:
    not served). `field`: the setting named by the error of a port that cannot be served."""
    client = _client(field)
    with _lock:
        if not _families:
            labels = ("app_id", "topic", "partition")
            for name, (_, text) in _COUNTERS.items():
                _families[name] = client.Counter(name, text, labels)
            _families["eos_input_lag"] = client.Gauge(
                "eos_input_lag_records",
                "records of the input partition not yet committed by eos, after the last batch",
                labels,
            )
            _families["eos_batches"] = client.Counter("eos_batches", "micro-batches written", ("app_id",))
            _families["eos_jvm_batches"] = client.Counter(
                "eos_jvm_batches", "micro-batches whose rows the JVM data path wrote (data_path)", ("app_id",)
            )
            _families["eos_last_batch_id"] = client.Gauge(
                "eos_last_batch_id", "the id of the last micro-batch written", ("app_id",)
            )
            _families["eos_batch_seconds"] = client.Histogram(
                "eos_batch_seconds",
                "seconds the sink took per micro-batch",
                ("app_id",),
                buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, float("inf")),
            )
        if port and port not in _served:
            try:
                _served[port] = client.start_http_server(port)
            except OSError as exc:  # the port is taken (EADDRINUSE), or not ours to bind (EACCES)
                raise ConfigError(
                    field,
                    f"cannot serve the sink's metrics on port {port} ({exc.strerror or exc}): another"
                    " process, or another server of this one, holds it. eos serves them from the process"
                    " the sink or eos.MetricsListener runs in (the driver; the Connect server under Spark"
                    " Connect): choose a free port there, or 0 to record them without serving (an"
                    " application that serves prometheus_client's registry itself shows them). Nothing of"
                    " the batch was written.",
                ) from None


@attrs.define
class Lags:
    """The input partitions one run of a query has written (one Sink's batches, their ids increasing)
    and the offset eos committed for each. Every batch measures the lag of all of them, not only those
    the batch had records of (a partition lags by what arrived since, with or without a batch), and the
    app shows no other partition's. A batch id not above the last one starts a new run (a new
    checkpoint starts again at 0; a re-run batch after a failure)."""

    last_batch: int | None = None
    committed: dict[tuple[str, int], int] = attrs.field(factory=dict)

    def add(self, config: Config, summary) -> None:
        """The committed offsets of a batch (`BatchSummary`); a batch id not above the last starts anew."""
        if self.last_batch is not None and summary.batch_id <= self.last_batch:
            self.committed.clear()
        self.last_batch = summary.batch_id
        if config.input_mode != "kafka":
            return  # parts, not input partitions: no input offsets to measure a lag with
        for stats in summary.per_partition:
            committed = next_offset(stats)
            if committed is not None:
                self.committed[(stats["topic"], stats["partition"])] = committed


def record(
    config: Config,
    summary,
    ends: Mapping[tuple[str, int], int] | None = None,
    *,
    lags: Lags | None = None,
    log=None,
) -> None:
    """One batch's figures (`BatchSummary`). `lags`: the query's run (see `Lags`; without it, the batch's
    partitions alone); `ends`: their stable end offsets where the caller has them (one missing: a
    partition that does not exist), else they are asked for (`_end_offsets`)."""
    app = config.app_id
    count(app, summary)
    lags = Lags() if lags is None else lags
    lags.add(config, summary)
    if ends is None:
        ends = _end_offsets(config, lags.committed, log)
    shown: dict[tuple[str, int], int] = {}
    if ends is not None:
        for tp in [tp for tp in lags.committed if ends.get(tp) is None]:
            del lags.committed[tp]  # the partition does not exist (any more)
        shown = {tp: max(ends[tp] - committed, 0) for tp, committed in lags.committed.items()}
    show_lags(app, shown)


def count(app: str, summary, batches: int = 1) -> None:
    """Add the figures of `batches` batches (`BatchSummary`: their per-partition rows, the last one's
    id and the seconds of all) to app `app`'s counters."""
    for stats in summary.per_partition:
        labels = (app, stats["topic"], str(stats["partition"]))
        for name, (key, _) in _COUNTERS.items():
            value = stats.get(key)
            if value:
                _families[name].labels(*labels).inc(value)
    if batches:  # 0: figures of tasks whose batch never completed (a failed epoch's)
        _families["eos_batches"].labels(app).inc(batches)
        if getattr(summary, "data_path", "python") == "jvm":
            _families["eos_jvm_batches"].labels(app).inc(batches)
        _families["eos_last_batch_id"].labels(app).set(summary.batch_id)
        _families["eos_batch_seconds"].labels(app).observe(summary.seconds)


def _end_offsets(
    config: Config, tps: Mapping[tuple[str, int], int], log
) -> dict[tuple[str, int], int | None] | None:
    """The stable end offset of each of `tps` (None for one that does not exist), in one ListOffsets
    request (read_committed: the last stable offset) bounded by LAG_TIMEOUT_S; None where the cluster
    did not answer them in time, or refused."""
    if not tps:
        return {}
    timeout = min(LAG_TIMEOUT_S, config.operation_timeout_ms / 1000)
    try:
        return _admin.Admin(config, timeout).log_offsets(tps, "latest", committed_only=True)
    except EosError as exc:
        if log is not None:
            log.info(
                "input lag not measured",
                partitions=len(tps),
                detail=f"the end offsets did not come (asked for {timeout:g}s): the lag figure is left"
                " out for this batch",
                error=str(exc),
            )
        return None


def show_lags(app: str, lags: Mapping[tuple[str, int], int], owner: str | None = None) -> None:
    """Set app `app`'s input lag gauges of `owner` (a query; None: the sink of this process) to `lags`,
    and remove those of every other partition `owner` showed (another query of the app keeps its own)."""
    gauge = _families["eos_input_lag"]
    with _lock:
        for topic, partition in _lag_shown.get((app, owner), set()) - lags.keys():
            gauge.remove(app, topic, str(partition))
        for (topic, partition), lag in lags.items():
            gauge.labels(app, topic, str(partition)).set(lag)
        if lags:
            _lag_shown[(app, owner)] = set(lags)
        else:
            _lag_shown.pop((app, owner), None)


def next_offset(stats: Mapping[str, Any]) -> int | None:
    """The input offset eos committed for a partition after a batch (its next record)."""
    if stats.get("last_offset") is not None:
        return stats["last_offset"] + 1
    return stats.get("committed_before")
