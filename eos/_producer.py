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

from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka.admin import AclOperation

from eos import _clients
from eos._clients import producer_settings
from eos._retry import retry_call
from eos.config import Config
from eos.errors import (
    FencedError,
    ProduceError,
    TransactionAbortableError,
    as_eos_error,
    is_fenced,
    is_permanent_delivery_error,
    kafka_error_of,
)
from eos.records import Output, OutputTypeError, to_bytes, to_headers

_POLL_EVERY = 1000


class OutputProducer:
    def __init__(self, config: Config, transactional_id: str | None) -> None:
        self.config = config
        self.transactional_id = transactional_id
        self._producer = Producer({**producer_settings(config, transactional_id), "error_cb": self._on_error})
        #: the error that made this producer unusable, as librdkafka reports it through error_cb
        self.fatal_error: KafkaError | None = None
        self._timeout_s = config.operation_timeout_ms / 1000
        self._failure: tuple[KafkaError, str, int] | None = None
        self._sent = 0
        self._known_topics: set[str] = set()
        #: highest delivered offset per (topic, partition): where a changelog now ends
        self.delivered_offsets: dict[tuple[str, int], int] = {}
        self.initialized = False
        self.in_transaction = False

    # -- producing ----------------------------------------------------------------------------------

    def produce(self, out: Output, topic: str, in_topic: str, in_partition: int, in_offset: int) -> None:
        try:
            value = to_bytes("value", out.value)
            key = to_bytes("key", out.key)
            headers = to_headers(out.headers)
        except OutputTypeError as exc:
            raise ProduceError(str(exc), topic=in_topic, partition=in_partition, offset=in_offset) from exc
        if topic not in self._known_topics:
            self._check_topic(topic, in_topic, in_partition, in_offset)
        kwargs = {"partition": out.partition} if out.partition is not None else {}
        on_delivery = partial(self._on_delivery, in_offset)
        while True:
            try:
                self._producer.produce(topic, value, key, headers=headers, on_delivery=on_delivery, **kwargs)
                break
            except BufferError:
                self._serve(f"producing to {topic!r}", 0.05)  # queue full: serve delivery reports, retry
            except KafkaException as exc:
                err = kafka_error_of(exc)
                if err is not None and err.code() == KafkaError._FATAL:
                    # produce() names only "an earlier fatal error"; poll() raises, or error_cb
                    # receives, the one it was.
                    self._serve(f"producing to {topic!r}", 0)
                    if self.fatal_error is not None:
                        fatal = KafkaException(self.fatal_error)
                        raise as_eos_error(fatal, f"producing to {topic!r}") from exc
                if err is not None and is_permanent_delivery_error(err):
                    raise ProduceError(
                        f"output to {topic!r} refused: {err.str()}",
                        topic=in_topic,
                        partition=in_partition,
                        offset=in_offset,
                    ) from exc
                raise as_eos_error(exc, f"producing to {topic!r}") from exc
        self._sent += 1
        if self._sent % _POLL_EVERY == 0:
            self._serve(f"producing to {topic!r}", 0)

    def _check_topic(self, topic: str, in_topic: str, in_partition: int, in_offset: int) -> None:
        """Fail at once on a missing output topic instead of after message.timeout.ms."""
        try:
            md = self._producer.list_topics(topic, timeout=self._timeout_s)
        except KafkaException as exc:
            raise as_eos_error(exc, f"looking up output topic {topic!r}") from exc
        tmd = md.topics.get(topic)
        if tmd is None or tmd.error is not None:
            reason = tmd.error.str() if tmd is not None and tmd.error is not None else "not found"
            raise ProduceError(
                f"output topic {topic!r} is not available: {reason}",
                topic=in_topic,
                partition=in_partition,
                offset=in_offset,
            )
        if not self._may_write(topic):
            raise ProduceError(
                f"output to {topic!r} refused: Topic authorization failed (no WRITE permission)",
                topic=in_topic,
                partition=in_partition,
                offset=in_offset,
            )
        self._known_topics.add(topic)

    def _may_write(self, topic: str) -> bool:
        """Whether this principal may write `topic`, as the broker reports it (KIP-430). Checked before
        producing: a refused write fails a transaction in a state librdkafka may not abort cleanly."""
        try:
            futures = _clients.admin(self.config).describe_topics(
                TopicCollection([topic]), request_timeout=self._timeout_s, include_authorized_operations=True
            )
            operations = futures[topic].result(self._timeout_s).authorized_operations
        except KafkaException:
            return True  # no answer is no verdict: the produce path reports whatever goes wrong
        return operations is None or bool({AclOperation.WRITE, AclOperation.ALL} & set(operations))

    def _serve(self, what: str, timeout: float, flush: bool = False) -> int:
        """poll() / flush(): they raise a fatal error (a fenced producer, say) as KafkaException."""
        try:
            return self._producer.flush(timeout) if flush else self._producer.poll(timeout)
        except KafkaException as exc:
            raise as_eos_error(exc, what) from exc

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal() and self.fatal_error is None:
            self.fatal_error = err

    def _on_delivery(self, in_offset: int, err: KafkaError | None, msg) -> None:
        if err is not None:
            if self._failure is None:
                self._failure = (err, msg.topic(), in_offset)
            return
        key = (msg.topic(), msg.partition())
        if msg.offset() > self.delivered_offsets.get(key, -1):
            self.delivered_offsets[key] = msg.offset()

    def flush_and_check(self, in_topic: str, in_partition: int) -> None:
        """Wait for every delivery report; raise for the first failed one, naming its input record."""
        remaining = self._serve(f"flushing outputs of {in_topic}/{in_partition}", self._timeout_s, flush=True)
        failure, self._failure = self._failure, None
        if failure is not None:
            err, out_topic, in_offset = failure
            if is_fenced(err):
                raise FencedError(f"delivery to {out_topic!r}: {err.str()}", kafka_error=err)
            if is_permanent_delivery_error(err):
                raise ProduceError(
                    f"output to {out_topic!r} refused: {err.str()}",
                    topic=in_topic,
                    partition=in_partition,
                    offset=in_offset,
                )
            raise TransactionAbortableError(f"delivery to {out_topic!r} failed: {err.str()}", kafka_error=err)
        if remaining:
            raise TransactionAbortableError(
                f"{remaining} output records undelivered after {self._timeout_s:g}s"
            )

    # -- transactions (exactly_once) -----------------------------------------------------------------

    def _call(self, what: str, fn, log) -> None:
        retry_call(fn, what=f"{what} ({self.transactional_id})", timeout_s=self._timeout_s, log=log)

    def init_transactions(self, log=None) -> None:
        self._call("init_transactions", lambda: self._producer.init_transactions(self._timeout_s), log)
        self.initialized = True

    def begin_transaction(self, log=None) -> None:
        self._call("begin_transaction", self._producer.begin_transaction, log)
        self.in_transaction = True

    def send_offsets(self, offsets, group_metadata, log=None) -> None:
        self._call(
            "send_offsets_to_transaction",
            lambda: self._producer.send_offsets_to_transaction(offsets, group_metadata, self._timeout_s),
            log,
        )

    def commit_transaction(self, log=None) -> None:
        self._call("commit_transaction", lambda: self._producer.commit_transaction(self._timeout_s), log)
        self.in_transaction = False

    def abort_transaction(self, log=None) -> None:
        self._failure = None
        self._call("abort_transaction", lambda: self._producer.abort_transaction(self._timeout_s), log)
        self.in_transaction = False

    def close(self) -> None:
        """Abandon any open transaction (the next incarnation's init_transactions aborts it)."""
        try:
            if not self.in_transaction:
                self._producer.flush(min(self._timeout_s, 5))
        finally:
            self._producer = None


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
    """Keep a healthy producer (no open transaction) for the next task in this worker."""
    if producer.in_transaction:
        discard(producer)
        return
    with _lock:
        old = _cache.pop(_cache_key(producer.config, producer.transactional_id), None)
        _cache[_cache_key(producer.config, producer.transactional_id)] = producer
    if old is not None and old is not producer:
        old.close()


def discard(producer: OutputProducer) -> None:
    try:
        producer.close()
    except Exception:  # noqa: BLE001 - a broken producer is being thrown away anyway
        pass


@atexit.register
def _close_all() -> None:
    with _lock:
        producers = list(_cache.values())
        _cache.clear()
    for producer in producers:
        discard(producer)
