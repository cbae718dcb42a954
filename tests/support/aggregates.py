"""What an aggregation written in input_mode "any" (examples/pipeline.py --aggregate) must leave in its
output, recomputed from `produce_sequence` input alone, read back with read_committed."""

from __future__ import annotations

from collections import Counter
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


class RunningCounts:
    """`--aggregate count` (update mode), fed one output record at a time in each output partition's
    log order (a key's records share an output partition): per key, counts strictly increase and no
    (key, count) comes twice; at the end, each key's last count is its true count."""

    def __init__(self, truth: Mapping[bytes, int]) -> None:
        self.truth = truth
        self.last: dict[bytes, int] = {}
        self.seen: set[tuple[bytes, int]] = set()
        self.received = self.duplicated = self.not_increasing = self.unexpected = 0

    def add(self, record: OutputRecord) -> None:
        self.received += 1
        count = int(record.value.split(b"|")[0])
        if record.key not in self.truth:
            self.unexpected += 1
            return
        if (record.key, count) in self.seen:
            self.duplicated += 1
        elif record.key in self.last and count <= self.last[record.key]:
            self.not_increasing += 1
        self.seen.add((record.key, count))
        self.last[record.key] = count

    def result(self, final: bool = True) -> AggregateCheck:
        """`final`: the output is complete, so last counts and missing keys are judged too."""
        return AggregateCheck(
            received=self.received,
            duplicated=self.duplicated,
            not_increasing=self.not_increasing,
            wrong=sum(1 for k, n in self.last.items() if n != self.truth[k]) if final else 0,
            missing=sum(1 for k in self.truth if k not in self.last) if final else 0,
            unexpected=self.unexpected,
        )


def check_running_counts(records: Iterable[OutputRecord], truth: Mapping[bytes, int]) -> AggregateCheck:
    checker = RunningCounts(truth)
    for record in records:
        checker.add(record)
    return checker.result()


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


#: the running count per key as bytes: what the count queries below write
COUNT_COLUMNS = ("key", "CAST(CAST(count AS STRING) AS BINARY) AS value")


def any_config(bootstrap: str, app_id: str, **settings):
    """An exactly_once `input_mode="any"` Config (`output_topic` or another output among `settings`)."""
    import eos

    return eos.Config(
        bootstrap_servers=bootstrap,
        app_id=app_id,
        processing_guarantee="exactly_once",
        input_mode="any",
        **settings,
    )


def start_counts(spark, config, source: str, checkpoint, columns=COUNT_COLUMNS, sink=None, **functions):
    """`groupBy("key").count()` of `source` (read with eos.read_stream), selected as `columns`, written in
    update mode by `sink` (default `eos.sink(config, **functions)`) until the input available now is
    done: the started query."""
    import eos

    counts = eos.read_stream(spark, config, [source]).groupBy("key").count()
    return (
        counts.selectExpr(*columns)
        .writeStream.outputMode("update")
        .foreachBatch(sink or eos.sink(config, **functions))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
