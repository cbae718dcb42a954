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
from eos.errors import KafkaClientError

#: the stamp's field
FIELD = "w"
#: Kafka refuses offset metadata over offset.metadata.max.bytes (4096 by default): a stamp stays under
#: this many characters (ASCII), the witnesses taking what the rest leaves
METADATA_LIMIT = 4000
#: the most characters of witnesses a stamp carries
BUDGET = 3000


def encode(witnesses: Mapping[tuple[str, int], int], budget: int = BUDGET) -> tuple[str, int]:
    """`topic:p@offset+p@offset|topic:...` for the stamp, and how many witnesses did not fit `budget`
    characters."""
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
            if size + extra > budget:
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
    #: witnesses no longer in their partition (retention, compaction, a partition truncated or
    #: recreated): nothing to prove either way
    gone: tuple[tuple[str, int, int], ...]
    #: witnesses eos may not read (no READ permission on the topic): not verified
    unverified: tuple[tuple[str, int, int], ...] = ()


_WHERE = "reading back the witnesses of a committed transaction"
_DENIED = frozenset({KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED})


def invisible(config: Config, witnesses: Mapping[tuple[str, int], int], log=None) -> Verdict:
    """Read each witness back: read_committed, then read_uncommitted for those not seen so.

    A witness past its partition's end or before its start is gone; one whose transaction is not yet
    decided there (the stable end at or below it) is waited for, up to transaction_timeout_ms and
    operation_timeout_ms, then a RetriableError: undecided is not aborted."""
    if not witnesses:
        return Verdict((), ())
    timeout = config.operation_timeout_ms / 1000
    committed_reader = _clients.witness_consumer(config, True)
    uncommitted_reader = _clients.witness_consumer(config, False)
    present: dict[tuple[str, int], int] = {}
    gone: list[tuple[str, int, int]] = []
    unverified: list[tuple[str, int, int]] = []
    for (topic, partition), offset in sorted(witnesses.items()):
        try:
            low, high = _watermarks(uncommitted_reader, topic, partition, timeout)
        except _Denied:
            unverified.append((topic, partition, offset))
            continue
        if low <= offset < high:
            present[(topic, partition)] = offset
        else:
            gone.append((topic, partition, offset))
    wait = (max(config.operation_timeout_ms, config.transaction_timeout_ms) + 10_000) / 1000
    _await_decided(committed_reader, present, timeout, time.monotonic() + wait)
    seen = _first_at_or_after(committed_reader, present, timeout)
    unseen = {tp: offset for tp, offset in present.items() if seen.get(tp) != offset}
    there = _first_at_or_after(uncommitted_reader, unseen, timeout)
    aborted = tuple(sorted((t, p, o) for (t, p), o in unseen.items() if there.get((t, p)) == o))
    gone += [(t, p, o) for (t, p), o in unseen.items() if there.get((t, p)) != o]
    if log is not None and gone:
        log.warning(
            "witnesses no longer in their partitions (retention, compaction, a partition truncated or"
            " recreated): not verified",
            witnesses=sorted(gone),
        )
    if log is not None and unverified:
        log.warning(
            "witnesses not verified: no READ permission on their topics (grant it to the app's principal"
            " so that eos can read its committed transactions back)",
            witnesses=unverified,
        )
    return Verdict(aborted, tuple(sorted(gone)), tuple(unverified))


class _Denied(Exception):
    pass


def _watermarks(consumer, topic: str, partition: int, timeout: float) -> tuple[int, int]:
    """(log start, end) of topic/partition: the end is the high watermark read_uncommitted, the last
    stable offset read_committed."""
    tp = TopicPartition(topic, partition)
    try:
        return _translate.call(
            lambda: consumer.get_watermark_offsets(tp, timeout=timeout), what=_WHERE, timeout_s=timeout
        )
    except KafkaClientError as exc:
        if exc.kafka_error is not None and exc.kafka_error.code() in _DENIED:
            raise _Denied from exc
        raise


def _await_decided(consumer, witnesses: Mapping[tuple[str, int], int], timeout: float, until: float) -> None:
    """Wait until the last stable offset of each partition is past its witness: the markers of a
    committed transaction reach its partitions a moment after the offset commit; an abandoned
    transaction of another producer below the witness holds it until transaction.timeout.ms."""
    for (topic, partition), offset in witnesses.items():
        while _watermarks(consumer, topic, partition, timeout)[1] <= offset:
            if time.monotonic() > until:
                raise _translate.translate_error(
                    KafkaError(KafkaError._TIMED_OUT),
                    f"{_WHERE}: {topic}/{partition} has a transaction still open at offset {offset}",
                )
            time.sleep(0.05)


def _first_at_or_after(
    consumer, witnesses: Mapping[tuple[str, int], int], timeout: float
) -> dict[tuple[str, int], int | None]:
    """Per partition, the offset of the first record the consumer reads at or after the witness (None:
    none before the partition's end)."""
    out: dict[tuple[str, int], int | None] = {}
    if not witnesses:
        return out
    assign = [TopicPartition(t, p, offset) for (t, p), offset in witnesses.items()]
    deadline = time.monotonic() + timeout
    _translate.call(lambda: consumer.assign(assign), what=_WHERE, timeout_s=timeout)
    try:
        waiting = set(witnesses)
        while waiting and time.monotonic() < deadline:
            with _translate.translating(_WHERE):
                message = consumer.poll(0.2)
            if message is None:
                continue
            key = (message.topic(), message.partition())
            err = message.error()
            if err is not None and err.code() != KafkaError._PARTITION_EOF:
                raise _translate.translate_error(err, _WHERE)
            if key in waiting:
                out[key] = None if err is not None else message.offset()
                waiting.discard(key)
        if waiting:
            raise _translate.translate_error(
                KafkaError(KafkaError._TIMED_OUT), f"{_WHERE}: {sorted(waiting)} did not answer"
            )
    finally:
        consumer.unassign()
    return out
