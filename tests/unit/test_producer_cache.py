"""eos._kafka._pool, the per-worker cache of producers: producers are kept between tasks, at most
max_producers_per_worker of them, the least recently used closed first (one per input partition ever
seen would grow forever)."""

from __future__ import annotations

import pytest

import eos
from eos._kafka import _pool, _producer
from tests.support.configs import config as base_config

#: the transactional ids of the producers the pool closed, in order
closed: list[str] = []


@pytest.fixture
def cache(monkeypatch, fake_client):
    monkeypatch.setattr(_pool, "_cache", {})
    closed.clear()
    discard = _pool.discard

    def recording(producer):
        closed.append(producer.transactional_id)
        discard(producer)

    monkeypatch.setattr(_pool, "discard", recording)
    return _pool


def config(size: int) -> eos.Config:
    return base_config(processing_guarantee="exactly_once", max_producers_per_worker=size)


def cycle(cache, cfg, partition: int) -> tuple[_producer.OutputProducer, bool]:
    producer, kept = cache.acquire(cfg, cfg.transactional_id("in", partition))
    cache.release(producer)
    return producer, kept


def test_the_cache_keeps_the_most_recently_used_producers_and_closes_the_rest(cache):
    cfg = config(3)
    first = [cycle(cache, cfg, p)[0] for p in range(3)]
    assert cache.cached() == 3 and closed == []
    assert cycle(cache, cfg, 0) == (first[0], True), "kept from the earlier task, now the most recent"
    cycle(cache, cfg, 3)  # a fourth partition: partition 1 is the least recently used
    cycle(cache, cfg, 4)  # then partition 2
    assert cache.cached() == 3
    assert closed == ["app:in:1", "app:in:2"]
    assert cycle(cache, cfg, 1)[1] is False, "a closed producer is not handed out again"


def test_sixty_four_partitions_keep_at_most_the_cache_size(cache):
    cfg = config(16)
    for _ in range(3):  # three batches, each over every input partition
        for partition in range(64):
            cycle(cache, cfg, partition)
    assert cache.cached() == 16
    assert len(closed) == 3 * 64 - 16


def test_a_producer_in_a_transaction_is_never_kept(cache):
    cfg = config(4)
    producer, _ = cache.acquire(cfg, cfg.transactional_id("in", 0))
    producer.send_offsets([("in", 0, 1)], None)  # opens a transaction
    assert producer.in_transaction
    cache.release(producer)
    assert cache.cached() == 0 and closed == ["app:in:0"]


def test_the_bound_is_set_from_the_environment_without_reaching_the_producer_settings():
    config = eos.Config.from_env(
        {"EOS_MAX_PRODUCERS_PER_WORKER": "8"}, bootstrap_servers="b:9092", app_id="a", output_topic="o"
    )
    assert config.max_producers_per_worker == 8 and config.producer == {}
    props = eos.Config.from_properties(
        {"bootstrap.servers": "b:9092", "app.id": "a", "output.topic": "o", "max.producers.per.worker": "4"}
    )
    assert props.max_producers_per_worker == 4 and props.producer == {}
