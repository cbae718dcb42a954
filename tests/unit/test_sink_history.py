"""Sink.history keeps the most recent summaries only: a query that runs for months writes millions of
batches, and its driver must not keep every one of them (each holds a row per input partition)."""

from __future__ import annotations

import pickle

import pytest

import eos
from eos.sink import HISTORY_SIZE, Sink
from tests.support.configs import config


class Quiet:
    def info(self, *args, **kwargs) -> None:
        pass


def stats(batch_id: int, partitions: int = 4) -> list[dict]:
    """What the tasks of one batch return: one row per input partition."""
    return [
        {
            "topic": "orders-in",
            "partition": p,
            "transactional_id": f"app:orders-in:{p}",
            "records_in": 1_000,
            "skipped": 0,
            "records_out": 1_000,
            "transactions": 1,
            "aborted": 0,
            "redos": 0,
            "producers_replaced": 0,
            "producers_created": 0,
            "commit_seconds_max": 0.01,
            "commit_seconds_total": 0.01,
            "first_offset": batch_id * 1_000,
            "last_offset": batch_id * 1_000 + 999,
            "committed_before": batch_id * 1_000,
            "restored": 0,
            "dead_letters": 0,
        }
        for p in range(partitions)
    ]


def write_batches(sink: Sink, start: int, end: int) -> None:
    for batch_id in range(start, end):
        sink._record(sink._summarize(batch_id, stats(batch_id), 0.5, False))


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    return int(fields["VmRSS"].split()[0]) * 1024


def test_driver_memory_stays_flat_over_100k_batch_summaries():
    sink = Sink(config(), history_size=100)
    sink.log = Quiet()
    write_batches(sink, 0, 1_000)
    after_1k = rss_bytes()
    write_batches(sink, 1_000, 100_000)
    after_100k = rss_bytes()
    grown = after_100k - after_1k
    print(f"process RSS after 1,000 summaries {after_1k:,} B, after 100,000 {after_100k:,} B")
    # A summary with 4 partition rows takes ~3 KB: keeping all 99,000 more would add ~300 MB.
    assert grown < 32 * 1024 * 1024, f"RSS grew by {grown:,} bytes over 99,000 more summaries"
    assert len(sink.history) == 100
    assert [s.batch_id for s in sink.history][:2] == [99_900, 99_901]
    assert sink.last.batch_id == 99_999
    assert sink.summary(99_950).batch_id == 99_950
    assert sink.summary(5) is None, "a batch older than the history is forgotten"


def test_the_memory_check_would_see_an_unbounded_history():
    """The same figures with a history that keeps everything: the check above can fail."""
    sink = Sink(config(), history_size=10**9)
    sink.log = Quiet()
    write_batches(sink, 0, 1_000)
    before = rss_bytes()
    write_batches(sink, 1_000, 30_000)
    assert rss_bytes() - before > 32 * 1024 * 1024
    assert len(sink.history) == 30_000


def test_history_size_default_validation_and_survives_pickling():
    assert eos.sink(config()).history.maxlen == HISTORY_SIZE
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValueError, match="history_size"):
            eos.sink(config(), history_size=bad)
    copy = pickle.loads(pickle.dumps(eos.sink(config(), history_size=7)))  # what Spark Connect does
    assert copy.history.maxlen == 7 and len(copy.history) == 0
