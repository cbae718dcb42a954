"""Per-batch and per-commit figures where Spark users look for them: the on_commit hook on the
executors, and batch summaries a StreamingQueryListener can look up by batch id."""

from __future__ import annotations

import json
import time

from conftest import run_query
from pyspark.sql.streaming import StreamingQueryListener

import eos
from eos import testing

PARTITIONS = 2
PER_PARTITION = 1_500


def test_on_commit_hook_and_listener_summaries(spark, bootstrap, names, checkpoint_dir, tmp_path):
    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, PARTITIONS)
    testing.create_topic(bootstrap, output, PARTITIONS)
    sent = testing.produce_sequence(bootstrap, source, PARTITIONS, PER_PARTITION)
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=output,
        processing_guarantee="exactly_once",
        commit_every=1_000,
    )
    commits_file = tmp_path / "commits.jsonl"

    def on_commit(commit: eos.Commit) -> None:  # runs on the executors
        with open(commits_file, "a") as f:
            f.write(
                json.dumps(
                    {
                        "topic": commit.topic,
                        "partition": commit.partition,
                        "offset": commit.offset,
                        "records": commit.records,
                        "outputs": commit.outputs,
                        "tid": commit.transactional_id,
                    }
                )
                + "\n"
            )

    sink = eos.sink(config, on_commit=on_commit)
    seen: list[dict] = []

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event):
            pass

        def onQueryProgress(self, event):
            summary = sink.summary(event.progress.batchId)
            if summary is not None:
                seen.append(summary.as_dict())

        def onQueryIdle(self, event):
            pass

        def onQueryTerminated(self, event):
            pass

    listener = Listener()
    spark.streams.addListener(listener)
    try:
        run_query(spark, config, [source], checkpoint_dir, sink=sink, maxOffsetsPerTrigger=1_200)
        deadline = time.monotonic() + 30  # listener events arrive asynchronously
        while len(seen) < len(sink.history) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        spark.streams.removeListener(listener)

    assert testing.verify_exactly_once(bootstrap, output, testing.flatten(sent)).exactly_once
    commits = [json.loads(line) for line in commits_file.read_text().splitlines()]
    for partition in range(PARTITIONS):
        mine = [c for c in commits if c["partition"] == partition]
        assert [c["tid"] for c in mine] == [config.transactional_id(source, partition)] * len(mine)
        assert sum(c["records"] for c in mine) == PER_PARTITION
        assert max(c["offset"] for c in mine) == PER_PARTITION
        assert all(c["records"] <= 1_000 for c in mine)  # commit_every bounds each transaction
    assert sorted(s["batch_id"] for s in seen) == [s.batch_id for s in sink.history]
    assert sum(s["records_out"] for s in seen) == PARTITIONS * PER_PARTITION
    assert sum(s["transactions"] for s in seen) == len(commits)


def test_prometheus_endpoint_shows_a_running_querys_figures(spark, bootstrap, names, checkpoint_dir):
    """metrics_port: the figures of a running query, scraped over HTTP and parsed with prometheus_client's
    own parser, equal the sink's batch summaries; the input lag is the end offset minus what eos
    committed as of the batch the endpoint names."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    from eos._spark._metrics import next_offset
    from eos.session import free_port

    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, PARTITIONS)
    testing.create_topic(bootstrap, output, PARTITIONS)
    testing.produce_sequence(bootstrap, source, PARTITIONS, PER_PARTITION)
    port = free_port()
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=output,
        processing_guarantee="exactly_once",
        metrics_port=port,
    )
    sink = eos.sink(config)
    df = eos.read_stream(spark, config, [source], maxOffsetsPerTrigger=1_000)
    query = (
        df.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint_dir))
        .trigger(processingTime="2 seconds")
        .start()
    )

    def scrape() -> dict[tuple[str, tuple], float]:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
        return {
            (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "app_id"))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.labels.get("app_id") == config.app_id
        }

    try:
        deadline = time.monotonic() + 120
        while not sink.history and time.monotonic() < deadline:
            time.sleep(0.2)
        first = scrape()  # after batch 0 (of 1,000 records out of 3,000): a lag to see
        batch = int(first[("eos_last_batch_id", ())])
        summary = sink.summary(batch)
        for stats in summary.per_partition:
            labels = (("partition", str(stats["partition"])), ("topic", source))
            assert first[("eos_input_lag_records", labels)] == PER_PARTITION - next_offset(stats)
        query.processAllAvailable()
        figures = scrape()  # the query still running
        assert query.isActive
    finally:
        query.stop()

    history = list(sink.history)
    assert figures[("eos_batches_total", ())] == len(history)
    assert figures[("eos_last_batch_id", ())] == history[-1].batch_id
    assert figures[("eos_batch_seconds_count", ())] == len(history)
    for partition in range(PARTITIONS):
        labels = (("partition", str(partition)), ("topic", source))
        mine = [s for b in history for s in b.per_partition if s["partition"] == partition]
        assert figures[("eos_records_in_total", labels)] == PER_PARTITION
        assert figures[("eos_records_out_total", labels)] == PER_PARTITION
        assert figures[("eos_transactions_total", labels)] == sum(s["transactions"] for s in mine)
        assert figures[("eos_input_lag_records", labels)] == 0
        assert figures[("eos_commit_seconds_total", labels)] > 0
    assert first[("eos_input_lag_records", (("partition", "0"), ("topic", source)))] > 0
