"""Whether a batch already has each input topic-partition in its own Spark partition, in offset order.

eos needs all of an input topic-partition's rows of a batch in one task (one transactional.id, one
writer), in offset order. Spark's Kafka source gives each topic-partition its own Spark partition, read
in offset order, unless it was told to split them (`minPartitions`, `maxRecordsPerPartition`); a shuffle
since then would mix them. Where neither happened, the regrouping shuffle and sort in `Sink.__call__`
only cost time: every row would be written to shuffle files and read back to land where it was.

`one_topic_partition_per_task` answers from the batch's lineage in the JVM (classic Spark), without
running a job: every step from the batch down to the source must be one-to-one (no shuffle, no union,
no coalesce), the source must be Spark's Kafka source, and each of its partitions must read exactly one
Kafka topic-partition that no other partition reads. Anything else answers False and the sink regroups.

Under Spark Connect the answer is always False: the batch reaches `foreachBatch` on the server as an
opaque relation (`Scan ExistingRDD` in its plan) with no lineage a client can read, and finding out from
the data means reading the whole batch from Kafka once more, which costs more than the shuffle it would
save (docs/design.md has the measurements). The tasks check the order they receive either way
(`eos._arrow.tp_runs`), so a wrong answer fails loudly instead of committing out of order.
"""

from __future__ import annotations

_ONE_TO_ONE = "org.apache.spark.OneToOneDependency"
_SOURCE_RDD = "org.apache.spark.sql.execution.datasources.v2.DataSourceRDD"
_KAFKA_PARTITION = "org.apache.spark.sql.kafka010.KafkaBatchInputPartition"
_MAX_DEPTH = 200


def one_topic_partition_per_task(df) -> bool:
    """True when each Spark partition of `df` holds the rows of one Kafka topic-partition, in the
    order the source read them, and no two Spark partitions share a topic-partition."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:  # Spark Connect: no JVM handle on the client side
        return False
    try:
        return _check(jdf.queryExecution().toRdd())
    except Exception:  # noqa: BLE001 - not inspectable (another Spark version, ...): regroup
        return False


def _check(rdd) -> bool:
    for _ in range(_MAX_DEPTH):
        deps = rdd.dependencies()
        if deps.size() == 0:
            break
        if deps.size() != 1:
            return False
        dep = deps.apply(0)
        if dep.getClass().getName() != _ONE_TO_ONE:
            return False
        rdd = dep.rdd()
    else:
        return False
    if rdd.getClass().getName() != _SOURCE_RDD:
        return False
    seen: set[tuple[str, int]] = set()
    for part in rdd.partitions():
        source = _only_input(part)
        if source is None or source.getClass().getName() != _KAFKA_PARTITION:
            return False
        tp = source.offsetRange().topicPartition()
        key = (tp.topic(), tp.partition())
        if key in seen:
            return False
        seen.add(key)
    return True


def _only_input(part):
    """The one input partition a `DataSourceRDDPartition` reads, or None: Spark 3.5-4.1 hold a
    `Seq[InputPartition]` (`inputPartitions`), Spark 4.2 an `Option[InputPartition]` (`inputPartition`)."""
    try:
        inputs = part.inputPartitions()
    except Exception:  # noqa: BLE001 - py4j: no such method (Spark 4.2)
        one = part.inputPartition()
        return one.get() if one.isDefined() else None
    return inputs.apply(0) if inputs.size() == 1 else None
