"""What a producer sent and what became of it (Kafka Streams' RecordCollector): output records handed
to librdkafka per record, in bulk, or as whole Arrow columns; the delivery reports; and the check at a
commit (step 7b) that every one was delivered, naming the input record of the first that was not.

Outputs are produced without tracking which input record each came from, which would cost a Python object
per message (docs/design.md, "Delivery reports"). exactly_once passes one shared callback that only notes
the transaction's witnesses (each partition's last delivered offset, for the offset stamp:
`eos._kafka._witness`): librdkafka fails `commit_transaction()` with an abortable error when any message
of the transaction was not delivered. at_least_once has no transaction to fail, so one shared callback
records whether something failed (`DeliveryFailedError` at the flush). Either way the task aborts and
redoes the transaction with `exact` set, where every output carries its input offset and a refusal
names the record. Changelog records keep their partitions' delivered offsets (where a store's checkpoint
points), and in a redo each carries its input offset.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from functools import partial
from itertools import repeat

import numpy as np
import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer

from eos._kafka import _rdkafka, _topics, _translate
from eos._kafka._translate import Delivery, classify_delivery, kafka_error_of
from eos.config import Config
from eos.errors import (
    DeliveryFailedError,
    EosError,
    FencedError,
    OutputTypeError,
    ProduceError,
    TransactionAbortableError,
)
from eos.records import Output, Outputs, to_bytes, to_headers

_FULL_QUEUE_WAIT_S = 0.05
#: a flush waits in steps this long, to stop once a delivery of the transaction failed
_FLUSH_STEP_S = 0.2
_POLL_EVERY = 1000
#: at most this many input records are kept as the suspects of one refusal
_MAX_CANDIDATES = 10_000
#: how long the Arrow path trusts a topic's partition count before asking the metadata again
_PARTITION_COUNT_TTL_S = 60.0


class RecordCollector:
    """The sending side of one producer (`OutputProducer.records`), kept with it between tasks."""

    def __init__(
        self,
        client: Producer,
        config: Config,
        transactional_id: str | None,
        fatal: Callable[[], KafkaError | None],
        begin: Callable[[], None] = lambda: None,
    ) -> None:
        self.config = config
        self._producer = client
        #: the owner's lazy begin (`OutputProducer`): a transaction opens at its first record
        self._begin = begin
        self._transactional = transactional_id is not None
        #: the error that made the producer unusable, as its error_cb received it
        self._fatal = fatal
        self._timeout_s = config.operation_timeout_ms / 1000
        #: the first failed delivery since the last check: (error, output topic, input offset or None)
        self._failure: tuple[KafkaError, str, int | None] | None = None
        #: the input offsets of the outputs that failed as the first failure did, with their largest output
        self._failed_offsets: dict[int, int] = {}
        self._known_topics: set[str] = set()
        #: the Arrow path's partition count per topic, and when it was read
        self._partition_counts: dict[str, tuple[int, float]] = {}
        self._sent = 0
        #: highest delivered offset per tracked (topic, partition): where a changelog now ends
        self.delivered_offsets: dict[tuple[str, int], int] = {}
        #: the open transaction's witnesses: one delivered offset per (topic, partition) it wrote to, the
        #: highest (`eos._kafka._witness`); exactly_once only
        self.witnesses: dict[tuple[str, int], int] = {}
        #: name each output's input record (in a redo, until the next commit)
        self.exact = False
        #: a delivery of the open transaction failed: librdkafka purges records queued behind it and,
        #: after the abort, records produced next; the producer is not to be used again
        #: (`eos._core._task.PartitionTask._drop`)
        self.delivery_failed = False
        #: the delivery callback of untracked outputs: exactly_once only notes the witness (a failure
        #: fails the transaction); at_least_once notes whether one failed
        self._fast_callback = self._on_witness if transactional_id is not None else self._on_report
        #: hands whole Arrow columns to librdkafka (transactional producers only: see _rdkafka.py)
        self._arrow = (
            _rdkafka.ArrowProducer.of(client)
            if config.arrow_produce and transactional_id is not None
            else None
        )

    def produce(self, out: Output, topic: str, in_topic: str, in_partition: int, in_offset: int) -> None:
        """One output record of the input record at `in_offset` (`process` outputs, dead letters)."""
        try:
            value = to_bytes("value", out.value)
            key = to_bytes("key", out.key)
            headers = to_headers(out.headers)
        except OutputTypeError as exc:
            raise ProduceError(
                str(exc), topic=in_topic, partition=in_partition, offset=in_offset, poison=True
            ) from exc
        if topic not in self._known_topics:
            self._check_topic(topic, in_topic, in_partition, in_offset)
        self._begin()
        if self.exact:
            callback = partial(self._on_exact_report, in_offset)
        else:
            callback = self._fast_callback
        partition = -1 if out.partition is None else out.partition
        self._send(
            topic,
            value,
            key,
            partition,
            callback,
            headers,
            in_topic,
            in_partition,
            None,
            in_offset,
            out.timestamp,
        )
        self._sent += 1
        if self._sent % _POLL_EVERY == 0:
            self.serve(f"producing to {topic!r}", 0)

    def produce_changelog(
        self,
        topic: str,
        partition: int,
        records: Iterable[tuple[bytes, bytes | None, list[tuple[str, bytes]], int]],
        in_topic: str,
        in_partition: int,
    ) -> None:
        """A store's open writes to its changelog partition: (key, value, headers, input offset), keys
        and values bytes already (the store's serdes made them). `produce()` per record with its own
        delivery callback cost ~6 µs a write (docs/design.md, "Changelog writes"); here one shared
        callback keeps the changelog's delivered offset, and a failed delivery, known only as such, is
        named by the record-by-record redo (`exact`), which tracks each record's input offset."""
        if topic not in self._known_topics:
            self._check_topic(topic, in_topic, in_partition, -1)
        self._begin()
        send, exact, serve = self._send, self.exact, self.serve
        callback = self._on_changelog_report
        what = f"producing to {topic!r}"
        sent = self._sent
        for key, value, headers, in_offset in records:
            if exact:
                callback = partial(self._on_tracked_report, in_offset)
            send(topic, value, key, partition, callback, headers, in_topic, in_partition, None, in_offset)
            sent += 1
            if sent % _POLL_EVERY == 0:
                serve(what, 0)
        self._sent = sent

    def produce_outputs(self, outputs: Outputs, in_topic: str, in_partition: int) -> int:
        """Every record of `outputs`, in order; returns how many. The hot loop of pass-through batches."""
        n = len(outputs)
        if n == 0:
            return 0
        topic = outputs.topic
        per_record_topic = isinstance(topic, list)
        for i, name in self._new_topics(outputs):
            self._check_topic(name, in_topic, in_partition, outputs.offset_of(i), outputs.origin(i))
        self._begin()
        values, keys = outputs.values, outputs.keys
        plain = not (
            self.exact or per_record_topic or outputs.partitions or outputs.headers or outputs.timestamps
        )
        if (
            plain
            and self._arrow is not None
            and _rdkafka.fits(values)
            and (keys is None or _rdkafka.fits(keys))
        ):
            self._produce_arrow(outputs, in_topic, in_partition)
            return n
        values, keys = _listed(values), _listed(keys)
        if plain:
            # One topic, the partitioner, no headers: the tightest loop (positional arguments only).
            produce = self._producer.produce
            callback = self._fast_callback
            keys = keys if keys is not None else repeat(None)
            for i, value, key in zip(range(n), values, keys, strict=False):  # keys may be repeat(None)
                try:
                    produce(topic, value, key, -1, callback)
                except BufferError:
                    self._send(topic, value, key, -1, callback, None, in_topic, in_partition, outputs, i)
                except KafkaException as exc:
                    raise self._refused(
                        exc, topic, in_topic, in_partition, outputs.offset_of(i), outputs.origin(i)
                    ) from exc
        else:
            topics = topic if per_record_topic else repeat(topic)
            parts = outputs.partitions if outputs.partitions is not None else repeat(None)
            heads = outputs.headers if outputs.headers is not None else repeat(None)
            stamps = outputs.timestamps if outputs.timestamps is not None else repeat(None)
            keys = keys if keys is not None else repeat(None)
            default = self.config.output_topic
            rows = zip(range(n), topics, values, keys, parts, heads, stamps, strict=False)
            for i, t, value, key, p, h, ts in rows:
                t = t if t is not None else default
                p = -1 if p is None else p
                callback = (
                    partial(self._on_exact_report, outputs.offset_of(i))
                    if self.exact
                    else self._fast_callback
                )
                self._send(t, value, key, p, callback, h, in_topic, in_partition, outputs, i, ts)
        # Serve the delivery reports so far (failures surface at the flush).
        self.serve(f"producing outputs of {in_topic}/{in_partition}", 0)
        return n

    def _produce_arrow(self, outputs: Outputs, in_topic: str, in_partition: int) -> None:
        """The plain case's columns in chunks through librdkafka's batch call, serving delivery reports
        between chunks and while the queue is full; a record refused at once fails as in the loop.

        eos places each record itself (`_rdkafka.partitions`, as librdkafka would) and sends the first
        record of each partition in a chunk through `produce()` with the witness callback: a batch's
        delivery reports are dropped, and the stamp needs one delivered offset per partition written."""
        topic, n, at = outputs.topic, len(outputs), 0
        what = f"producing outputs of {in_topic}/{in_partition}"
        count = self._partition_count(topic)
        while at < n:
            stop = min(n, at + _rdkafka.CHUNK)
            placed = _rdkafka.partitions(outputs.keys, at, stop, count, random.randrange(count))
            _, firsts = np.unique(placed, return_index=True)
            for i in np.sort(firsts):
                row = at + int(i)
                value = outputs.values[row].as_py()
                key = None if outputs.keys is None else outputs.keys[row].as_py()
                self._send(
                    topic,
                    value,
                    key,
                    int(placed[i]),
                    self._fast_callback,
                    None,
                    in_topic,
                    in_partition,
                    outputs,
                    row,
                )
            rest = np.ones(stop - at, bool)
            rest[firsts] = False
            rows = np.flatnonzero(rest)
            done = 0
            while done < len(rows):
                enqueued, err = self._arrow.produce(
                    topic, outputs.values, outputs.keys, rows[done:] + at, placed[rows[done:]]
                )
                done += enqueued
                if err is not None:
                    row = at + int(rows[done])
                    raise self._refused(
                        KafkaException(err),
                        topic,
                        in_topic,
                        in_partition,
                        outputs.offset_of(row),
                        outputs.origin(row),
                    )
                self.serve(what, 0 if done == len(rows) else _FULL_QUEUE_WAIT_S)
            at = stop

    def _partition_count(self, topic: str) -> int:
        """`topic`'s partition count as this producer's metadata has it, asked again every minute."""
        count, asked = self._partition_counts.get(topic, (0, 0.0))
        if not count or time.monotonic() - asked > _PARTITION_COUNT_TTL_S:
            with _translate.translating(f"reading the metadata of {topic!r}"):
                metadata = self._producer.list_topics(topic, timeout=self._timeout_s).topics[topic]
            if metadata.error is not None or not metadata.partitions:
                raise _translate.translate_error(
                    metadata.error or KafkaError(KafkaError._UNKNOWN_TOPIC), f"producing to {topic!r}"
                )
            count = len(metadata.partitions)
            self._partition_counts[topic] = (count, time.monotonic())
        return count

    def _new_topics(self, outputs: Outputs) -> list[tuple[int, str]]:
        """(first record index, topic) of each output topic not checked yet."""
        if not isinstance(outputs.topic, list):
            return [] if outputs.topic in self._known_topics else [(0, outputs.topic)]
        seen: dict[str, int] = {}
        for i, t in enumerate(outputs.topic):
            t = t if t is not None else self.config.output_topic
            if t not in self._known_topics and t not in seen:
                seen[t] = i
        return [(i, t) for t, i in seen.items()]

    def _send(
        self,
        topic,
        value,
        key,
        partition,
        callback,
        headers,
        in_topic,
        in_partition,
        outputs,
        at,
        timestamp=None,
    ) -> None:
        """produce() one record, serving delivery reports while the queue is full. `at` is the record's
        index in `outputs`, or its input offset where `outputs` is None; `timestamp` in epoch ms (None:
        the producer's clock, librdkafka's 0; before 1970: the record's own fault, a poison record)."""
        if timestamp is not None and timestamp < 0:
            offset, origin = (at, "") if outputs is None else (outputs.offset_of(at), outputs.origin(at))
            raise before_1970(topic, timestamp, in_topic, in_partition, offset, origin)
        while True:
            try:
                self._producer.produce(topic, value, key, partition, callback, None, timestamp or 0, headers)
                return
            except BufferError:
                self.serve(f"producing to {topic!r}", _FULL_QUEUE_WAIT_S)
            except KafkaException as exc:
                offset, origin = (at, "") if outputs is None else (outputs.offset_of(at), outputs.origin(at))
                raise self._refused(exc, topic, in_topic, in_partition, offset, origin) from exc

    def _refused(
        self, exc: KafkaException, topic: str, in_topic: str, in_partition: int, in_offset: int, origin: str
    ) -> Exception:
        """The EosError for a record produce() refused at once (before any delivery)."""
        err = kafka_error_of(exc)
        if err is not None and err.code() == KafkaError._FATAL:
            # produce() names only "an earlier fatal error"; poll() raises it, or error_cb received it.
            try:
                self.serve(f"producing to {topic!r}", 0)
            except EosError as cause:
                return cause
            fatal = self._fatal()
            if fatal is not None:
                return _translate.translate_error(fatal, f"producing to {topic!r}")
        if self._transactional and _translate.refuses_records(err):
            return self._failed_transaction(topic, in_topic, in_partition, err)
        if err is not None and classify_delivery(err) is Delivery.PERMANENT:
            return refused(
                topic,
                f"{err.str()}{origin}",
                in_topic,
                in_partition,
                in_offset,
                _translate.is_poison(err),
                err,
            )
        return _translate.translate(exc, f"producing to {topic!r}")

    def _failed_transaction(self, topic: str, in_topic: str, in_partition: int, err: KafkaError) -> Exception:
        """produce() refused a record because a delivery of the open transaction failed: the error of
        that delivery (`flush_and_check`: naming its input record where outputs are tracked), not of
        the refused record, which was never sent."""
        try:
            self.flush_and_check(in_topic, in_partition)
        except EosError as failed:
            return failed
        return TransactionAbortableError(
            f"producing to {topic!r}: the transaction takes no more records ({err.str()})", kafka_error=err
        )

    def _check_topic(
        self, topic: str, in_topic: str, in_partition: int, in_offset: int, origin: str = ""
    ) -> None:
        """Fail at once on a missing or unwritable output topic instead of after message.timeout.ms."""
        if topic is None:
            reason = NO_TOPIC
        else:
            reason = _topics.unwritable(self.config, topic)
        if reason is not None:
            raise ProduceError(reason + origin, topic=in_topic, partition=in_partition, offset=in_offset)
        self._known_topics.add(topic)

    def serve(self, what: str, timeout: float, flush: bool = False) -> int:
        """poll() / flush(): they raise a fatal error (a fenced producer, say) as KafkaException."""
        with _translate.translating(what):
            return self._producer.flush(timeout) if flush else self._producer.poll(timeout)

    def _on_report(self, err: KafkaError | None, msg) -> None:
        if err is not None and self._failure is None:
            self._failure = (err, msg.topic(), None)
            self.delivery_failed = True

    def _on_witness(self, err: KafkaError | None, msg) -> None:
        # One partition's reports come in offset order, so the last one seen is the highest.
        if err is None:
            self.witnesses[(msg.topic(), msg.partition())] = msg.offset()
        else:
            self.delivery_failed = True

    def _on_exact_report(self, in_offset: int, err: KafkaError | None, msg) -> None:
        if err is not None:
            self._failed(err, msg, in_offset)
        else:
            self.witnesses[(msg.topic(), msg.partition())] = msg.offset()

    def _on_tracked_report(self, in_offset: int, err: KafkaError | None, msg) -> None:
        if err is not None:
            self._failed(err, msg, in_offset)
            return
        key = (msg.topic(), msg.partition())
        self.witnesses[key] = msg.offset()
        if msg.offset() > self.delivered_offsets.get(key, -1):
            self.delivered_offsets[key] = msg.offset()

    def _on_changelog_report(self, err: KafkaError | None, msg) -> None:
        if err is not None:
            if self._failure is None:
                self._failure = (err, msg.topic(), None)
            self.delivery_failed = True
            return
        key = (msg.topic(), msg.partition())
        # One partition's reports come in offset order: the last one seen is the highest.
        self.witnesses[key] = self.delivered_offsets[key] = msg.offset()

    def _failed(self, err: KafkaError, msg, in_offset: int) -> None:
        """Keep the first failure, and the input offsets whose outputs failed with the same error: a
        broker refuses a whole record batch for one record too large, so the first report may name a
        record that was only in its company. A record librdkafka purged unsent (those queued behind a
        refused batch) says nothing of itself: any other failure is kept in its place."""
        self.delivery_failed = True
        if self._failure is None or (
            _translate.is_purged(self._failure[0]) and not _translate.is_purged(err)
        ):
            self._failure = (err, msg.topic(), in_offset)
            self._failed_offsets = {}
        if err.code() == self._failure[0].code() and len(self._failed_offsets) < _MAX_CANDIDATES:
            size = len(msg.value() or b"") + len(msg.key() or b"")
            self._failed_offsets[in_offset] = max(size, self._failed_offsets.get(in_offset, 0))

    def settle(self, what: str) -> int:
        """Flush: wait for the delivery reports of what was produced, at most `operation_timeout_ms`, and
        no longer once a delivery failed (librdkafka sends nothing more of a failed transaction; its abort
        purges what is queued); how many are still undelivered."""
        deadline = _translate.Deadline(self._timeout_s)
        while True:
            remaining = self.serve(what, min(_FLUSH_STEP_S, deadline.remaining()), flush=True)
            if not remaining or deadline.expired() or self.delivery_failed:
                return remaining

    def flush_and_check(self, in_topic: str, in_partition: int) -> None:
        """Wait for every delivery report; raise for the first failed one, naming its input record when
        it is known (else DeliveryFailedError: redo with `exact` to find it). A refusal that hit the
        outputs of several input records names the one of the largest output and lists them all, largest
        first (`ProduceError.candidates`). Once a delivery failed, it stops waiting: librdkafka sends
        nothing more of a failed transaction, and its abort purges what is queued."""
        what = f"flushing outputs of {in_topic}/{in_partition}"
        remaining = self.settle(what)
        failure, self._failure = self._failure, None
        # the largest output first: a record batch is refused for its largest record
        sizes, self._failed_offsets = self._failed_offsets, {}
        candidates = tuple(sorted(sizes, key=lambda offset: (-sizes[offset], offset)))
        if failure is not None:
            err, out_topic, in_offset = failure
            verdict = classify_delivery(err)
            if verdict is Delivery.FENCED:
                raise FencedError(f"delivery to {out_topic!r}: {err.str()}", kafka_error=err)
            if in_offset is None:
                raise DeliveryFailedError(
                    f"delivery to {out_topic!r} failed: {err.str()} (redo one by one to name the record)",
                    kafka_error=err,
                )
            if verdict is Delivery.PERMANENT:
                offset = candidates[0] if candidates else in_offset
                poison = _translate.is_poison(err)
                raise refused(out_topic, err.str(), in_topic, in_partition, offset, poison, err, candidates)
            raise TransactionAbortableError(f"delivery to {out_topic!r} failed: {err.str()}", kafka_error=err)
        if self.delivery_failed:  # a failure the shared callback saw but does not keep (exactly_once bulk)
            raise DeliveryFailedError(
                f"{what}: a delivery of the transaction failed (redo one by one to name the record)"
            )
        if remaining:
            # Still in flight: they may land later, so this producer's next transaction must not be its.
            raise _translate.in_doubt(
                f"flushing outputs of {in_topic}/{in_partition}",
                f"{remaining} output records undelivered after {self._timeout_s:g}s",
            )

    def take_witnesses(self) -> dict[tuple[str, int], int]:
        """The transaction's witnesses, after the flush of step 7b; the next transaction starts with none."""
        witnesses, self.witnesses = self.witnesses, {}
        return witnesses

    def forget(self) -> None:
        """Drop every failure and witness seen: they belonged to a transaction that was aborted."""
        self.delivery_failed = False
        self._failure = None
        self._failed_offsets = {}
        self.witnesses = {}

    def close(self) -> None:
        self._producer = None
        self._arrow = None


def _listed(column):
    """An output column as the Python values the produce() loop takes."""
    return column.to_pylist() if isinstance(column, pa.Array | pa.ChunkedArray) else column


def refused(
    out_topic: str,
    reason: str,
    in_topic: str,
    in_partition: int,
    in_offset: int | None,
    poison: bool,
    kafka_error: KafkaError | None = None,
    candidates: tuple[int, ...] = (),
) -> ProduceError:
    """The error of an output the broker (or the client) refused for good: the input record named."""
    return ProduceError(
        f"output to {out_topic!r} refused: {reason}",
        topic=in_topic,
        partition=in_partition,
        offset=in_offset,
        candidates=candidates,
        poison=poison,
        kafka_error=kafka_error,
    )


def before_1970(
    out_topic: str, timestamp: int, in_topic: str, in_partition: int, in_offset: int | None, origin: str = ""
) -> ProduceError:
    """The error of an output whose timestamp Kafka cannot carry (before the epoch)."""
    return ProduceError(
        f"output to {out_topic!r}: its timestamp {timestamp} is before 1970{origin}",
        topic=in_topic,
        partition=in_partition,
        offset=in_offset,
        poison=True,
    )


#: what an error says of an output that names no topic where no output_topic is configured
NO_TOPIC = "output record has no topic and no output_topic is configured"
