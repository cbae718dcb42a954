"""The producer an input partition writes through, and the per-worker cache that keeps it alive.

exactly_once: one transactional producer per input topic-partition (transactional.id from
`Config.transactional_id`). at_least_once: one idempotent producer per worker process.

`init_transactions()` costs a coordinator round trip and fences every older incarnation, so a producer
is kept across batches in the same Python worker. A kept producer may have been fenced meanwhile by
another worker that took the same partition; the task notices at its first transactional call and
starts again with a fresh one (see `_task.py`).
"""

from __future__ import annotations

import atexit
import threading
from functools import partial
from itertools import repeat

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AclOperation

from eos._kafka import _clients, _rdkafka, _translate
from eos._kafka._clients import producer_settings
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
_POLL_EVERY = 1000
#: at most this many input records are kept as the suspects of one refusal
_MAX_CANDIDATES = 10_000


class OutputProducer:
    """One librdkafka producer and the delivery reports of what it sent.

    Outputs are produced without tracking which input record each came from, which would cost a Python
    object per message (measured 2.6x slower). exactly_once passes no delivery callback at all (another
    25 % faster): librdkafka fails `commit_transaction()` with an abortable error when any message of
    the transaction was not delivered. at_least_once has no transaction to fail, so one shared callback
    records whether something failed (`DeliveryFailedError` at the flush). Either way the task aborts
    and redoes the transaction with `exact` set, where every output carries its input offset and a
    refusal names the record. Changelog records (`track`) always carry theirs, and their delivered
    offsets are kept.
    """

    def __init__(self, config: Config, transactional_id: str | None) -> None:
        self.config = config
        self.transactional_id = transactional_id
        with _translate.translating(f"creating the producer {transactional_id or ''}"):
            self._producer = Producer(
                _clients.with_logger(
                    {**producer_settings(config, transactional_id), "error_cb": self._on_error}
                )
            )
        #: the error that made this producer unusable, as librdkafka reports it through error_cb
        self.fatal_error: KafkaError | None = None
        self._timeout_s = config.operation_timeout_ms / 1000
        #: the first failed delivery since the last check: (error, output topic, input offset or None)
        self._failure: tuple[KafkaError, str, int | None] | None = None
        self._failed_offsets: set[int] = set()
        self._known_topics: set[str] = set()
        self._sent = 0
        #: highest delivered offset per tracked (topic, partition): where a changelog now ends
        self.delivered_offsets: dict[tuple[str, int], int] = {}
        #: name each output's input record (in a redo, until the next commit)
        self.exact = False
        #: the delivery callback of untracked outputs: none where a failure fails the transaction
        self._fast_callback = None if transactional_id is not None else self._on_report
        self.initialized = False
        self.in_transaction = False
        #: hands whole Arrow columns to librdkafka (transactional producers only: see _rdkafka.py)
        self._arrow = (
            _rdkafka.ArrowProducer.of(self._producer)
            if config.arrow_produce and transactional_id is not None
            else None
        )

    # -- producing ----------------------------------------------------------------------------------

    def produce(
        self, out: Output, topic: str, in_topic: str, in_partition: int, in_offset: int, track: bool = False
    ) -> None:
        """One output record of the input record at `in_offset` (`process` outputs, changelog records).
        `track`: keep its delivered offset (changelogs)."""
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
        if track:
            callback = partial(self._on_tracked_report, in_offset)
        elif self.exact:
            callback = partial(self._on_exact_report, in_offset)
        else:
            callback = self._fast_callback
        partition = -1 if out.partition is None else out.partition
        self._send(topic, value, key, partition, callback, headers, in_topic, in_partition, None, in_offset)
        self._sent += 1
        if self._sent % _POLL_EVERY == 0:
            self._serve(f"producing to {topic!r}", 0)

    def produce_outputs(self, outputs: Outputs, in_topic: str, in_partition: int) -> int:
        """Every record of `outputs`, in order; returns how many. The hot loop of pass-through batches."""
        n = len(outputs)
        if n == 0:
            return 0
        topic = outputs.topic
        per_record_topic = isinstance(topic, list)
        for i, name in self._new_topics(outputs):
            self._check_topic(name, in_topic, in_partition, outputs.offset_of(i), outputs.origin(i))
        values, keys = outputs.values, outputs.keys
        plain = not (self.exact or per_record_topic or outputs.partitions or outputs.headers)
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
            keys = keys if keys is not None else repeat(None)
            default = self.config.output_topic
            for i, t, value, key, p, h in zip(range(n), topics, values, keys, parts, heads, strict=False):
                t = t if t is not None else default
                p = -1 if p is None else p
                callback = (
                    partial(self._on_exact_report, outputs.offset_of(i))
                    if self.exact
                    else self._fast_callback
                )
                self._send(t, value, key, p, callback, h, in_topic, in_partition, outputs, i)
        # Serve the delivery reports so far (failures surface at the flush).
        self._serve(f"producing outputs of {in_topic}/{in_partition}", 0)
        return n

    def _produce_arrow(self, outputs: Outputs, in_topic: str, in_partition: int) -> None:
        """The plain case's columns in chunks through librdkafka's batch call, serving delivery reports
        between chunks and while the queue is full; a record refused at once fails as in the loop."""
        topic, n, at = outputs.topic, len(outputs), 0
        what = f"producing outputs of {in_topic}/{in_partition}"
        while at < n:
            stop = min(n, at + _rdkafka.CHUNK)
            enqueued, err = self._arrow.produce(topic, outputs.values, outputs.keys, at, stop)
            at += enqueued
            if err is not None:
                raise self._refused(
                    KafkaException(err),
                    topic,
                    in_topic,
                    in_partition,
                    outputs.offset_of(at),
                    outputs.origin(at),
                )
            self._serve(what, 0 if at == stop else _FULL_QUEUE_WAIT_S)

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
        self, topic, value, key, partition, callback, headers, in_topic, in_partition, outputs, at
    ) -> None:
        """produce() one record, serving delivery reports while the queue is full. `at` is the record's
        index in `outputs`, or its input offset where `outputs` is None."""
        while True:
            try:
                self._producer.produce(topic, value, key, partition, callback, None, 0, headers)
                return
            except BufferError:
                self._serve(f"producing to {topic!r}", _FULL_QUEUE_WAIT_S)
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
                self._serve(f"producing to {topic!r}", 0)
            except EosError as cause:
                return cause
            if self.fatal_error is not None:
                return _translate.translate_error(self.fatal_error, f"producing to {topic!r}")
        if err is not None and classify_delivery(err) is Delivery.PERMANENT:
            return ProduceError(
                f"output to {topic!r} refused: {err.str()}{origin}",
                topic=in_topic,
                partition=in_partition,
                offset=in_offset,
                poison=_translate.is_poison(err),
                kafka_error=err,
            )
        return _translate.translate(exc, f"producing to {topic!r}")

    def _check_topic(
        self, topic: str, in_topic: str, in_partition: int, in_offset: int, origin: str = ""
    ) -> None:
        """Fail at once on a missing or unwritable output topic instead of after message.timeout.ms.

        Asked of the admin client (DescribeTopics): a producer's metadata request for a missing topic
        would create it on a broker with auto.create.topics.enable=true. The answer includes this
        principal's operations on the topic (KIP-430): a refused write fails a transaction in a state
        librdkafka may not abort cleanly, so eos checks WRITE before producing."""

        def refused(reason: str) -> ProduceError:
            return ProduceError(reason + origin, topic=in_topic, partition=in_partition, offset=in_offset)

        if topic is None:
            raise refused("output record has no topic and no output_topic is configured")
        missing = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC}

        def describe():
            futures = _clients.admin(self.config).describe_topics(
                TopicCollection([topic]), request_timeout=self._timeout_s, include_authorized_operations=True
            )
            try:
                return futures[topic].result(self._timeout_s)
            except KafkaException as exc:
                err = kafka_error_of(exc)
                if err is not None and (
                    err.code() in missing or err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
                ):
                    return err
                raise

        found = _translate.call(
            describe, what=f"looking up output topic {topic!r}", timeout_s=self._timeout_s
        )
        if isinstance(found, KafkaError):
            if found.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                raise refused(f"output to {topic!r} refused: {found.str()}")
            raise refused(f"output topic {topic!r} is not available: it does not exist ({found.str()})")
        operations = found.authorized_operations
        if operations is not None and not {AclOperation.WRITE, AclOperation.ALL} & set(operations):
            raise refused(f"output to {topic!r} refused: Topic authorization failed (no WRITE permission)")
        self._known_topics.add(topic)

    def _serve(self, what: str, timeout: float, flush: bool = False) -> int:
        """poll() / flush(): they raise a fatal error (a fenced producer, say) as KafkaException."""
        with _translate.translating(what):
            return self._producer.flush(timeout) if flush else self._producer.poll(timeout)

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal() and self.fatal_error is None:
            self.fatal_error = err

    def _on_report(self, err: KafkaError | None, msg) -> None:
        if err is not None and self._failure is None:
            self._failure = (err, msg.topic(), None)

    def _on_exact_report(self, in_offset: int, err: KafkaError | None, msg) -> None:
        if err is not None:
            self._failed(err, msg, in_offset)

    def _on_tracked_report(self, in_offset: int, err: KafkaError | None, msg) -> None:
        if err is not None:
            self._failed(err, msg, in_offset)
            return
        key = (msg.topic(), msg.partition())
        if msg.offset() > self.delivered_offsets.get(key, -1):
            self.delivered_offsets[key] = msg.offset()

    def _failed(self, err: KafkaError, msg, in_offset: int) -> None:
        """Keep the first failure, and the input offsets whose outputs failed with the same error: a
        broker refuses a whole record batch for one record too large, so the first report may name a
        record that was only in its company."""
        if self._failure is None:
            self._failure = (err, msg.topic(), in_offset)
        if err.code() == self._failure[0].code() and len(self._failed_offsets) < _MAX_CANDIDATES:
            self._failed_offsets.add(in_offset)

    def flush_and_check(self, in_topic: str, in_partition: int) -> None:
        """Wait for every delivery report; raise for the first failed one, naming its input record when
        it is known (else DeliveryFailedError: redo with `exact` to find it). A refusal that hit the
        outputs of several input records names the first and lists them all (`ProduceError.candidates`)."""
        remaining = self._serve(f"flushing outputs of {in_topic}/{in_partition}", self._timeout_s, flush=True)
        failure, self._failure = self._failure, None
        candidates, self._failed_offsets = tuple(sorted(self._failed_offsets)), set()
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
                raise ProduceError(
                    f"output to {out_topic!r} refused: {err.str()}",
                    topic=in_topic,
                    partition=in_partition,
                    offset=candidates[0] if candidates else in_offset,
                    candidates=candidates,
                    poison=_translate.is_poison(err),
                    kafka_error=err,
                )
            raise TransactionAbortableError(f"delivery to {out_topic!r} failed: {err.str()}", kafka_error=err)
        if remaining:
            raise TransactionAbortableError(
                f"{remaining} output records undelivered after {self._timeout_s:g}s"
            )

    # -- transactions (exactly_once) -----------------------------------------------------------------

    def _call(self, what: str, fn, log) -> None:
        _translate.call(fn, what=f"{what} ({self.transactional_id})", timeout_s=self._timeout_s, log=log)

    def init_transactions(self, log=None, known_topic: str | None = None) -> None:
        """Fence older incarnations. `known_topic` (one that exists: the input topic) is looked up twice
        first: a fresh producer that starts looking for its transaction coordinator before it has a
        connection to a broker it learnt from metadata waits for librdkafka's 500 ms coordinator-query
        timer. Measured here: init after one metadata request 2 ms or 504 ms (4 of 8 times 504), after
        two 2-3 ms (8 of 8); without any, 54 or 504 ms."""
        if known_topic is not None:
            for _ in range(2):
                try:
                    self._producer.list_topics(known_topic, timeout=self._timeout_s)
                except KafkaException:
                    break  # init_transactions reports whatever is wrong with the cluster
        self._call("init_transactions", lambda: self._producer.init_transactions(self._timeout_s), log)
        self.initialized = True

    def begin_transaction(self, log=None) -> None:
        self._call("begin_transaction", self._producer.begin_transaction, log)
        self.in_transaction = True

    def send_offsets(self, offsets, group_metadata, log=None) -> None:
        """`offsets`: (topic, partition, next offset[, metadata]) per input partition, into the open
        transaction."""
        partitions = [TopicPartition(*offset) for offset in offsets]
        self._call(
            "send_offsets_to_transaction",
            lambda: self._producer.send_offsets_to_transaction(partitions, group_metadata, self._timeout_s),
            log,
        )

    def commit_transaction(self, log=None) -> None:
        self._call("commit_transaction", lambda: self._producer.commit_transaction(self._timeout_s), log)
        self.in_transaction = False

    def abort_transaction(self, log=None) -> None:
        # What is still queued is delivered first: with librdkafka 2.12 and Kafka 4.1, an abort sent
        # while the transaction's partitions are still being added to it fails with INVALID_TXN_STATE,
        # a fatal error (librdkafka issue 4849): a fresh producer's second transaction, aborted at a
        # record refused as too large, failed so in 3 of 4 runs of 20 tries without this flush, none
        # with it (test_dead_letters.py). The records delivered here are dropped by the abort, as they
        # would be had they been sent already.
        try:
            self._serve("delivering before an abort", self._timeout_s, flush=True)
        except EosError:
            pass  # the abort below reports what is wrong with the producer
        self._call("abort_transaction", lambda: self._producer.abort_transaction(self._timeout_s), log)
        self.in_transaction = False
        # The abort purges what was still queued; those delivery reports (_PURGE_QUEUE) belong to the
        # aborted transaction, not to the next one: serve them now, then forget every failure.
        self._serve("serving the delivery reports of an aborted transaction", 0)
        self._failure = None
        self._failed_offsets = set()

    def close(self) -> None:
        """Abandon any open transaction (the next incarnation's init_transactions aborts it)."""
        try:
            if not self.in_transaction:
                self._serve("flushing before close", min(self._timeout_s, 5), flush=True)
        finally:
            self._producer = None
            self._arrow = None


