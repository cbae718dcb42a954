"""A store restored from its changelog, in this process, on a running broker (`make broker-up`): the
records/s, CPU seconds, and how many of the restore consumer's `consume()` calls came back empty after
their wait (the fetch not keeping up), for each state store.

    .venv/bin/python -m bench.probes.restore_rate [--bootstrap 127.0.0.1:9092] [--keys 300000]
        [--rounds 2]

The changelog holds `--keys` keys written as eos writes them (input offset and owner headers) in
transactions of 50,000; each round restores it into an empty state directory with SQLite, then RocksDB
(if rocksdict is installed), then reads it with a plain confluent-kafka loop that does nothing with the
records, at 1 MiB and 16 MiB per partition fetch: the ceiling of a consumer that makes a Python object
per record.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
import uuid

import attrs
from confluent_kafka import Consumer, Producer, TopicPartition

import eos
from eos import testing
from eos._kafka import _changelog, _clients
from eos._log import get_logger
from eos._names import INPUT_OFFSET_HEADER, OWNER_HEADER, changelog_owner
from eos._scope import PartitionScope
from eos.state._backends import available
from eos.state._partition import PartitionState


class _Counted:
    """The restore consumer, with each consume() timed."""

    def __init__(self, consumer, empty: list[float]) -> None:
        self._consumer, self._empty = consumer, empty

    def __getattr__(self, name):
        return getattr(self._consumer, name)

    def consume(self, n: int, timeout: float):
        t = time.perf_counter()
        messages = self._consumer.consume(n, timeout)
        if not messages:
            self._empty.append(time.perf_counter() - t)
        return messages


def plain_read(bootstrap: str, changelog: str, keys: int, fetch_bytes: int) -> float:
    """records/s of a read_committed loop that only counts the records."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"probe-{uuid.uuid4().hex[:6]}",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 10,
            "fetch.queue.backoff.ms": 10,
            "max.partition.fetch.bytes": fetch_bytes,
        }
    )
    consumer.assign([TopicPartition(changelog, 0, 0)])
    t, got, end = time.perf_counter(), 0, False
    while not (end and got >= keys):
        for msg in consumer.consume(10_000, 0.02):
            if msg.error() is None:
                got += 1
            else:
                end = True
    rate = got / (time.perf_counter() - t)
    consumer.close()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--keys", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    source = f"probe-restore-in-{uuid.uuid4().hex[:6]}"
    testing.create_topic(args.bootstrap, source, 1)
    base = eos.Config(
        bootstrap_servers=args.bootstrap,
        app_id=f"probe-restore-{uuid.uuid4().hex[:6]}",
        output_topic=source,
        processing_guarantee="exactly_once",
    )
    changelog = _changelog.ensure_changelog(base, source, "big").name
    owner = changelog_owner(base.app_id, source, "big")
    producer = Producer(
        {"bootstrap.servers": args.bootstrap, "transactional.id": f"{changelog}-filler", "linger.ms": 20}
    )
    producer.init_transactions(30)
    for start in range(0, args.keys, 50_000):
        producer.begin_transaction()
        for i in range(start, min(args.keys, start + 50_000)):
            while True:
                try:
                    headers = [(INPUT_OFFSET_HEADER, b"%d" % i), (OWNER_HEADER, owner)]
                    producer.produce(changelog, b"%d" % i, b"key%d" % i, partition=0, headers=headers)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.commit_transaction(60)
    empty: list[float] = []
    plain = _clients.restore_consumer
    _clients.restore_consumer = lambda config: _Counted(plain(config), empty)
    for _ in range(args.rounds):
        for store in available():
            state_dir = tempfile.mkdtemp()
            config = attrs.evolve(base, state_store=store, state_dir=state_dir)
            state = PartitionState(
                PartitionScope(config, source, 0, 0, None, get_logger(probe="restore_rate")),
                {"big": eos.StoreSpec()},
            )
            empty.clear()
            wall, cpu = time.perf_counter(), time.process_time()
            state.open(args.keys)  # every record of committed input
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            restored = state.restored
            state.close()
            shutil.rmtree(state_dir, ignore_errors=True)
            print(
                f"{store}: {restored / wall:,.0f} records/s, {cpu:.2f} s CPU of {wall:.2f} s,"
                f" {len(empty)} empty consume() calls ({sum(empty) * 1000:.0f} ms)"
            )
        for fetch_bytes in (1 << 20, 16 << 20):
            rate = plain_read(args.bootstrap, changelog, args.keys, fetch_bytes)
            print(f"plain loop, {fetch_bytes >> 20} MiB fetches: {rate:,.0f} records/s")


if __name__ == "__main__":
    main()
