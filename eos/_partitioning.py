"""Whether a batch already has each input topic-partition in its own Spark partition.

eos needs all of an input topic-partition's rows of a batch in one task (one transactional.id, one
writer). Spark's Kafka source gives each topic-partition its own Spark partition unless it was told
to split them (`minPartitions`, `maxRecordsPerPartition`); a shuffle since then would mix them. Where
neither happened, the regrouping shuffle in `Sink.__call__` only costs time: every row would be
written to shuffle files and read back to land in the partition it was already in.

`one_topic_partition_per_task` answers from the batch's RDD lineage, without running a job: every
step from the batch down to the source must be one-to-one (no shuffle, no union, no coalesce), the
source must be Spark's Kafka source, and each of its partitions must read exactly one Kafka
topic-partition that no other partition reads. Anything else, including anything it cannot inspect,
answers False, and the sink regroups as before.
"""

from __future__ import annotations

_ONE_TO_ONE = "org.apache.spark.OneToOneDependency"
_SOURCE_RDD = "org.apache.spark.sql.execution.datasources.v2.DataSourceRDD"
_KAFKA_PARTITION = "org.apache.spark.sql.kafka010.KafkaBatchInputPartition"
_MAX_DEPTH = 200


def one_topic_partition_per_task(df) -> bool:
    """True when each Spark partition of `df` holds the rows of one Kafka topic-partition, in the
    order the source read them, and no two Spark partitions share a topic-partition."""
    try:
        return _check(df._jdf.queryExecution().toRdd())
    except Exception:  # noqa: BLE001 - not inspectable (another Spark, Spark Connect, ...): regroup
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
        inputs = part.inputPartitions()
        if inputs.size() != 1:
            return False
        source = inputs.apply(0)
        if source.getClass().getName() != _KAFKA_PARTITION:
            return False
        tp = source.offsetRange().topicPartition()
        key = (tp.topic(), tp.partition())
        if key in seen:
            return False
        seen.add(key)
    return True
