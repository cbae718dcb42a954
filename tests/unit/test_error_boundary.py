"""One error boundary: whatever confluent-kafka raises at any client call a partition task makes, only
`eos.EosError` subclasses come out of the task.

The raw clients are replaced where eos constructs them (`Producer`, `AdminClient`, `Consumer`) by fakes
that answer like a broker with one input partition and an empty changelog, so the real task, checkpoint,
state, offsets and producer code runs. A clean run records every call site (client method, or the
result of a future it returned); then each site in turn raises a raw KafkaException, of a kind that is
not retried and of one that is retried until its deadline. No broker, no Spark: what is proven is the
translation, not the protocol (the integration tests prove that on a real broker).
"""

from __future__ import annotations

from collections import Counter
from functools import partial
from types import SimpleNamespace

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException

import eos
from eos._core import _worker
from eos._core._arrow import Layout
from eos._core._spec import Functions, TaskSpec
from eos._core._task import PartitionTask
from eos._kafka import _clients, _producer
from tests.support.messages import Message
from tests.support.producers import FakeClient

IN, OUT = "in", "out"


class Injector:
    """Counts calls per site; raises `error` at the `at`-th call of site `site` and every later one."""

    def __init__(self, site: str | None = None, error: KafkaError | None = None) -> None:
        self.site, self.error = site, error
        self.calls: Counter[str] = Counter()

    def __call__(self, site: str) -> None:
        self.calls[site] += 1
        if site == self.site:
            raise KafkaException(self.error)


class Future:
    def __init__(self, inject: Injector, site: str, value) -> None:
        self.inject, self.site, self.value = inject, site, value

    def result(self, timeout=None):
        self.inject(self.site + ".result")
        return self.value


def _metadata(*topics: str):
    partitions = {0: SimpleNamespace(id=0, leader=1)}
    return SimpleNamespace(
        topics={t: SimpleNamespace(partitions=partitions, error=None) for t in topics},
        brokers={1: SimpleNamespace(id=1)},
    )


def fakes(inject: Injector, changelog_records: int):
    """AdminClient and Consumer classes that call `inject` at every method (the producer is
    tests.support.producers.FakeClient, told to)."""

    class AdminClient:
        def __init__(self, settings) -> None:
            inject("AdminClient()")
            self.created: set[str] = set()

        def poll(self, timeout=None):
            inject("AdminClient.poll")
            return 0

        def list_topics(self, topic=None, timeout=None):
            inject("AdminClient.list_topics")
            return _metadata(IN, OUT, *self.created)

        def describe_topics(self, topics, request_timeout=None, include_authorized_operations=False):
            inject("AdminClient.describe_topics")
            names = topics.topic_names
            return {
                t: Future(
                    inject,
                    "AdminClient.describe_topics",
                    SimpleNamespace(authorized_operations=None, topic_id="AAAAAAAAAAAAAAAAAAAAAA"),
                )
                for t in names
            }

        def create_topics(self, new_topics, request_timeout=None):
            inject("AdminClient.create_topics")
            self.created.update(t.topic for t in new_topics)
            return {t.topic: Future(inject, "AdminClient.create_topics", None) for t in new_topics}

        def describe_configs(self, resources, request_timeout=None):
            inject("AdminClient.describe_configs")
            entries = {"cleanup.policy": SimpleNamespace(value="compact")}
            return {r: Future(inject, "AdminClient.describe_configs", entries) for r in resources}

    class Consumer:
        def __init__(self, settings) -> None:
            inject("Consumer()")
            self.pending: list[Message] = []

        def committed(self, partitions, timeout=None):
            inject("Consumer.committed")
            return [
                SimpleNamespace(
                    topic=tp.topic, partition=tp.partition, offset=-1001, metadata=None, error=None
                )
                for tp in partitions
            ]

        def consumer_group_metadata(self):
            inject("Consumer.consumer_group_metadata")
            return object()

        def get_watermark_offsets(self, tp, timeout=None, cached=False):
            inject("Consumer.get_watermark_offsets")
            return 0, changelog_records

        def assign(self, tps):
            inject("Consumer.assign")
            tp = tps[0]
            self.pending = [
                Message(o, b"k%d" % o, b"%d" % o, input_offset=o, topic=tp.topic)
                for o in range(tp.offset, changelog_records)
            ]

        def consume(self, num_messages=1, timeout=None):
            inject("Consumer.consume")
            out, self.pending = self.pending, []
            return out

        def unassign(self):
            inject("Consumer.unassign")

        def commit(self, offsets=None, asynchronous=True):
            inject("Consumer.commit")

        def close(self):
            pass

    return AdminClient, Consumer


