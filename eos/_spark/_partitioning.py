"""What Spark's Kafka source read for a batch, from the batch's lineage in the JVM (classic Spark).

eos needs two things from it. Which Kafka offset range each Spark partition of the batch read, so that
a task can check that its rows' `topic`/`partition`/`offset` columns are those of the records it was
given (`eos._core._input.check_rows`): a column overwritten in the query, say a `partition` meant as the
output partition as in Spark's Kafka sink, would otherwise make tasks write or skip rows under another
input partition's offsets. And whether each input topic-partition is already one run in one task, in
offset order (D3): Spark's Kafka source gives each topic-partition its own Spark partition unless it was
told to split them (`minPartitions`, `maxRecordsPerPartition`), and then the regrouping shuffle and sort
in `Sink.__call__` only cost time.

`lineage` reads both without running a job: through Py4J in a classic session; under Spark Connect
eos's plugin in the server makes the same walk in the JVM (eos/_spark/jvm/Lineage.java, a copy of this
one, which a test holds to the same answers). Where every step from the batch down to the source is
one-to-one (no shuffle, no union, no coalesce), Spark partition i of the batch is partition i of Spark's
Kafka source, whose input partition names its offset range (`Lineage.partitions`). Through shuffles and
unions only the ranges the batch read are known (`Lineage.ranges`). None: not classic Spark (Spark
Connect hands `foreachBatch` an opaque relation with no lineage a client can read), no Kafka source in
the lineage, or a lineage this Spark version shapes otherwise; the sink then checks the rows against
the `eos_input` column instead (`eos._core._input`).
"""

from __future__ import annotations

import json

import attrs

from eos._core._input import SourceRange
from eos._spark import _server

_ONE_TO_ONE = "org.apache.spark.OneToOneDependency"
#: a data source's RDD (the streaming Kafka source, and batch reads with the v2 source)
_SOURCE_RDD = "org.apache.spark.sql.execution.datasources.v2.DataSourceRDD"
_KAFKA_PARTITION = "org.apache.spark.sql.kafka010.KafkaBatchInputPartition"
#: the RDD of `spark.read.format("kafka")` (a v1 source by default), whose partitions are the ranges
_KAFKA_RDD = "org.apache.spark.sql.kafka010.KafkaSourceRDD"
_SOURCE_RDDS = (_SOURCE_RDD, _KAFKA_RDD)
_MAX_DEPTH = 200


@attrs.frozen
class Lineage:
    #: the range each Spark partition of the batch read, by partition index; None where a step between
    #: the batch and the source is not one-to-one
    partitions: tuple[SourceRange, ...] | None
    #: every range the batch read (a topic-partition split by the source has several)
    ranges: tuple[SourceRange, ...]

    @property
    def one_run_per_task(self) -> bool:
        """Each Spark partition holds one Kafka topic-partition that no other partition holds."""
        if self.partitions is None:
            return False
        tps = [(r.topic, r.partition) for r in self.partitions]
        return len(set(tps)) == len(tps)


def lineage(df, server: bool = False) -> Lineage | None:
    """What Spark's Kafka source read for `df` (see the module), or None where it cannot be known.
    `server`: under Spark Connect, ask eos's plugin in the server (the JVM data path: the sink found
    it there), which walks the lineage in the JVM as `_read` does through Py4J (eos/_spark/jvm/
    Lineage.java; `test_input_coordinates` checks both against the same DataFrames); only a lineage
    naming each Spark partition's range is kept, so that every other batch is written as without it."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:  # Spark Connect: no JVM handle on the client side
        return server_lineage(parse(_server.lineage(df))) if server else None
    try:
        return _read(jdf.queryExecution().toRdd())
    except Exception:  # noqa: BLE001 - not inspectable (another Spark version, ...)
        return None


def server_lineage(found: Lineage | None) -> Lineage | None:
    """`found` (the plugin's) where it names each Spark partition's range, else None (see `lineage`)."""
    return found if found is not None and found.partitions is not None else None


def parse(answer: str) -> Lineage | None:
    """The Lineage of Lineage.java's JSON answer."""
    return decoded(json.loads(answer))


def decoded(found: dict | None) -> Lineage | None:
    """The Lineage of Lineage.java's answer, decoded from JSON."""
    if found is None:
        return None
    ranges = tuple(SourceRange(*r) for r in found["ranges"])
    partitions = found["partitions"]
    return Lineage(None if partitions is None else tuple(SourceRange(*r) for r in partitions), ranges)


def _read(rdd) -> Lineage | None:
    chain = _one_to_one_source(rdd)
    if chain is not None:
        partitions = _ranges_of(chain)
        return None if partitions is None else Lineage(partitions, partitions)
    ranges: list[SourceRange] = []
    seen: set[int] = set()
    todo = [rdd]
    while todo:
        if len(seen) > _MAX_DEPTH:
            return None
        node = todo.pop()
        if node.id() in seen:
            continue
        seen.add(node.id())
        if node.getClass().getName() in _SOURCE_RDDS:
            found = _ranges_of(node)
            if found is None:
                return None  # a source that is not Kafka: its rows carry no coordinates of their own
            ranges.extend(found)
        deps = node.dependencies()
        todo.extend(deps.apply(i).rdd() for i in range(deps.size()))
    return Lineage(None, tuple(ranges)) if ranges else None


def _one_to_one_source(rdd):
    """The source RDD at the end of a chain of one-to-one dependencies from `rdd`, else None."""
    for _ in range(_MAX_DEPTH):
        deps = rdd.dependencies()
        if deps.size() == 0:
            return rdd if rdd.getClass().getName() in _SOURCE_RDDS else None
        if deps.size() != 1:
            return None
        dep = deps.apply(0)
        if dep.getClass().getName() != _ONE_TO_ONE:
            return None
        rdd = dep.rdd()
    return None


def _ranges_of(source) -> tuple[SourceRange, ...] | None:
    """The Kafka range of each partition of a source RDD, or None if one is not a Kafka range."""
    if source.getClass().getName() == _KAFKA_RDD:
        return tuple(_range(part.offsetRange()) for part in source.partitions())
    out = []
    for part in source.partitions():
        one = _only_input(part)
        if one is None or one.getClass().getName() != _KAFKA_PARTITION:
            return None
        out.append(_range(one.offsetRange()))
    return tuple(out)


#: a batch read's range may name the partition's start (-2) or end (-1), resolved when the task runs
_OPEN_END = 2**63 - 1


def _range(offsets) -> SourceRange:
    """A `KafkaOffsetRange` of Spark's Kafka connector (open where it names earliest or latest)."""
    tp = offsets.topicPartition()
    start, end = offsets.fromOffset(), offsets.untilOffset()
    return SourceRange(tp.topic(), tp.partition(), max(start, 0), end if end >= 0 else _OPEN_END)


def _only_input(part):
    """The one input partition a `DataSourceRDDPartition` reads, or None: Spark 3.5-4.1 hold a
    `Seq[InputPartition]` (`inputPartitions`), Spark 4.2 an `Option[InputPartition]` (`inputPartition`)."""
    try:
        inputs = part.inputPartitions()
    except Exception:  # noqa: BLE001 - py4j: no such method (Spark 4.2)
        one = part.inputPartition()
        return one.get() if one.isDefined() else None
    return inputs.apply(0) if inputs.size() == 1 else None
