"""Prometheus figures of the sinks in this process (`metrics_port`): prometheus_client's default registry,
served over HTTP on the port (0: not served by eos; an application that serves the default registry
itself shows them too).

Per input partition (labels app_id, topic, partition): the records of each batch (in, out, skipped as
already committed, dead letters), transactions, aborts, redos, state records restored, seconds spent
committing, and the input lag after the batch (the partition's stable end minus the offset eos
committed; input_mode "kafka"). input_mode "any" labels its parts as partitions of its progress topic.
Per app: batches, the last batch id, and each batch's seconds (a histogram).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from eos.config import Config
from eos.errors import ConfigError

_lock = threading.Lock()
_families: dict[str, Any] = {}
_served: dict[int, Any] = {}

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
    "eos_commit_seconds": ("commit_seconds_total", "seconds spent committing transactions"),
}


def _client():
    try:
        import prometheus_client
    except ImportError:
        raise ConfigError(
            "metrics_port", "needs prometheus_client: pip install 'eos-spark[metrics]'"
        ) from None
    return prometheus_client


def enable(config: Config) -> None:
    """Register eos's metric families (once per process) and serve them on `config.metrics_port`
    (once per port)."""
    client = _client()
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
            _families["eos_last_batch_id"] = client.Gauge(
                "eos_last_batch_id", "the id of the last micro-batch written", ("app_id",)
            )
            _families["eos_batch_seconds"] = client.Histogram(
                "eos_batch_seconds",
                "seconds the sink took per micro-batch",
                ("app_id",),
                buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, float("inf")),
            )
        port = config.metrics_port
        if port and port not in _served:
            _served[port] = client.start_http_server(port)


def record(config: Config, summary, ends: Mapping[tuple[str, int], int]) -> None:
    """One batch's figures (`BatchSummary`); `ends`: each input partition's stable end offset."""
    app = config.app_id
    for stats in summary.per_partition:
        labels = (app, stats["topic"], str(stats["partition"]))
        for name, (key, _) in _COUNTERS.items():
            value = stats[key]
            if value:
                _families[name].labels(*labels).inc(value)
        committed = next_offset(stats)
        end = ends.get((stats["topic"], stats["partition"]))
        if committed is not None and end is not None:
            _families["eos_input_lag"].labels(*labels).set(max(end - committed, 0))
    _families["eos_batches"].labels(app).inc()
    _families["eos_last_batch_id"].labels(app).set(summary.batch_id)
    _families["eos_batch_seconds"].labels(app).observe(summary.seconds)


def next_offset(stats: Mapping[str, Any]) -> int | None:
    """The input offset eos committed for a partition after a batch (its next record)."""
    if stats.get("last_offset") is not None:
        return stats["last_offset"] + 1
    return stats.get("committed_before")
