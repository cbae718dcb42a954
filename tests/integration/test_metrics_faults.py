"""metrics_port where something goes wrong: the port is taken, the cluster does not answer the lag
figure's offsets request, and a query whose input partitions change (no gauge left of a partition the
query no longer reads)."""

from __future__ import annotations

import socket
import time

import attrs
import pytest
from conftest import run_query
from prometheus_client import REGISTRY
from pyspark.errors import StreamingQueryException

import eos
from eos import testing
from eos.session import free_port

PARTITIONS = 2
PER_PARTITION = 300


def _config(bootstrap, names, output, **extra) -> eos.Config:
    return eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=output,
        processing_guarantee="exactly_once",
        **extra,
    )


def _topic(bootstrap, name: str, partitions: int = PARTITIONS) -> str:
    testing.create_topic(bootstrap, name, partitions)
    return name


def _lag(config: eos.Config, topic: str, partition: int) -> float | None:
    labels = {"app_id": config.app_id, "topic": topic, "partition": str(partition)}
    return REGISTRY.get_sample_value("eos_input_lag_records", labels)


def _lags(config: eos.Config) -> dict[tuple[str, str], float]:
    """Every input lag sample of the app in the process's registry: (topic, partition) -> records."""
    return {
        (s.labels["topic"], s.labels["partition"]): s.value
        for family in REGISTRY.collect()
        if family.name == "eos_input_lag_records"
        for s in family.samples
        if s.labels.get("app_id") == config.app_id
    }


def test_a_busy_metrics_port_fails_the_first_batch_with_a_config_error_naming_it(
    spark, bootstrap, names, checkpoint_dir
):
    """The port is bound (another process serves on it): the query's first batch fails with one
    ConfigError naming `metrics_port` and the port, before anything is written; not an OSError."""
    source = _topic(bootstrap, names("in"))
    output = _topic(bootstrap, names("out"))
    testing.produce_sequence(bootstrap, source, PARTITIONS, PER_PARTITION)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("", 0))  # every address, as prometheus_client's server binds
        busy.listen()
        port = busy.getsockname()[1]
        config = _config(bootstrap, names, output, metrics_port=port)
        sink = eos.sink(config)
        with pytest.raises(StreamingQueryException) as info:
            run_query(spark, config, [source], checkpoint_dir, sink=sink)
    text = str(info.value)
    assert "eos.errors.ConfigError: invalid config 'metrics_port'" in text, text[-3000:]
    assert f"port {port}" in text, text[-3000:]
    assert "OSError" not in text and "Address already in use" in text, text[-3000:]
    assert not sink.history
    records, _ = testing.read_topic(bootstrap, output, isolation="read_uncommitted", timeout=20)
    assert records == []  # nothing written, not even uncommitted


def test_the_lag_figure_never_holds_a_batch_long_where_the_cluster_does_not_answer(
    spark, bootstrap, names, checkpoint_dir
):
    """After a batch, the lag figure asks every input partition's end offset in one bounded request: a
    cluster that does not answer (here: none listening at all; a leader down is alike) costs the batch
    a moment, not operation_timeout_ms per partition, and the figures it could not measure are not
    shown (rather than shown stale)."""
    partitions = 6
    source = _topic(bootstrap, names("in"), partitions)
    output = _topic(bootstrap, names("out"))
    testing.produce_sequence(bootstrap, source, partitions, 50)
    config = _config(bootstrap, names, output, metrics_port=0)
    written = run_query(spark, config, [source], checkpoint_dir)
    summary = written.history[-1]
    assert {_lag(config, source, p) for p in range(partitions)} == {0}

    nowhere = attrs.evolve(config, bootstrap_servers=f"127.0.0.1:{free_port()}", operation_timeout_ms=5_000)
    sink = eos.sink(nowhere)
    sink._metrics = True  # as after its first batch's `metrics_port` set-up
    started = time.monotonic()
    sink._record(summary)  # the batch's last step: figures, history, log
    took = time.monotonic() - started
    assert took < 4, f"the lag figure held the batch {took:.1f}s"
    assert sink.history[-1] is summary
    assert {_lag(config, source, p) for p in range(partitions)} == {None}


def test_lag_gauges_of_partitions_the_query_no_longer_reads_are_cleared(
    spark, bootstrap, names, checkpoint_dir, tmp_path
):
    """One app's query reads topic A, then (a new checkpoint, as a changed subscription needs) topic B:
    the registry shows B's lag, and none of A's; the same sink run again on A drops B's."""
    first = _topic(bootstrap, names("a"))
    second = _topic(bootstrap, names("b"))
    output = _topic(bootstrap, names("out"))
    for topic in (first, second):
        testing.produce_sequence(bootstrap, topic, PARTITIONS, PER_PARTITION)
    config = _config(bootstrap, names, output, metrics_port=0)

    run_query(spark, config, [first], checkpoint_dir)
    assert _lags(config) == {(first, str(p)): 0 for p in range(PARTITIONS)}

    sink = eos.sink(config)
    run_query(spark, config, [second], tmp_path / "second", sink=sink)
    assert _lags(config) == {(second, str(p)): 0 for p in range(PARTITIONS)}

    testing.produce_sequence(bootstrap, first, PARTITIONS, 10, start=PER_PARTITION)  # A: new input
    run_query(spark, config, [first], tmp_path / "third", sink=sink)  # the same sink, a new run
    assert _lags(config) == {(first, str(p)): 0 for p in range(PARTITIONS)}
