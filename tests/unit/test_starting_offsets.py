"""Where Spark starts reading comes from the group's committed offsets, read without require_stable: a
driver that crashed between send_offsets and commit leaves a transaction open, and a require-stable read
would wait for it (UNSTABLE_OFFSET_COMMIT) until transaction.timeout.ms — seen failing a restart. Tasks,
which skip rows below the offset, keep the stable read."""

from __future__ import annotations

import json

from confluent_kafka import TopicPartition

import eos
from eos import session
from eos._kafka import _clients, _offsets, _topics
from tests.support.configs import config as base_config


class RecordingConsumer:
    """Stands in for confluent_kafka.Consumer; records whether each offset read asked for stable
    offsets (librdkafka derives require_stable from isolation.level)."""

    stable_reads: list[bool] = []
    committed_offsets: dict[int, int] = {}

    def __init__(self, settings) -> None:
        self.stable = settings["isolation.level"] == "read_committed"
        self.group = settings["group.id"]

    def committed(self, partitions, timeout=None):
        RecordingConsumer.stable_reads.append(self.stable)
        config = eos.Config(bootstrap_servers="b:1", app_id=self.group, output_topic="out")
        return [
            TopicPartition(
                tp.topic,
                tp.partition,
                self.committed_offsets.get(tp.partition, -1001),
                _offsets.stamp(config),
            )
            for tp in partitions
        ]

    def get_watermark_offsets(self, tp, timeout=None, cached=False):
        return 7, 90  # partition 1's log start and end

    def commit(self, offsets=None, asynchronous=True):
        RecordingConsumer.commits.extend((tp.topic, tp.partition, tp.offset, tp.metadata) for tp in offsets)

    def close(self) -> None:
        pass


def test_starting_offsets_do_not_wait_for_open_transactions_but_tasks_do(monkeypatch):
    monkeypatch.setattr(_clients, "Consumer", RecordingConsumer)
    monkeypatch.setattr(RecordingConsumer, "stable_reads", [])
    monkeypatch.setattr(RecordingConsumer, "committed_offsets", {0: 40})
    _clients.clear()
    monkeypatch.setattr(_topics, "require", lambda config, topics, role: {"in": 2})
    config = base_config()

    monkeypatch.setattr(RecordingConsumer, "commits", [], raising=False)
    spec = session.starting_offsets(config, ["in"])
    # Partition 1 has no committed offset: it starts at its earliest, resolved and committed (stamped) so
    # that its first batch has a committed offset to check against.
    assert json.loads(spec) == {"in": {"0": 40, "1": 7}}
    assert RecordingConsumer.commits == [("in", 1, 7, _offsets.stamp(config))]
    assert RecordingConsumer.stable_reads == [False]

    assert _offsets.committed(config, [("in", 0)]) == {("in", 0): 40}
    assert RecordingConsumer.stable_reads == [False, True]
    _clients.clear()
