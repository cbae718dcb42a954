"""Whether a task's rows of an input partition begin where the partition's committed offset left off.

The `foreachBatch` sink regroups a batch so that each input partition is one run in one task (D3). The
`format("eos")` data source cannot: Spark hands it the query's partitions as they are. Had the Kafka
source split an input partition across tasks (`minPartitions`, `maxRecordsPerPartition`), or a shuffle
moved its rows, two tasks would write one partition in one batch under one transactional id, and a task
holding a later piece that committed first would move the committed offset past the earlier piece,
whose rows would then be skipped as already written: lost.

So every offset such a task commits is stamped with its query, its batch and its first row's offset
(which a retried task or a re-run batch has again; Spark's partition numbers change when a restarted
driver plans the batch again), and a task that finds its partition's offset committed by another task of
the same batch raises `InputOrderError`
instead of skipping the rows below it (they were not that task's: a shuffle interleaved them, or the
source split the partition); the batch fails, and its ledger shows what each task committed. And before
its first transaction such a task looks at the input between the committed offset and its own first row.
A gap that holds no record (commit markers, aborted or compacted records) is what the source skips too;
a record in it reached another task, or the query filtered it out: the task raises `InputOrderError` and
writes nothing. A query that drops input rows on purpose says so (`eos.input.filtered`), which turns the
look off; it must then keep each input partition in one task (no splitting source options, no shuffle).
Where nothing is committed yet (a new app's first batch), there is nothing to look from: where the
source started is its `startingOffsets`, which the sink does not see.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, TopicPartition

from eos import _clients, _kafka, _offsets
from eos._scope import PartitionScope
from eos.config import Config
from eos.errors import InputOrderError


def unseen_record(config: Config, topic: str, partition: int, committed: int, first: int) -> int | None:
    """The offset of a readable input record at or after `committed` and before `first` (the task's
    first row), or None where there is none."""
    tp = TopicPartition(topic, partition)
    timeout = config.operation_timeout_ms / 1000
    where = f"reading input {topic}/{partition}"
    consumer = _clients.restore_consumer(config)  # read_committed, by assignment, never commits
    low, stable_end = _kafka.call(
        lambda: consumer.get_watermark_offsets(tp, timeout=timeout), what=where, timeout_s=timeout
    )
    start = max(committed, low)
    if start >= min(first, stable_end):
        return None
    _kafka.call(
        lambda: consumer.assign([TopicPartition(topic, partition, start)]), what=where, timeout_s=timeout
    )
    try:
        deadline = _kafka.Deadline(timeout)
        while not deadline.expired():
            with _kafka.translating(where):
                message = consumer.poll(0.5)
            if message is None:
                continue
            err = message.error()
            if err is None:
                return message.offset() if message.offset() < first else None
            if err.code() == KafkaError._PARTITION_EOF:
                return None
            raise _kafka.translate_error(err, where)
        raise _kafka.translate_error(KafkaError(KafkaError._TIMED_OUT), f"{where} from offset {start}")
    finally:
        consumer.unassign()


def require_contiguous(scope: PartitionScope, committed: int | None) -> None:
    """Raise InputOrderError, before anything is written, when input before the task's first row
    (`scope.first`) did not reach this task (see the module's docstring)."""
    if committed is None:
        return  # where the source started is its own (startingOffsets), unknown here
    if scope.first <= committed:
        return  # a re-run: the rows up to the committed offset are skipped, the rest follow on
    unseen = unseen_record(scope.config, scope.topic, scope.partition, committed, scope.first)
    if unseen is None:
        return
    topic, partition, first, batch = scope.topic, scope.partition, scope.first, scope.batch_id
    raise InputOrderError(
        f"input partition {topic}/{partition}: this task's rows of batch {batch} begin at offset {first},"
        f" but input record {unseen} (committed offset: {committed}) did not reach it. Either the Kafka"
        " source split the partition across tasks (minPartitions, maxRecordsPerPartition: drop them) or"
        " the query moved its rows (repartition, union, ...): write such a stream with"
        " foreachBatch(eos.sink(...)), which regroups it. If the query filters input rows out on"
        " purpose, set option eos.input.filtered=true (and keep each input partition in one task)."
        " Nothing of this partition was written.",
        topic=topic,
        partition=partition,
        offset=unseen,
    )


def require_unshared(scope: PartitionScope, entry: _offsets.Committed | None) -> None:
    """Raise InputOrderError when another task of this batch committed this input partition's offset
    (see the module's docstring)."""
    stamp = _offsets.fields(entry.metadata) if entry is not None else None
    if (
        not stamp
        or stamp.get("query") != str(scope.query)
        or stamp.get("batch") != str(scope.batch_id)
        or stamp.get("from") in (None, str(scope.first))
    ):
        return  # not this batch's, or this very run's (a task retried, a batch run again)
    raise InputOrderError(
        f"input partition {scope.where}: the task whose rows of batch {scope.batch_id} begin at offset"
        f" {stamp['from']} committed offset {entry.offset} for it, and this task's begin at {scope.first}:"
        " two tasks hold rows of it: the Kafka"
        " source split the partition (minPartitions, maxRecordsPerPartition) or the query moved its rows"
        " (repartition, union, ...). Write such a stream with foreachBatch(eos.sink(...)), which"
        " regroups it. This task wrote nothing; its rows below that offset, if any, were not written (the"
        " other task committed past them: the ledger and `eos offsets show` have the figures).",
        topic=scope.topic,
        partition=scope.partition,
        offset=entry.offset,
    )