def _listed(column):
    """An output column as the Python values the produce() loop takes."""
    return column.to_pylist() if isinstance(column, pa.Array | pa.ChunkedArray) else column


# -- per-worker cache ---------------------------------------------------------------------------------

_lock = threading.Lock()
_cache: dict[tuple, OutputProducer] = {}


def _cache_key(config: Config, transactional_id: str | None) -> tuple:
    settings = producer_settings(config, transactional_id)
    return tuple(sorted((k, str(v)) for k, v in settings.items())) + (config.operation_timeout_ms,)


def acquire(config: Config, transactional_id: str | None) -> tuple[OutputProducer, bool]:
    """The worker's producer for this transactional.id and whether it was kept from an earlier task."""
    key = _cache_key(config, transactional_id)
    with _lock:
        producer = _cache.pop(key, None)
    if producer is not None:
        return producer, True
    return OutputProducer(config, transactional_id), False


def release(producer: OutputProducer) -> None:
    """Keep a healthy producer (no open transaction) for the next task in this worker; beyond
    `max_producers_per_worker` producers, close the least recently used (each holds a librdkafka instance:
    threads, connections and buffers; one per input partition ever seen would grow without bound)."""
    if producer.in_transaction:
        discard(producer)
        return
    key = _cache_key(producer.config, producer.transactional_id)
    with _lock:
        closing = [_cache.pop(key, None)]
        _cache[key] = producer  # a dict keeps insertion order: the most recently used is last
        while len(_cache) > producer.config.max_producers_per_worker:
            closing.append(_cache.pop(next(iter(_cache))))
    for old in closing:
        if old is not None and old is not producer:
            discard(old)


def cached() -> int:
    """How many producers this worker keeps."""
    with _lock:
        return len(_cache)


def discard(producer: OutputProducer) -> None:
    try:
        producer.close()
    except Exception:  # noqa: BLE001 - a broken producer is being thrown away anyway
        pass


@atexit.register
def clear() -> None:
    """Close every kept producer (at exit, and `eos._core._worker.reset`)."""
    with _lock:
        producers = list(_cache.values())
        _cache.clear()
    for producer in producers:
        discard(producer)
