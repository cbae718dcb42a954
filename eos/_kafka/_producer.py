"""The producer an input partition writes through (Kafka Streams' StreamsProducer): one librdkafka
producer, its transactions, and its fatal error; what it sends is its `records` (`_collector.py`), and
the worker keeps it between tasks (`_pool.py`).

exactly_once: one transactional producer per input topic-partition (transactional.id from
`Config.transactional_id`). at_least_once: one idempotent producer per worker process.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from eos._kafka import _clients, _translate
from eos._kafka._collector import RecordCollector
from eos.config import Config
from eos.errors import EosError, FatalError


class OutputProducer:
    """One librdkafka producer: its transactions here, what it sent in `records`."""

    def __init__(self, config: Config, transactional_id: str | None) -> None:
        self.config = config
        self.transactional_id = transactional_id
        with _translate.translating(f"creating the producer {transactional_id or ''}"):
            self._producer = Producer(
                _clients.with_logger(
                    {**_clients.producer_settings(config, transactional_id), "error_cb": self._on_error}
                )
            )
        #: the error that made this producer unusable, as librdkafka reports it through error_cb
        self.fatal_error: KafkaError | None = None
        self._timeout_s = config.operation_timeout_ms / 1000
        self.records = RecordCollector(
            self._producer, config, transactional_id, lambda: self.fatal_error, self._maybe_begin
        )
        self.initialized = False
        self._in_transaction = False
        #: the offset stamp of the last transaction this producer committed (kept between tasks): while
        #: it is still the partition's committed metadata, no other producer has committed since
        self.committed_stamp: str | None = None

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal() and self.fatal_error is None:
            self.fatal_error = err

    def _call(self, what: str, fn, log, transactional: bool = False) -> None:
        """`transactional`: a call of the open transaction, which is not retried once it timed out
        (TransactionInDoubtError: this producer is not used again)."""
        _translate.call(
            fn,
            what=f"{what} ({self.transactional_id})",
            timeout_s=self._timeout_s,
            log=log,
            transactional=transactional,
        )

    def init_transactions(self, log=None, known_topic: str | None = None) -> None:
        """Fence older incarnations. `known_topic` (one that exists: the input topic) is looked up twice
        first: a fresh producer that starts looking for its transaction coordinator before it has a
        connection to a broker it learnt from metadata waits for librdkafka's 500 ms coordinator-query
        timer; after one request it often still does, after two it did not (docs/design.md, "A fresh
        producer's init_transactions")."""
        if known_topic is not None:
            for _ in range(2):
                try:
                    self._producer.list_topics(known_topic, timeout=self._timeout_s)
                except KafkaException:
                    break  # init_transactions reports whatever is wrong with the cluster
        try:
            self._call("init_transactions", lambda: self._producer.init_transactions(self._timeout_s), log)
        except FatalError as exc:
            code = exc.kafka_error.code() if exc.kafka_error is not None else None
            missing = _translate.missing_acl(code, self.transactional_id)
            if missing is None:
                raise
            raise FatalError(
                f"init_transactions ({self.transactional_id}): {missing}", kafka_error=exc.kafka_error
            ) from exc
        self.initialized = True

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction of this producer is open: begun, not yet committed or aborted."""
        return self._in_transaction

    def _maybe_begin(self, log=None) -> None:
        """Begin a transaction where none is open (Kafka Streams' maybeBeginTransaction): called by the
        first produce of one (`records`) and by `send_offsets`, never by a caller, so only this object
        knows whether one is open. An idempotent producer (no transactional.id) has none to begin."""
        if self.transactional_id is not None and not self._in_transaction:
            self._call("begin_transaction", self._producer.begin_transaction, log)
            self._in_transaction = True

    def send_offsets(self, offsets, group_metadata, log=None) -> None:
        """`offsets`: (topic, partition, next offset[, metadata]) per input partition, into the open
        transaction (begun here if nothing was produced in it yet)."""
        self._maybe_begin(log)
        partitions = [TopicPartition(*offset) for offset in offsets]
        self._call(
            "send_offsets_to_transaction",
            lambda: self._producer.send_offsets_to_transaction(partitions, group_metadata, self._timeout_s),
            log,
            transactional=True,
        )

    def commit_transaction(self, log=None) -> None:
        self._call(
            "commit_transaction", lambda: self._producer.commit_transaction(self._timeout_s), log, True
        )
        self._in_transaction = False

    def abort_transaction(self, log=None) -> bool:
        """Abort the open transaction; returns whether a delivery of it failed (a refused record batch:
        this producer is then not to be used again, `eos._core._task.PartitionTask._drop`)."""
        # What is still queued is delivered first: an abort sent while the transaction's partitions are
        # still being added to it fails with INVALID_TXN_STATE, a fatal error (librdkafka issue 4849),
        # as a dead letter's abort right after a refused record did (docs/design.md, "An abort right
        # after a refused record"). The records delivered here are dropped by the abort, as they would
        # be had they been sent already.
        try:
            self.records.settle("delivering before an abort")
        except EosError:
            pass  # the abort below reports what is wrong with the producer
        self._call("abort_transaction", lambda: self._producer.abort_transaction(self._timeout_s), log, True)
        self._in_transaction = False
        # The abort purges what was still queued; those delivery reports (_PURGE_QUEUE) belong to the
        # aborted transaction, not to the next one: serve them now, then forget every failure
        # (docs/design.md, "Finding a refused record").
        self.records.serve("serving the delivery reports of an aborted transaction", 0)
        failed = self.records.delivery_failed
        self.records.forget()
        return failed

    def close(self) -> None:
        """Abandon any open transaction (the next incarnation's init_transactions aborts it)."""
        try:
            if not self._in_transaction:
                self.records.serve("flushing before close", min(self._timeout_s, 5), flush=True)
        finally:
            self.records.close()
            self._producer = None


def fence(config: Config, tps: list[tuple[str, int]], log, seconds: float = 10.0) -> None:
    """Abort whatever transaction the transactional ids of input partitions `tps` hold open, by
    initializing a new incarnation of each: after a failed Spark job, whose cancelled tasks' Python
    workers Spark killed mid-transaction (an open transaction holds every read_committed consumer of
    its output partitions back until transaction_timeout_ms). At most `seconds` in all (a job often
    fails because the brokers cannot be reached; its error waits for this): what is not fenced by then,
    or cannot be, is logged, not raised, and the next task's init_transactions aborts it anyway."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    import attrs

    quick = attrs.evolve(config, operation_timeout_ms=min(config.operation_timeout_ms, int(seconds * 1000)))
    deadline = time.monotonic() + seconds
    left: list[str] = []

    def one(tp: tuple[str, int]) -> None:
        transactional_id = config.transactional_id(*tp)
        if time.monotonic() > deadline:
            left.append(transactional_id)
            return
        try:
            producer = OutputProducer(quick, transactional_id)
            try:
                producer.init_transactions(log, known_topic=tp[0])
            finally:
                producer.close()
        except EosError as exc:
            left.append(transactional_id)
            log.warning("open transaction not fenced", transactional_id=transactional_id, error=str(exc))

    with ThreadPoolExecutor(max_workers=min(16, max(1, len(tps)))) as pool:
        list(pool.map(one, tps))
    if left:
        log.warning("open transactions not fenced", transactional_ids=sorted(left)[:20], count=len(left))
