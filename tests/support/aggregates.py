"""What an aggregation written in input_mode "any" (examples/pipeline.py --aggregate) must leave in its
output, recomputed from `produce_sequence` input alone, read back with read_committed."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

import attrs

from eos.testing import OutputRecord, parse_value, read_topic, write_markers


@attrs.frozen
class AggregateCheck:
    received: int
    #: the same (key, result) written twice
    duplicated: int
    #: a key's running counts not strictly increasing (update mode)
    not_increasing: int
    #: a key's last count, or a window's count, that differs from the recomputation
    wrong: int
    #: keys (or closed windows) with no result at all
    missing: int
    #: keys or windows the input does not have
    unexpected: int

    @property
    def exact(self) -> bool:
        return not (self.duplicated or self.not_increasing or self.wrong or self.missing or self.unexpected)


def read_output(bootstrap: str, topic: str, timeout: float = 90) -> list[OutputRecord]:
    """Every committed record of `topic` (read_committed, up to markers written now), in log order."""
    marker = write_markers(bootstrap, topic)
    records, hanging = read_topic(bootstrap, topic, marker=marker, timeout=timeout)
    assert not hanging, f"partitions {hanging} of {topic} end in an open transaction"
    return sorted(records, key=lambda r: (r.partition, r.offset))


def key_counts(sent: Mapping[int, list[bytes]], keys: int = 97) -> Counter:
    """The true count per Kafka key (`k<seq % 97>`) of `produce_sequence` input."""
    return Counter(f"k{parse_value(v)[2] % keys}".encode() for values in sent.values() for v in values)


def check_running_counts(records: Iterable[OutputRecord], truth: Mapping[bytes, int]) -> AggregateCheck:
    """`--aggregate count` (update mode): per key, counts strictly increase, no (key, count) twice, and
    the last one is the key's true count. A key's records share an output partition, so log order is
    the order they were written in."""
    seen: dict[bytes, list[int]] = defaultdict(list)
    received = 0
    for r in records:
        received += 1
        seen[r.key].append(int(r.value.split(b"|")[0]))
    duplicated = sum(len(c) - len(set(c)) for c in seen.values())
    not_increasing = sum(1 for c in seen.values() for a, b in zip(c, c[1:], strict=False) if b <= a)
    wrong = sum(1 for k, c in seen.items() if k in truth and c[-1] != truth[k])
    return AggregateCheck(
        received=received,
        duplicated=duplicated,
        not_increasing=not_increasing,
        wrong=wrong,
        missing=sum(1 for k in truth if k not in seen),
        unexpected=sum(1 for k in seen if k not in truth),
    )


def window_counts(sent: Mapping[int, list[bytes]], width: int = 10) -> dict[tuple[bytes, int], int]:
    """`--aggregate window`: the true count per (input partition as key, window start), for the windows
    the final watermark (the largest event time, delay 0) has closed."""
    counts: Counter = Counter()
    latest = 0
    for values in sent.values():
        for v in values:
            _, partition, seq = parse_value(v)
            counts[(str(partition).encode(), seq - seq % width)] += 1
            latest = max(latest, seq)
    return {w: n for w, n in counts.items() if w[1] + width <= latest}


def check_windows(records: Iterable[OutputRecord], truth: Mapping[tuple[bytes, int], int]) -> AggregateCheck:
    """`--aggregate window` (append mode): each closed window's count exactly once, and right."""
    seen: Counter = Counter()
    values: dict[tuple[bytes, int], int] = {}
    received = 0
    for r in records:
        received += 1
        start, count = (int(x) for x in r.value.split(b"|"))
        seen[(r.key, start)] += 1
        values[(r.key, start)] = count
    return AggregateCheck(
        received=received,
        duplicated=sum(n - 1 for n in seen.values()),
        not_increasing=0,
        wrong=sum(1 for w, n in values.items() if w in truth and n != truth[w]),
        missing=sum(1 for w in truth if w not in seen),
        unexpected=sum(1 for w in seen if w not in truth),
    )
