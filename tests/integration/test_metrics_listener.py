"""The Prometheus endpoint for the APIs whose batches commit in Spark's workers: `format("eos")` served
through `eos.register(spark, metrics_port=...)`, `eos.foreach_writer` with `metrics_port` (both through
`eos.MetricsListener`), scraped while the query runs and compared with what eos committed (the ledger;
the output read back read_committed). The Grafana dashboard in docs/ queries only metrics the endpoint
serves."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import seed

import eos
from eos import testing
from eos._spark import _ledger

pytestmark = pytest.mark.skipif(
    int(__import__("pyspark").__version__.split(".")[0]) < 4, reason="Python data sources need PySpark 4.0+"
)

PARTITIONS = 2
PER_PARTITION = 1_500
DASHBOARD = Path(__file__).parents[2] / "docs" / "grafana" / "eos-dashboard.json"


def _scrape(port: int, app_id: str) -> tuple[dict[tuple[str, tuple], float], set[str]]:
    """The endpoint's samples of `app_id` (by name and labels other than app_id), and the name of every
    sample the endpoint serves or would serve once a labelled family has a child (a counter's `_total`,
    a histogram's `_bucket`, `_count`, `_sum`, a gauge's own name)."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        families = list(text_string_to_metric_families(response.read().decode()))
    samples = {
        (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "app_id"))): s.value
        for family in families
        for s in family.samples
        if s.labels.get("app_id") == app_id
    }
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
    names = {f.name + suffix for f in families for suffix in suffixes.get(f.type, ())}
    return samples, names


def _wait_for(port: int, app_id: str, done, seconds: float = 120):
    """Scrape until `done(samples)` (the listener counts a batch after Spark reports its progress)."""
    deadline = time.monotonic() + seconds
    while True:
        samples, names = _scrape(port, app_id)
        if done(samples) or time.monotonic() > deadline:
            return samples, names
        time.sleep(0.3)


def _dashboard_metrics() -> set[str]:
    """The sample names the dashboard's queries name; `rate` and `increase` only of counters and
    histogram buckets (asserted here)."""
    exprs = [t["expr"] for panel in json.loads(DASHBOARD.read_text())["panels"] for t in panel["targets"]]
    for expr in exprs:
        for name in re.findall(r"\b(?:rate|increase)\((eos_[a-z_]+)", expr):
            assert name.endswith(("_total", "_bucket")), f"rate of a gauge in {expr}"
    return {name for expr in exprs for name in re.findall(r"\b(eos_[a-z_]+)", expr)}


def _partition(partition: int, topic: str) -> tuple:
    return (("partition", str(partition)), ("topic", topic))


