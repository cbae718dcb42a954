"""Every error eos raises, and the one place where confluent-kafka's errors are classified.

    EosError
    ├── ConfigError             a setting is invalid; names the field (also a ValueError)
    ├── BatchSchemaError        the batch lacks or mistypes a column; raised before any transaction
    ├── BrokerUnreachableError  no broker answered within the deadline
    ├── AuthenticationError     the broker refused the credentials (SASL/SSL)
    ├── TopicNotFoundError      an input or output topic does not exist; raised before any transaction
    ├── ForeignOffsetError      the group's committed input offset was not committed by this app;
    │                           raised before anything of that input partition is written or skipped
    ├── ChangelogError          a state store's changelog topic cannot back it (too few partitions,
    │                           not compacted); raised before the store is used
    ├── RecordError             one input record could not become output; names its topic/partition/offset.
    │   │                       The open transaction was aborted: committed output and offsets are unchanged.
    │   ├── ProcessError        the user's `process` / `process_batch` function raised or returned bad output
    │   ├── ProduceError        the client or broker refused the output (too large, no topic, not authorized)
    │   └── InputOrderError     an input partition's rows reached a task split or out of offset order
    └── KafkaClientError        a Kafka client call failed; the subclass is its class in librdkafka's model:
        ├── RetriableError      the same call may succeed again (raised once its deadline has passed)
        ├── TransactionAbortableError
        │   │                   abort the transaction, mark the partition's state unclean, redo from the
        │   │                   committed offset
        │   └── DeliveryFailedError
        │                       an output was not delivered; the redo writes record by record to name it
        └── FatalError          the producer is unusable: close it and raise
            ├── FencedError     a newer incarnation owns the transactional.id: this attempt is a zombie
            └── TransactionTimeoutError
                                the transaction outlived transaction.timeout.ms and the broker aborted it

`classify` / `classify_delivery` are the only functions that look at a confluent-kafka error code.
This module imports nothing from eos, so every other module can import it.
"""

from __future__ import annotations

import enum

from confluent_kafka import KafkaError, KafkaException


class EosError(Exception):
    """Base class of every error eos raises."""


class ConfigError(EosError, ValueError):
    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"invalid config {field!r}: {message}")


class BatchSchemaError(EosError, ValueError):
    """The micro-batch cannot be written; nothing was produced or committed."""


class BrokerUnreachableError(EosError):
    """No Kafka broker answered within the configured deadline."""


class AuthenticationError(EosError):
    """The broker refused this client's credentials."""


_AUTHENTICATION_CODES = frozenset({KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED})


def is_authentication_error(err: KafkaError | None) -> bool:
    return err is not None and err.code() in _AUTHENTICATION_CODES


class TopicNotFoundError(EosError):
    def __init__(self, topic: str, role: str = "output") -> None:
        self.topic = topic
        super().__init__(f"{role} topic {topic!r} does not exist (eos creates only changelog topics)")


class ForeignOffsetError(EosError):
    """The committed offset of an input partition carries no stamp of this eos app."""

    def __init__(self, message: str, *, group: str, topic: str, partition: int, offset: int) -> None:
        self.group = group
        self.topic = topic
        self.partition = partition
        self.offset = offset
        super().__init__(message)


class ChangelogError(EosError):
    """A changelog topic cannot back its store."""


class RecordError(EosError):
    def __init__(self, message: str, *, topic: str, partition: int, offset: int) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        super().__init__(f"{message} (input record {topic}/{partition}@{offset}; transaction aborted)")


class ProcessError(RecordError):
    """The user's `process` function raised on an input record."""


class ProduceError(RecordError):
    """The output of an input record was refused by the Kafka client or broker.

    `candidates`: where one refusal hit the outputs of several input records (a broker refuses a whole
    record batch), their offsets; the task writes each alone to find the one refused on its own.
    """

    def __init__(
        self, message: str, *, topic: str, partition: int, offset: int, candidates: tuple[int, ...] = ()
    ) -> None:
        self.candidates = candidates
        super().__init__(message, topic=topic, partition=partition, offset=offset)


