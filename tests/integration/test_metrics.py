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
