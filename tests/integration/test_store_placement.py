"""Where stateful partitions run on a real Spark standalone cluster (3 workers, one executor of one core
each, each executor with a state directory of its own, as on separate hosts): in steady state no store is
restored; a worker SIGKILLed inside a transaction loses its stores, and its partitions come back on the
other executors from their snapshots (not their whole changelogs); a worker started again; every count
exact, read_committed. The driver is tests/integration/placement_app.py.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka import Producer

from eos import testing
from tests.chaos.cluster import StandaloneCluster

PARTITIONS = 8
KEYS = 40_000  # 5,000 per partition: a full restore reads at least this many records
STEP = 2_000  # records per steady round


def _produce(bootstrap: str, topic: str, keys: list[int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    for k in keys:
        producer.produce(topic, b"v", b"k%d" % k, partition=k % PARTITIONS)
        producer.poll(0)
    assert producer.flush(60) == 0


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _at(where: dict[tuple[int, int], str], batch: int) -> dict[int, str]:
    """Each partition's worker in the last batch up to `batch` that it ran in."""
    latest: dict[int, tuple[int, str]] = {}
    for (b, p), w in where.items():
        if b <= batch and b >= latest.get(p, (-1, ""))[0]:
            latest[p] = (b, w)
    return {p: w for p, (_, w) in latest.items()}