def test_format_eos_figures_are_served_from_the_driver(spark, bootstrap, names, tmp_path):
    """eos.register(spark, metrics_port=...): a running format("eos") query's figures on the endpoint
    equal its ledger's, batch by batch; the lag after a batch is the source's end offset minus the
    offset the ledger says eos committed; `on_progress` of a second listener gets each batch's summary
    with Spark's progress, and the batch is counted once, not once per listener."""
    from eos._spark._metrics import next_offset
    from eos.session import free_port

    source, output, sent = seed(bootstrap, names, PER_PARTITION, PARTITIONS)
    app_id = names("app")
    port = free_port()
    eos.register(spark, metrics_port=port)
    paired: list[tuple[int, int, int, str]] = []  # (progress batch id, its input rows, eos' records_in, path)
    hook = eos.MetricsListener(
        0, on_progress=lambda p, s: paired.append((p.batchId, p.numInputRows, s.records_in, s.data_path))
    )
    spark.streams.addListener(hook)
    checkpoint = tmp_path / "ckpt"
    config = eos.Config(bootstrap_servers=bootstrap, app_id=app_id, output_topic=output)
    # six batches a second apart: the first scrape comes while input is still to come (with two, the
    # second could be written before the listener had served the first's figures)
    per_trigger = PER_PARTITION * PARTITIONS // 6
    df = eos.read_stream(spark, config, [source], maxOffsetsPerTrigger=per_trigger)
    writer = df.writeStream.format("eos")
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "topic": output,
        "eos.app.id": app_id,
        "eos.processing.guarantee": "exactly_once",
        "checkpointLocation": str(checkpoint),
    }
    for key, value in options.items():
        writer = writer.option(key, value)
    query = writer.trigger(processingTime="1 second").start()
    try:
        first, _ = _wait_for(port, app_id, lambda s: s.get(("eos_batches_total", ())))
        assert first, "no figures of the query were served"
        batch = int(first[("eos_last_batch_id", ())])
        ledger = _ledger.read_batch(_ledger.location_of(str(checkpoint)), batch)
        stats = [a for a in ledger["attempts"] if a["outcome"] == "committed"][-1]["partitions"]
        for s in stats:
            lag = first[("eos_input_lag_records", _partition(s["partition"], source))]
            assert lag == PER_PARTITION - next_offset(s), (batch, s)
        query.processAllAvailable()
        location = _ledger.location_of(str(checkpoint))
        batches = [b for b in _ledger.read_batches(location, _ledger.batch_ids(location))]
        last = batches[-1]["batch_id"]
        figures, families = _wait_for(port, app_id, lambda s: s.get(("eos_last_batch_id", ())) == last)
        assert query.isActive
    finally:
        query.stop()
        spark.streams.removeListener(hook)

    deadline = time.monotonic() + 30  # the listener hears of the query's end asynchronously
    while _ledger.announced(str(query.id)) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _ledger.announced(str(query.id)) is None, "the query's pointer to its ledger is removed at its end"
    committed = [[a for a in b["attempts"] if a["outcome"] == "committed"][-1] for b in batches]
    rows = [p for a in committed for p in a["partitions"]]
    assert figures[("eos_batches_total", ())] == len(batches)
    assert figures[("eos_batch_seconds_count", ())] == len(batches)
    for partition in range(PARTITIONS):
        mine = [r for r in rows if r["partition"] == partition]
        labels = _partition(partition, source)
        assert figures[("eos_records_in_total", labels)] == PER_PARTITION
        assert figures[("eos_records_out_total", labels)] == PER_PARTITION
        assert figures[("eos_transactions_total", labels)] == sum(r["transactions"] for r in mine) > 0
        assert figures[("eos_commit_seconds_total", labels)] > 0
        assert figures[("eos_input_lag_records", labels)] == 0
    assert first[("eos_input_lag_records", _partition(0, source))] > 0, "the first scrape saw input to come"
    # the hook: Spark's progress and eos's summary of the same batch
    assert [b for b, _, _, _ in paired] == [b["batch_id"] for b in batches]
    assert all(rows_in == spark_rows for _, spark_rows, rows_in, _ in paired), paired
    # a pass-through query on a classic session: eos's JVM provider wrote it on the JVM data path
    assert {path for _, _, _, path in paired} == {"jvm"}
    # the dashboard names only metrics the endpoint serves
    assert _dashboard_metrics() <= families, _dashboard_metrics() - families
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert testing.compare(testing.flatten(sent), records, hanging).exactly_once


