"""eos._kafka._topics: each question about topics asked one way — partitions from metadata (a topic with
an error counts as missing), `require` naming the first missing topic and its role, `create` taking an
existing topic as created, `await_leaders` until every partition has one. No broker: a fake admin."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from eos._kafka import _clients, _topics
from eos.errors import TopicNotFoundError
from tests.support.configs import config as base_config


class Partition:
    def __init__(self, leader: int) -> None:
        self.leader = leader


class Topic:
    def __init__(self, partitions: int, leader: int = 1, error: KafkaError | None = None) -> None:
        self.partitions = {p: Partition(leader) for p in range(partitions)}
        self.error = error


class Future:
    def __init__(self, error: KafkaError | None = None) -> None:
        self.error = error

    def result(self, timeout=None):
        if self.error is not None:
            raise KafkaException(self.error)


class Admin:
    """The admin client's metadata and topic creation, as confluent-kafka answers them."""

    def __init__(self, topics: dict[str, Topic]) -> None:
        self.topics = topics
        self.created: list[str] = []
        self.exists = KafkaError(KafkaError.TOPIC_ALREADY_EXISTS, "Topic already exists")

    def list_topics(self, topic=None, timeout=None):
        topics = self.topics if topic is None else {topic: self.topics[topic]} if topic in self.topics else {}
        return type("Metadata", (), {"topics": topics})()

    def create_topics(self, new, request_timeout=None):
        (topic,) = new
        self.created.append(topic.topic)
        if topic.topic in self.topics:
            return {topic.topic: Future(self.exists)}
        self.topics[topic.topic] = Topic(topic.num_partitions, leader=-1)  # no leader yet
        return {topic.topic: Future()}

    def poll(self, timeout=None) -> int:
        return 0


@pytest.fixture
def admin(monkeypatch) -> Admin:
    fake = Admin({"in": Topic(4), "broken": Topic(2, error=KafkaError(KafkaError.LEADER_NOT_AVAILABLE))})
    monkeypatch.setattr(_clients, "admin", lambda config: fake)
    return fake


def test_partitions_count_only_topics_without_an_error(admin):
    assert _topics.partitions(base_config(), ["in", "broken", "missing"]) == {"in": 4}


def test_require_names_the_first_missing_topic_and_its_role(admin):
    assert _topics.require(base_config(), ["in"], "input") == {"in": 4}
    with pytest.raises(TopicNotFoundError) as info:
        _topics.require(base_config(), ["in", "missing", "broken"], "output")
    assert "missing" in str(info.value) and "output" in str(info.value)


def test_create_takes_a_topic_that_exists_as_created(admin):
    config = base_config(operation_timeout_ms=2_000)
    _topics.create(config, NewTopic("in", 4, 1), "creating 'in'")  # another task created it first
    _topics.create(config, NewTopic("new", 3, 1), "creating 'new'")
    assert admin.created == ["in", "new"] and _topics.partitions(config, ["new"]) == {"new": 3}


def test_await_leaders_returns_once_every_partition_has_one(admin, monkeypatch):
    config = base_config(operation_timeout_ms=2_000)
    admin.topics["new"] = Topic(2, leader=-1)
    sleeps = []

    def elect(seconds: float) -> None:
        sleeps.append(seconds)
        admin.topics["new"] = Topic(2, leader=1)

    monkeypatch.setattr(_topics.time, "sleep", elect)
    _topics.await_leaders(config, "new")
    assert sleeps == [0.1]
