"""What Spark's Kafka source read for a batch, from the batch's lineage in the JVM (classic Spark).

eos needs two things from it. Which Kafka offset range each Spark partition of the batch read, so that
a task can check that its rows' `topic`/`partition`/`offset` columns are those of the records it was
given (`eos._core._input.check_rows`): a column overwritten in the query, say a `partition` meant as the
output partition as in Spark's Kafka sink, would otherwise make tasks write or skip rows under another
input partition's offsets. And whether each input topic-partition is already one run in one task, in
offset order (D3): Spark's Kafka source gives each topic-partition its own Spark partition unless it was
told to split them (`minPartitions`, `maxRecordsPerPartition`), and then the regrouping shuffle and sort
in `Sink.__call__` only cost time.

`lineage` reads both without running a job. Where every step from the batch down to the source is
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

_CLASS = "eos.spark.Lineage"


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
    """What Spark's Kafka source read for `df` (see the module), or None where it cannot be known. The
    walk down the lineage is the JVM's (eos/_spark/jvm/Lineage.java): one Py4J call in a classic session
    (a walk made from here cost a round trip per RDD and partition); under Spark Connect, one request to
    eos's plugin in the server, made only where `server` says the sink found it (the JVM data path)."""
    from eos._spark import _server
    from eos._spark._affinity import _Jvm

    try:
        jdf = getattr(df, "_jdf", None)
        if jdf is None:  # Spark Connect: no JVM handle on the client side
            return parse(_server.lineage(df)) if server else None
        jvm = _Jvm.of(df.sparkSession)
        return None if jvm is None else parse(jvm.shared(_CLASS).read(jdf))
    except Exception:  # noqa: BLE001 - not inspectable (another Spark version, ...)
        return None


def parse(answer: str) -> Lineage | None:
    """The Lineage of Lineage.java's JSON answer."""
    found = json.loads(answer)
    if found is None:
        return None
    ranges = tuple(SourceRange(*r) for r in found["ranges"])
    partitions = found["partitions"]
    return Lineage(None if partitions is None else tuple(SourceRange(*r) for r in partitions), ranges)