def test_foreach_writer_figures_are_served_from_the_driver(spark, bootstrap, names, tmp_path):
    """foreach_writer with metrics_port: each task's figures reach the driver through an accumulator,
    and the endpoint shows, while the query runs, what the output read back read_committed holds."""
    from eos.session import free_port

    source, output, sent = seed(bootstrap, names, PER_PARTITION, PARTITIONS)
    app_id = names("app")
    port = free_port()
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=app_id,
        output_topic=output,
        processing_guarantee="exactly_once",
        metrics_port=port,
    )
    paired: list[tuple[int, int, int]] = []  # (progress batch id, its input rows, eos' records_in)
    writer = eos.foreach_writer(config)  # adds the listener that serves the port
    hook = eos.MetricsListener(
        0, on_progress=lambda p, s: paired.append((p.batchId, p.numInputRows, s.records_in))
    )
    spark.streams.addListener(hook)
    query = (
        eos.read_stream(spark, config, [source], maxOffsetsPerTrigger=PER_PARTITION)
        .writeStream.foreach(writer)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        first, _ = _wait_for(port, app_id, lambda s: s.get(("eos_batches_total", ())))
        assert first, "no figures of the query were served"
        query.processAllAvailable()
        done = PARTITIONS * [PER_PARTITION]

        def all_out(samples) -> bool:
            return [
                samples.get(("eos_records_out_total", _partition(p, source))) for p in range(PARTITIONS)
            ] == done

        figures, _ = _wait_for(port, app_id, all_out)
        assert query.isActive
        progresses = [p for p in query.recentProgress if p["numInputRows"]]
    finally:
        query.stop()
        spark.streams.removeListener(hook)

    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert testing.compare(testing.flatten(sent), records, hanging).exactly_once
    assert sum(figures[("eos_records_out_total", _partition(p, source))] for p in range(PARTITIONS)) == len(
        records
    )
    for partition in range(PARTITIONS):
        labels = _partition(partition, source)
        assert figures[("eos_records_in_total", labels)] == PER_PARTITION
        assert figures[("eos_records_out_total", labels)] == PER_PARTITION
        assert figures[("eos_transactions_total", labels)] > 0
        assert figures[("eos_input_lag_records", labels)] == 0
    assert sum(first.get(("eos_input_lag_records", _partition(p, source)), 0) for p in range(PARTITIONS)) > 0
    assert figures[("eos_last_batch_id", ())] == query.lastProgress["batchId"]
    # each epoch's figures with its own progress: records_in is Spark's numInputRows of the epoch
    assert [(b, rows) for b, rows, _ in paired if rows] == [
        (p["batchId"], p["numInputRows"]) for p in progresses
    ]
    assert all(rows == rows_in for _, rows, rows_in in paired), paired
    assert figures[("eos_batches_total", ())] == len(paired)


@pytest.mark.long  # make chaos: make test runs the classic one above
def test_format_eos_figures_under_spark_connect(connect, bootstrap, names, tmp_path):
    """The same through a Spark Connect session: PySpark 4.0 runs a Connect session's listeners in the
    client's process, which serves the figures; they equal the ledger's, lag included (the client's
    progress holds the source's offsets in another form)."""
    from eos.session import free_port

    source, output, sent = seed(bootstrap, names, PER_PARTITION, PARTITIONS)
    app_id = names("app")
    port = free_port()
    eos.register(connect, metrics_port=port)
    checkpoint = tmp_path / "ckpt"
    config = eos.Config(bootstrap_servers=bootstrap, app_id=app_id, output_topic=output)
    writer = eos.read_stream(
        connect, config, [source], maxOffsetsPerTrigger=PER_PARTITION
    ).writeStream.format("eos")
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "topic": output,
        "eos.app.id": app_id,
        "checkpointLocation": str(checkpoint),
    }
    for key, value in options.items():
        writer = writer.option(key, value)
    query = writer.trigger(processingTime="1 second").start()
    try:
        query.processAllAvailable()
        location = _ledger.location_of(str(checkpoint))
        last = _ledger.batch_ids(location)[-1]
        figures, _ = _wait_for(port, app_id, lambda s: s.get(("eos_last_batch_id", ())) == last)
    finally:
        query.stop()
    assert figures.get(("eos_last_batch_id", ())) == last, figures
    for partition in range(PARTITIONS):
        labels = _partition(partition, source)
        assert figures[("eos_records_in_total", labels)] == PER_PARTITION
        assert figures[("eos_records_out_total", labels)] == PER_PARTITION
        assert figures[("eos_input_lag_records", labels)] == 0
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert testing.compare(testing.flatten(sent), records, hanging).exactly_once


def test_a_format_eos_query_without_a_ledger_is_named_in_a_warning(spark, bootstrap, names, tmp_path, caplog):
    """A format("eos") query whose checkpoint comes from the session's setting, not its options, keeps
    no ledger, so its figures have nowhere to come from: the listener says so once, naming the query,
    rather than serve nothing silently."""
    import logging

    source, output, sent = seed(bootstrap, names, 50, PARTITIONS)
    eos.register(spark, metrics_port=0)
    spark.conf.set("spark.sql.streaming.checkpointLocation", str(tmp_path / "ckpts"))
    try:
        config = eos.Config(bootstrap_servers=bootstrap, app_id=names("app"), output_topic=output)
        writer = eos.read_stream(spark, config, [source]).writeStream.format("eos")
        for key, value in {
            "kafka.bootstrap.servers": bootstrap,
            "topic": output,
            "eos.app.id": config.app_id,
        }.items():
            writer = writer.option(key, value)
        with caplog.at_level(logging.WARNING, logger="eos.sink"):
            query = writer.trigger(availableNow=True).start()
            query.awaitTermination()
            deadline = time.monotonic() + 30
            while (
                not any("keeps no ledger" in r.getMessage() for r in caplog.records)
                and time.monotonic() < deadline
            ):
                time.sleep(0.2)
    finally:
        spark.conf.unset("spark.sql.streaming.checkpointLocation")
    warnings = [r for r in caplog.records if "keeps no ledger" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    assert str(query.id) in warnings[0].getMessage()
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert testing.compare(testing.flatten(sent), records, hanging).exactly_once