class InputOrderError(RecordError):
    """The rows of an input topic-partition did not reach one task as one run in offset order."""


class KafkaClientError(EosError):
    def __init__(self, message: str, *, kafka_error: KafkaError | None = None) -> None:
        self.kafka_error = kafka_error
        super().__init__(message)


class RetriableError(KafkaClientError):
    """A retriable error that outlasted its deadline."""


class TransactionAbortableError(KafkaClientError):
    """The current transaction must be aborted; the producer stays usable."""


class DeliveryFailedError(TransactionAbortableError):
    """An output record of the open transaction was not delivered. Bulk writes do not track which input
    record each output came from; the task aborts and redoes the transaction record by record, which
    names the record (a ProduceError) or succeeds."""


class FatalError(KafkaClientError):
    """The producer (or client) cannot be used again."""


class FencedError(FatalError):
    """Another incarnation of the same transactional.id has taken over: this attempt is a zombie."""


class TransactionTimeoutError(FatalError):
    """The open transaction took longer than transaction_timeout_ms, so the broker aborted it (and fenced
    the producer): `process` is slower than the transaction allows, not a zombie."""


class Kind(enum.Enum):
    RETRIABLE = "retriable"
    ABORTABLE = "abortable"
    FATAL = "fatal"


_FENCED_CODES = frozenset(
    {
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    }
)

# Transient broker states. Errors built from admin and group responses often lack librdkafka's
# retriable flag, so these codes are retriable whatever the flags say.
_RETRIABLE_CODES = frozenset(
    {
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
        KafkaError.UNSTABLE_OFFSET_COMMIT,
        KafkaError.CONCURRENT_TRANSACTIONS,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
    }
)

# Delivery failures that a redo of the same record can not cure.
_PERMANENT_DELIVERY_CODES = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.RECORD_LIST_TOO_LARGE,
        KafkaError.INVALID_RECORD,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.POLICY_VIOLATION,
        KafkaError.INVALID_REQUIRED_ACKS,
    }
)


def kafka_error_of(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def classify(err: KafkaError | None) -> Kind:
    """Retriable / abortable / fatal, as librdkafka's transactional API documents them.

    Fenced and invalid-epoch errors are fatal even where librdkafka does not flag them so: they mean a
    newer incarnation owns the transactional.id. Anything unknown is fatal.
    """
    if err is None or err.fatal() or err.code() in _FENCED_CODES:
        return Kind.FATAL
    if err.txn_requires_abort():
        return Kind.ABORTABLE
    if err.retriable() or err.code() in _RETRIABLE_CODES:
        return Kind.RETRIABLE
    return Kind.FATAL


def is_permanent_delivery_error(err: KafkaError) -> bool:
    """A delivery failure that will fail again for the same record (so redoing is pointless)."""
    return err.code() in _PERMANENT_DELIVERY_CODES


def is_fenced(err: KafkaError | None) -> bool:
    return err is not None and err.code() in _FENCED_CODES


def as_eos_error(exc: BaseException, what: str) -> KafkaClientError:
    """Wrap a confluent-kafka exception in the EosError subclass its classification names."""
    err = kafka_error_of(exc)
    detail = f"{what}: {err.str() if err is not None else exc}"
    kind = classify(err)
    if kind is Kind.RETRIABLE:
        return RetriableError(f"{detail} (retriable, deadline exceeded)", kafka_error=err)
    if kind is Kind.ABORTABLE:
        return TransactionAbortableError(detail, kafka_error=err)
    if is_fenced(err):
        return FencedError(
            f"{detail} (fenced by a newer incarnation: this attempt is a zombie)", kafka_error=err
        )
    return FatalError(detail, kafka_error=err)