def count_per_key(row, state):
    counts = state.store("counts")
    n = counts.get(row.key, 0) + 1
    counts.put(row.key, n)
    return eos.Output(value=b"%d" % n, key=row.key)


def batch() -> pa.RecordBatch:
    offsets = list(range(5))
    return pa.RecordBatch.from_pydict(
        {
            "topic": pa.array([IN] * 5, pa.string()),
            "partition": pa.array([0] * 5, pa.int32()),
            "offset": pa.array(offsets, pa.int64()),
            "key": pa.array([b"a", b"b", b"a", b"c", b"a"], pa.binary()),
            "value": pa.array([b"v%d" % o for o in offsets], pa.binary()),
        }
    )


def run_task(monkeypatch, tmp_path, inject: Injector, guarantee: str, stateful: bool) -> None:
    admin_cls, consumer_cls = fakes(inject, changelog_records=2)
    monkeypatch.setattr(_producer, "Producer", partial(FakeClient, on_call=inject))
    monkeypatch.setattr(_clients, "AdminClient", admin_cls)
    monkeypatch.setattr(_clients, "Consumer", consumer_cls)
    _worker.reset()  # a fresh worker: no kept producer, no cached client, no changelog checked yet
    config = eos.Config(
        bootstrap_servers="b:1",
        app_id="app",
        output_topic=OUT,
        processing_guarantee=guarantee,
        state_dir=str(tmp_path),
        operation_timeout_ms=150,
        commit_interval_ms=100,
        transaction_timeout_ms=1_000,
        max_redo=1,
    )
    job = TaskSpec(
        config,
        3,
        Layout(value="value", key="key"),
        Functions(count_per_key, stores={"counts": eos.StoreSpec(key_serde="bytes")})
        if stateful
        else Functions(),
    )
    try:
        PartitionTask(job, IN, 0).run([batch()])
    finally:
        _worker.reset()


CASES = [("exactly_once", True), ("exactly_once", False), ("at_least_once", True)]


def call_sites(monkeypatch, tmp_path, guarantee: str, stateful: bool) -> list[str]:
    clean = Injector()
    run_task(monkeypatch, tmp_path / "clean", clean, guarantee, stateful)
    return sorted(clean.calls)


@pytest.mark.parametrize(("guarantee", "stateful"), CASES)
def test_the_fakes_reach_every_client_the_task_uses(monkeypatch, tmp_path, guarantee, stateful):
    """Guards the test below: a clean run goes through the producer, the admin client and a consumer,
    and, with state, through the changelog's creation, check and restore."""
    sites = call_sites(monkeypatch, tmp_path, guarantee, stateful)
    expected = {"Producer.produce", "Producer.flush", "Consumer.committed"}
    if guarantee == "exactly_once":
        expected |= {
            "Producer.init_transactions",
            "Producer.commit_transaction",
            "Consumer.consumer_group_metadata",
        }
    else:
        expected |= {"Consumer.commit"}
    if stateful:
        expected |= {
            "AdminClient.create_topics.result",
            "AdminClient.describe_configs.result",
            "Consumer.get_watermark_offsets",
            "Consumer.assign",
            "Consumer.consume",
        }
    assert expected <= set(sites), sorted(expected - set(sites))


ERRORS = {
    "not retried": KafkaError(KafkaError._FAIL, "injected"),
    "retried until its deadline": KafkaError(KafkaError._TRANSPORT, "injected", retriable=True),
    "abortable": KafkaError(KafkaError._STATE, "injected", txn_requires_abort=True),
}


@pytest.mark.parametrize(("guarantee", "stateful"), CASES)
@pytest.mark.parametrize("kind", sorted(ERRORS))
def test_only_eos_errors_come_out_of_a_task_whatever_call_fails(
    monkeypatch, tmp_path, guarantee, stateful, kind
):
    sites = call_sites(monkeypatch, tmp_path, guarantee, stateful)
    escaped = {}
    for i, site in enumerate(sites):
        inject = Injector(site, ERRORS[kind])
        try:
            run_task(monkeypatch, tmp_path / f"site{i}", inject, guarantee, stateful)
        except eos.EosError:
            pass
        except Exception as exc:  # noqa: BLE001 - the point: anything else escaped the boundary
            escaped[site] = repr(exc)
        assert inject.calls[site] >= 1, f"{site} was not called again: the injection proved nothing"
    assert not escaped, escaped
