"""Prove a pipeline's Kafka output exactly-once: seed an input topic with unique sequence ids, then read
the output topic with read_committed and compare it with that input — nothing missing, nothing twice,
order kept per input partition, no transaction left hanging (a marker written to every output partition
must become visible). eos's tests and `make demo` prove eos with it; users run the same check on their
own pipelines.
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping

import attrs

from eos._kafka import _reads, _topics
from eos._kafka._writes import PlainProducer

__all__ = [
    "MARKER_HEADER",
    "Comparison",
    "HistoryChecker",
    "OutputRecord",
    "compare",
    "create_topic",
    "expected_running_counts",
    "flatten",
    "parse_value",
    "produce_sequence",
    "read_topic",
    "seq_value",
    "verify_exactly_once",
    "write_markers",
]

#: the header of the markers `write_markers` writes; `read_topic` leaves records with it out
MARKER_HEADER = "eos.marker"


def create_topic(
    bootstrap: str, name: str, partitions: int, config: Mapping[str, str] | None = None, timeout: float = 30
) -> None:
    """Create a topic (replication factor: the brokers' default.replication.factor) and wait for leaders."""
    _topics.create_bare(bootstrap, name, partitions, config, timeout)


def seq_value(topic: str, partition: int, seq: int) -> bytes:
    """The value `produce_sequence` writes: unique per record, so that the check can name duplicates,
    losses and order without trusting offsets."""
    return f"{topic}|{partition}|{seq}".encode()


def parse_value(value: bytes) -> tuple[str, int, int]:
    """(topic, partition, seq) of a `seq_value`."""
    topic, partition, seq = value.decode().rsplit("|", 2)
    return topic, int(partition), int(seq)


def produce_sequence(
    bootstrap: str, topic: str, partitions: int, per_partition: int, start: int = 0
) -> dict[int, list[bytes]]:
    """Write `per_partition` records with unique, increasing sequence ids to each partition."""
    producer = PlainProducer(bootstrap, {"enable.idempotence": True, "linger.ms": 20})
    sent: dict[int, list[bytes]] = defaultdict(list)
    for seq in range(start, start + per_partition):
        for partition in range(partitions):
            value = seq_value(topic, partition, seq)
            producer.produce(topic, value, key=f"k{seq % 97}".encode(), partition=partition)
            sent[partition].append(value)
    if producer.flush(60):
        raise RuntimeError("input records not delivered")
    return dict(sent)


@attrs.frozen
class OutputRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple
    #: epoch milliseconds (the record's create time, or the broker's with LogAppendTime)
    timestamp: int | None = None


def write_markers(bootstrap: str, topic: str) -> str:
    """Write a non-transactional marker to every partition of `topic`; returns the marker id.

    A read_committed reader sees a marker only once every transaction before it has ended.
    """
    marker = uuid.uuid4().hex
    producer = PlainProducer(bootstrap)
    for partition in producer.partitions(topic, timeout=10):
        producer.produce(topic, b"", partition=partition, headers=[(MARKER_HEADER, marker.encode())])
    if producer.flush(30):
        raise RuntimeError("markers not delivered")
    return marker


def read_topic(
    bootstrap: str,
    topic: str,
    isolation: str = "read_committed",
    marker: str | None = None,
    timeout: float = 60,
) -> tuple[list[OutputRecord], list[int]]:
    """Read a whole topic. With `marker`, read until that marker is seen in every partition.

    Returns the records (markers left out) and the partitions where the marker never became visible
    within `timeout` (a hanging transaction), or where the end was not reached.
    """
    records: list[OutputRecord] = []
    waiting: set[int] = set()
    for msg in _reads.whole_topic(
        bootstrap, topic, isolation, waiting, to_end=marker is None, timeout=timeout
    ):
        headers = tuple(msg.headers() or ())
        if any(k == MARKER_HEADER for k, _ in headers):
            if marker is not None and any(k == MARKER_HEADER and v == marker.encode() for k, v in headers):
                waiting.discard(msg.partition())
            continue
        records.append(
            OutputRecord(msg.partition(), msg.offset(), msg.key(), msg.value(), headers, msg.timestamp()[1])
        )
    return records, sorted(waiting)


@attrs.frozen
class Comparison:
    expected: int
    received: int
    missing: int
    duplicated: int
    out_of_order: int
    unexpected: int
    hanging_partitions: tuple[int, ...] = ()
    #: emitted running counts that differ from the recomputation (stateful outputs only)
    state_mismatches: int = 0

    @property
    def exactly_once(self) -> bool:
        return not (
            self.missing
            or self.duplicated
            or self.out_of_order
            or self.unexpected
            or self.hanging_partitions
            or self.state_mismatches
        )


class HistoryChecker:
    """The exactly-once check, fed one output record at a time (the records of each output partition
    in offset order), so a consumer can run it while faults are still being injected.

    Order: within each output partition, the records of one input partition must keep their input
    sequence order (a partitioner may spread one input partition over several output partitions).
    With `running_counts` (stateful outputs `<value>#<count>`), each emitted count is also compared
    with the recomputation from the input.
    """

    def __init__(self, expected: Iterable[bytes], running_counts: Mapping[bytes, int] | None = None):
        self.expected = Counter(expected)
        self.running_counts = running_counts
        self.seen: Counter = Counter()
        self.received = self.duplicated = self.out_of_order = self.unexpected = self.state_mismatches = 0
        self._last_seq: dict[tuple[int, str, int], int] = {}

    def add(self, record: OutputRecord) -> None:
        self.received += 1
        value = record.value
        if self.running_counts is not None:
            value, _, count = value.rpartition(b"#")
            if self.running_counts.get(value) != int(count or -1):
                self.state_mismatches += 1
        if value not in self.expected:
            self.unexpected += 1
            return
        self.seen[value] += 1
        if self.seen[value] > self.expected[value]:
            self.duplicated += 1  # a duplicate is counted as such, not also as out of order
            return
        topic, in_partition, seq = parse_value(value)
        key = (record.partition, topic, in_partition)
        last = self._last_seq.get(key)
        if last is not None and seq < last:
            self.out_of_order += 1
        else:
            self._last_seq[key] = seq

    def result(self, hanging_partitions: Iterable[int] = ()) -> Comparison:
        return Comparison(
            expected=sum(self.expected.values()),
            received=self.received,
            missing=sum(max(0, n - self.seen[v]) for v, n in self.expected.items()),
            duplicated=self.duplicated,
            out_of_order=self.out_of_order,
            unexpected=self.unexpected,
            hanging_partitions=tuple(hanging_partitions),
            state_mismatches=self.state_mismatches,
        )


def compare(
    expected: Iterable[bytes],
    received: Iterable[OutputRecord],
    hanging_partitions: Iterable[int] = (),
    running_counts: Mapping[bytes, int] | None = None,
) -> Comparison:
    """Compare a whole output history with the input values it should carry exactly once."""
    checker = HistoryChecker(expected, running_counts)
    for record in sorted(received, key=lambda r: (r.partition, r.offset)):
        checker.add(record)
    return checker.result(hanging_partitions)


def verify_exactly_once(
    bootstrap: str, output_topic: str, expected: Iterable[bytes], timeout: float = 90
) -> Comparison:
    """Write markers, read the output with read_committed until they are visible, and compare."""
    marker = write_markers(bootstrap, output_topic)
    records, hanging = read_topic(bootstrap, output_topic, marker=marker, timeout=timeout)
    return compare(expected, records, hanging)


def flatten(sent: Mapping[int, list[bytes]]) -> Iterator[bytes]:
    """Every value of `produce_sequence`'s result, the `expected` of `compare`."""
    for values in sent.values():
        yield from values


def expected_running_counts(sent: Mapping[int, list[bytes]], keys: int = 97) -> dict[bytes, int]:
    """For `produce_sequence` input: each input value's running count of its key within its partition,
    recomputed from the input alone — the `running_counts` of `compare` for a pipeline that appends
    `#<count>` to each value (examples/pipeline.py --stateful)."""
    out: dict[bytes, int] = {}
    for values in sent.values():
        counts: Counter = Counter()
        for value in values:
            key = parse_value(value)[2] % keys
            counts[key] += 1
            out[value] = counts[key]
    return out
