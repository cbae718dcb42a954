"""A store's changelog written as eos writes it (the input offset header on every record), in
transactions, by a transactional producer of its own: for tests and benchmarks of restores without a
pipeline in front."""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import Producer

from eos._names import INPUT_OFFSET_HEADER

#: records per transaction
TRANSACTION = 50_000


def write_changelog(
    bootstrap: str, changelog: str, records: Iterable[tuple[bytes, bytes | None]], first_input: int = 0
) -> int:
    """(key, value or None: a tombstone) into partition 0 of `changelog`, the i-th record from input
    offset `first_input + i`; how many were written."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"{changelog}-filler", "linger.ms": 20}
    )
    producer.init_transactions(30)
    written = 0
    producer.begin_transaction()
    for key, value in records:
        if written and written % TRANSACTION == 0:
            producer.commit_transaction(60)
            producer.begin_transaction()
        header = [(INPUT_OFFSET_HEADER, b"%d" % (first_input + written))]
        while True:
            try:
                producer.produce(changelog, value, key, partition=0, headers=header)
                break
            except BufferError:
                producer.poll(0.05)
        written += 1
    producer.commit_transaction(60)
    return written