class Run:
    """The driver's files, and waits on them."""

    def __init__(self, work: Path, driver: subprocess.Popen) -> None:
        self.work, self.driver, self.sent = work, driver, 0

    def batches(self) -> list[dict]:
        return _lines(self.work / "batches.jsonl")

    def where(self) -> dict[tuple[int, int], str]:
        return {(r["batch"], r["partition"]): r["worker"] for r in _lines(self.work / "where.jsonl")}

    def wait_until(self, done, what: str, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            assert self.driver.poll() is None, (
                f"driver exited: {(self.work / 'driver.log').read_text()[-3000:]}"
            )
            assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
            time.sleep(0.5)

    def caught_up(self) -> int:
        """Waits until the query has read everything sent; the last batch id."""
        self.wait_until(lambda: sum(r["in"] for r in self.batches()) >= self.sent, f"{self.sent} read")
        return max(r["batch"] for r in self.batches())

    def send(self, bootstrap: str, topic: str, keys: list[int]) -> None:
        _produce(bootstrap, topic, keys)
        self.sent += len(keys)


@pytest.mark.slow
@pytest.mark.long
def test_stores_stay_put_and_a_lost_worker_comes_back_from_snapshots(bootstrap, names, tmp_path):
    source, output, app = names("place-in"), names("place-out"), names("place-app")
    testing.create_topic(bootstrap, source, PARTITIONS)
    testing.create_topic(bootstrap, output, PARTITIONS)
    cluster = StandaloneCluster(tmp_path / "cluster", workers=3, cores_per_worker=1, memory_per_worker="2g")
    cluster.up()
    work = tmp_path / "work"
    work.mkdir()
    argv = [sys.executable, "-m", "tests.integration.placement_app", cluster.master_url, bootstrap, app]
    argv += [source, output, str(work), *os.environ.get("EOS_TEST_PLACEMENT_APP_ARGS", "").split()]
    log = open(work / "driver.log", "wb")
    driver = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    run = Run(work, driver)
    sent_per_key: dict[int, int] = defaultdict(int)

    def send(keys: list[int]) -> None:
        run.send(bootstrap, source, keys)
        for k in keys:
            sent_per_key[k] += 1

    try:
        # Every executor up before the first batch: the Kafka source prefers executors by their number.
        run.wait_until(lambda: len(cluster.executors()) == 3, "three executors", timeout=120)
        send(list(range(KEYS)))
        seeded = run.caught_up()
        for i in range(8):  # steady state: small batches, every partition in each
            send(random.Random(i).sample(range(KEYS), STEP))
            steady_end = run.caught_up()

        # Worker-1 SIGKILLed while one of its tasks is inside its transaction.
        on_worker_1 = {p for (b, p), w in run.where().items() if b == steady_end and w == "worker-1"}
        assert on_worker_1, f"no partition ran on worker-1 in batch {steady_end}: {run.where()}"
        (work / "arm").touch()
        send(random.Random("kill").sample(range(KEYS), STEP))
        run.wait_until(lambda: (work / "hit").exists(), "a task on worker-1 inside its transaction")
        hit = json.loads((work / "hit").read_text())
        cluster.kill_worker(cluster._procs[2])  # worker-1 (the master is _procs[0])
        (work / "arm").unlink()
        killed_at = run.caught_up()
        for i in range(4):
            send(random.Random(f"lost{i}").sample(range(KEYS), STEP))
            lost_end = run.caught_up()

        cluster.start_worker(1)  # back: a new executor on worker-1
        run.wait_until(lambda: len(cluster.executors()) == 3, "a third executor", timeout=120)
        for i in range(4):
            send(random.Random(f"back{i}").sample(range(KEYS), STEP))
            run.caught_up()
        (work / "stop").touch()
        assert driver.wait(timeout=120) == 0, (work / "driver.log").read_text()[-3000:]
    finally:
        if driver.poll() is None:
            driver.kill()
        cluster.down()

    rows = run.batches()
    where = run.where()
    assert hit["partition"] in on_worker_1, (hit, on_worker_1)

    print({"seeded": seeded, "steady_end": steady_end, "killed_at": killed_at, "lost_end": lost_end})
    phases = {"steady": (seeded, steady_end), "lost": (steady_end, lost_end), "back": (lost_end, 10**9)}
    for name, (low, high) in phases.items():  # the figures, for the record (pytest -s)
        mine = [r for r in rows if low < r["batch"] <= high]
        print(
            name,
            {"batches": len({r["batch"] for r in mine}), "restored": sum(r["restored"] for r in mine)}
            | {"from_snapshot": sum(r["from_snapshot"] for r in mine)},
        )

    # Steady state: every partition's task on the executor of its store, nothing restored.
    steady = [r for r in rows if seeded < r["batch"] <= steady_end]
    assert len({r["batch"] for r in steady}) >= 8, steady
    assert [r for r in steady if r["restored"] or r["from_snapshot"]] == []
    placed = defaultdict(set)
    for r in steady:
        placed[r["partition"]].add(where[(r["batch"], r["partition"])])
    assert all(len(w) == 1 for w in placed.values()), f"partitions moved in steady state: {dict(placed)}"

    # Lost: each partition of worker-1 ran elsewhere, its store rebuilt from its snapshot and the
    # changelog's tail since it, not the whole changelog (a partition's changelog holds >= 5,000 records).
    after = [r for r in rows if r["batch"] >= killed_at]
    for p in on_worker_1:
        first = min((r for r in after if r["partition"] == p), key=lambda r: r["batch"])
        assert where[(first["batch"], p)] != "worker-1", first
        assert first["from_snapshot"] == 1, f"partition {p} not rebuilt from its snapshot: {first}"
    # ... and no other partition moved: the executors alive kept theirs (eos's task affinity; Spark's
    # Kafka source alone re-hashes every partition over the executors left).
    held = _at(where, steady_end)
    for r in (r for r in after if r["batch"] <= lost_end and r["partition"] not in on_worker_1):
        assert where[(r["batch"], r["partition"])] == held[r["partition"]], (r, held)
        assert r["from_snapshot"] == 0 and r["restored"] == 0, r
    # Back: the new executor takes its share (8 partitions on 3 executors: 2 or 3), each from its
    # snapshot; every other partition stays.
    before = _at(where, lost_end)
    back = [r for r in rows if r["batch"] > lost_end]
    moved = {r["partition"] for r in back if where[(r["batch"], r["partition"])] != before[r["partition"]]}
    assert 2 <= len(moved) <= 3, (moved, before)
    for p in range(PARTITIONS):  # each moved once, to worker-1; no other moved
        seen = [where[(r["batch"], p)] for r in sorted(back, key=lambda r: r["batch"]) if r["partition"] == p]
        changes = [w for prev, w in zip([before[p], *seen], seen, strict=False) if w != prev]
        assert changes == (["worker-1"] if p in moved else []), (p, before[p], seen)
    assert sum(r["from_snapshot"] for r in back) == len(moved), back
    assert max(r["restored"] for r in rows if r["batch"] > seeded) < KEYS // PARTITIONS // 2, [
        r for r in rows if r["restored"]
    ]
    assert lost_end > killed_at
    # Output: a read_committed consumer sees each input record's count once, each key's counts 1, 2, ...
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert hanging == []
    counts: dict[bytes, list[int]] = defaultdict(list)
    for r in records:
        counts[r.key].append(int(r.value))
    wrong = {k: seq for k, seq in counts.items() if seq != list(range(1, len(seq) + 1))}
    assert wrong == {}, list(wrong.items())[:5]
    missing = {k: n for k, n in sent_per_key.items() if len(counts.get(b"k%d" % k, [])) != n}
    assert missing == {}, list(missing.items())[:5]
    assert len(records) == run.sent
