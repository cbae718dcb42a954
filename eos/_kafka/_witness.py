"""Witnesses: the proof, read back, that a committed transaction is visible on every partition it wrote.

A transaction's outputs, changelog records and input offset commit together; eos skips the input below
a committed offset on that promise. A broker can break it: a transaction coordinator killed right after
it wrote PREPARE_COMMIT, and restarted before the controller fenced it, can send COMMIT markers from
that unreplicated record to some partitions while its successor aborts the transaction on the others
(docs/design.md, "A transaction committed on some partitions and aborted on others"). The offset then
says "written" for outputs no read_committed reader will ever see.

So every offset eos commits in a transaction carries its witnesses (`w=` in the stamp): per
(topic, partition) the transaction wrote to, the offset of its last record there, from the delivery
reports. A task that starts from a committed offset it did not see commit itself reads each witness
back read_committed (`invisible`): one fetch per partition, before it skips anything. A witness read
read_uncommitted but not read_committed was aborted: the task stops (`CommitLostError`) instead of
skipping input that was never written.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import attrs
from confluent_kafka import KafkaError, TopicPartition

from eos._kafka import _clients, _translate
from eos.config import Config

#: the stamp's field
FIELD = "w"
#: the most characters of witnesses a stamp carries: Kafka refuses offset metadata over
#: offset.metadata.max.bytes (4096 by default), and the rest of the stamp needs room too
BUDGET = 3000


def encode(witnesses: Mapping[tuple[str, int], int]) -> tuple[str, int]:
    """`topic:p@offset+p@offset|topic:...` for the stamp, and how many witnesses did not fit BUDGET."""
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (topic, partition), offset in sorted(witnesses.items()):
        by_topic.setdefault(topic, []).append((partition, offset))
    parts: list[str] = []
    size = left_out = 0
    for topic, entries in by_topic.items():
        kept: list[str] = []
        for partition, offset in entries:
            item = f"{partition}@{offset}"
            extra = len(item) + 1 + (0 if kept else len(topic) + 2)
            if size + extra > BUDGET:
                left_out += 1
                continue
            kept.append(item)
            size += extra
        if kept:
            parts.append(f"{topic}:" + "+".join(kept))
    return "|".join(parts), left_out


def decode(text: str | None) -> dict[tuple[str, int], int]:
    """The witnesses of a stamp's `w=` field."""
    out: dict[tuple[str, int], int] = {}
    for part in (text or "").split("|"):
        topic, _, entries = part.rpartition(":")
        if not topic:
            continue
        for entry in entries.split("+"):
            partition, _, offset = entry.partition("@")
            out[(topic, int(partition))] = int(offset)
    return out


@attrs.frozen
class Verdict:
    #: witnesses present read_uncommitted but not read_committed: their transaction aborted there
    aborted: tuple[tuple[str, int, int], ...]
    #: witnesses read in neither mode (retention or compaction removed them): nothing to prove either way
    gone: tuple[tuple[str, int, int], ...]


def invisible(config: Config, witnesses: Mapping[tuple[str, int], int], log=None) -> Verdict:
    """Read each witness back: read_committed, then read_uncommitted for those not seen so."""
    if not witnesses:
        return Verdict((), ())
    timeout = config.operation_timeout_ms / 1000
    committed = _first_at_or_after(_clients.witness_consumer(config, True), witnesses, timeout, stable=True)
    unseen = {tp: offset for tp, offset in witnesses.items() if committed.get(tp) != offset}
    if not unseen:
        return Verdict((), ())
    uncommitted = _first_at_or_after(_clients.witness_consumer(config, False), unseen, timeout, stable=False)
    aborted = tuple(sorted((t, p, o) for (t, p), o in unseen.items() if uncommitted.get((t, p)) == o))
    gone = tuple(sorted((t, p, o) for (t, p), o in unseen.items() if uncommitted.get((t, p)) != o))
    if log is not None and gone:
        log.warning("witnesses no longer in their partitions: not verified", witnesses=list(gone))
    return Verdict(aborted, gone)


def _first_at_or_after(
    consumer, witnesses: Mapping[tuple[str, int], int], timeout: float, stable: bool
) -> dict[tuple[str, int], int | None]:
    """Per partition, the offset of the first record the consumer reads at or after the witness (None:
    none before the partition's end). `stable`: the consumer is read_committed, so a partition whose
    last stable offset is not yet past the witness (its markers still being written) is waited for."""
    where = "reading back the witnesses of a committed transaction"
    deadline = time.monotonic() + timeout
    assign: list[TopicPartition] = []
    out: dict[tuple[str, int], int | None] = {}
    for (topic, partition), offset in witnesses.items():
        tp = TopicPartition(topic, partition)
        while True:
            low, end = _translate.call(
                lambda tp=tp: consumer.get_watermark_offsets(tp, timeout=timeout),
                what=where,
                timeout_s=timeout,
            )
            if offset < low:
                out[(topic, partition)] = None  # deleted: not there in either mode
                break
            if end > offset:
                assign.append(TopicPartition(topic, partition, offset))
                break
            if not stable:
                out[(topic, partition)] = None
                break
            if time.monotonic() > deadline:  # undecided is not aborted: the task fails and is retried
                raise _translate.translate_error(
                    KafkaError(KafkaError._TIMED_OUT),
                    f"{where}: {topic}/{partition} has a transaction still open at offset {offset}",
                )
            time.sleep(0.05)  # a marker not yet written: the stable end moves past it in milliseconds
    if not assign:
        return out
    _translate.call(lambda: consumer.assign(assign), what=where, timeout_s=timeout)
    try:
        waiting = {(tp.topic, tp.partition) for tp in assign}
        while waiting and time.monotonic() < deadline:
            with _translate.translating(where):
                message = consumer.poll(0.2)
            if message is None:
                continue
            key = (message.topic(), message.partition())
            err = message.error()
            if err is not None and err.code() != KafkaError._PARTITION_EOF:
                raise _translate.translate_error(err, where)
            if key in waiting:
                out[key] = None if err is not None else message.offset()
                waiting.discard(key)
        if waiting:
            raise _translate.translate_error(
                KafkaError(KafkaError._TIMED_OUT), f"{where}: {sorted(waiting)} did not answer"
            )
    finally:
        consumer.unassign()
    return out
