"""Where Spark starts reading comes from the group's committed offsets, read without require_stable: a
driver that crashed between send_offsets and commit leaves a transaction open, and a require-stable read
would wait for it (UNSTABLE_OFFSET_COMMIT) until transaction.timeout.ms — seen failing a restart. Tasks,
which skip rows below the offset, keep the stable read."""

from __future__ import annotations

import json

from confluent_kafka import TopicPartition

import eos
from eos import _clients, _offsets, session


class Result:
    def __init__(self, partitions) -> None:
        self.topic_partitions = partitions


class Future:
    def __init__(self, value) -> None:
        self.value = value

    def result(self, timeout=None):
        return self.value


class RecordingAdmin:
    def __init__(self, committed: dict[int, int]) -> None:
        self.committed = committed
        self.require_stable: list[bool] = []

    def list_consumer_group_offsets(self, request, require_stable=False, request_timeout=None):
        self.require_stable.append(require_stable)
        group = request[0].group_id
        config = eos.Config(bootstrap_servers="b:1", app_id=group, output_topic="out")
        parts = [
            TopicPartition(
                tp.topic, tp.partition, self.committed.get(tp.partition, -1001), _offsets.stamp(config)
            )
            for tp in request[0].topic_partitions
        ]
        return {group: Future(Result(parts))}


def test_starting_offsets_do_not_wait_for_open_transactions_but_tasks_do(monkeypatch):
    admin = RecordingAdmin({0: 40})
    monkeypatch.setattr(_clients, "admin", lambda config: admin)
    monkeypatch.setattr(_offsets, "require_topics", lambda config, topics, role: {"in": 2})
    config = eos.Config(bootstrap_servers="b:1", app_id="app", output_topic="out")

    spec = session.starting_offsets(config, ["in"])
    assert json.loads(spec) == {"in": {"0": 40, "1": -2}}
    assert admin.require_stable == [False]

    assert _offsets.committed(config, [("in", 0)]) == {("in", 0): 40}
    assert admin.require_stable == [False, True]
