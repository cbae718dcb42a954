"""The one boundary between confluent-kafka's errors and eos's: every Kafka client call eos makes runs
inside `call` (retried) or `translating` (not retried), and only `eos.errors` types come out.

    classify(err)             retriable / abortable / fatal, as librdkafka's transactional API has them
    classify_delivery(err)    what a failed delivery report means: fenced / permanent / abortable
    translate(exc, what)      a KafkaException as the EosError its classification names
    call(fn, what, ...)       retriable errors retried until a deadline, then `translate`
    translating(what)         a with-block that translates (calls that must not be retried)
    reach(fn, what, ...)      metadata calls that establish whether a broker answers at all: refused
                              credentials and an unreachable cluster get errors of their own

Within the Kafka client layer (eos/_kafka: the only package `make lint` lets import confluent_kafka)
these are the functions that classify an error. The producer's hot loop catches KafkaException around
`produce()` itself (a with-block per record costs) and hands it here, and matches the codes of a
missing topic; `_rdkafka.py` reads librdkafka's codes from its message array (a full queue is not an
error there) and hands the others here as KafkaError; `_admin.py` makes the CLI's admin answers the
errors the CLI turns into exit codes. The helpers of the public `eos.testing` (`_topics.create_bare`,
`_reads.whole_topic`, `_writes.PlainProducer`) raise confluent-kafka's own exceptions, as it always has.
Nothing outside the layer reads Kafka or compares its codes.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import time
from collections.abc import Callable, Iterator
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException, Producer

from eos.errors import (
    AuthenticationError,
    BrokerUnreachableError,
    FatalError,
    FencedError,
    KafkaClientError,
    RetriableError,
    TransactionAbortableError,
    TransactionInDoubtError,
)

T = TypeVar("T")


class Kind(enum.Enum):
    RETRIABLE = "retriable"
    ABORTABLE = "abortable"
    FATAL = "fatal"


class Delivery(enum.Enum):
    """What a failed delivery report means for the open transaction."""

    FENCED = "fenced"  # a newer incarnation owns the transactional.id
    PERMANENT = "permanent"  # the record itself is refused: redoing it fails again; name it
    ABORTABLE = "abortable"  # abort and redo the transaction


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
        KafkaError.INVALID_TIMESTAMP,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.POLICY_VIOLATION,
        KafkaError.INVALID_REQUIRED_ACKS,
    }
)

_POISON_CODES = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.RECORD_LIST_TOO_LARGE,
        KafkaError.INVALID_RECORD,
        KafkaError.INVALID_TIMESTAMP,  # outside the topic's message.timestamp.before/after.max.ms
        KafkaError._UNKNOWN_PARTITION,  # an output partition column naming a partition the topic lacks
    }
)

_AUTHENTICATION_CODES = frozenset({KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED})


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


def classify_delivery(err: KafkaError) -> Delivery:
    """A failed delivery report (or a record `produce()` refused at once)."""
    if err.code() in _FENCED_CODES:
        return Delivery.FENCED
    if err.code() in _PERMANENT_DELIVERY_CODES:
        return Delivery.PERMANENT
    return Delivery.ABORTABLE


def is_too_large(err: KafkaError | None) -> bool:
    """Whether a record was refused for its size (by the client's message.max.bytes or the broker's)."""
    return err is not None and err.code() in (KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE)


def is_poison(err: KafkaError | None) -> bool:
    """Whether a permanent refusal is of the record itself (too large, invalid), not of where it goes (a
    missing topic, no permission): what on_error="dead_letter" may route to the dead-letter topic."""
    return err is not None and err.code() in _POISON_CODES


def is_purged(err: KafkaError | None) -> bool:
    """Whether a record was never sent: librdkafka purged it from its queue (an abort, or a failed
    transaction's records still queued behind the one that failed). No verdict on the record itself."""
    return err is not None and err.code() in (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT)


def refuses_records(err: KafkaError | None) -> bool:
    """Whether `produce()` refused a record because the producer's transaction takes no more: a
    delivery of it failed (librdkafka then refuses every record until the transaction is aborted,
    with "Erroneous state"). The failed delivery, not this refusal, says what went wrong."""
    return err is not None and err.code() == KafkaError._STATE and not err.fatal()


def is_fenced(err: KafkaError | None) -> bool:
    return err is not None and err.code() in _FENCED_CODES


def is_authentication_error(err: KafkaError | None) -> bool:
    return err is not None and err.code() in _AUTHENTICATION_CODES


def missing_acl(code: int | None, transactional_id: str | None) -> str | None:
    """What an init_transactions refused with the error `code` (Kafka's protocol code, which librdkafka
    and the Java client share) lacks, in the words of Kafka's ACLs; None where it is no refusal. The
    same text for the Python path's producers and the JVM writer's (`eos._spark._jvm_writer`)."""
    app = (transactional_id or "").split(":", 1)[0] or "<app_id>"
    if code == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        return (
            f"the principal may not use the transactional.id {transactional_id!r}. exactly_once needs the"
            f" ACLs WRITE and DESCRIBE on the app's transactional ids (they all start with {app!r}):"
            " kafka-acls.sh --bootstrap-server <brokers> --add --allow-principal User:<name>"
            f" --operation Write --operation Describe --transactional-id {app} --resource-pattern-type"
            " prefixed. Nothing was written. (processing_guarantee='at_least_once' needs no transactions.)"
        )
    if code == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
        return (
            "the principal may not write idempotently: a broker before Kafka 3.0 needs the ACL"
            " IDEMPOTENT_WRITE on the cluster (kafka-acls.sh --bootstrap-server <brokers> --add"
            " --allow-principal User:<name> --operation IdempotentWrite --cluster); a newer one, WRITE on"
            " the output topics. Nothing was written."
        )
    return None


def translate(exc: BaseException, what: str) -> KafkaClientError:
    """A confluent-kafka exception as the EosError subclass its classification names."""
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


def translate_error(err: KafkaError, what: str) -> KafkaClientError:
    """`translate` for an error a client reports as a value (a message's or a partition's error)."""
    return translate(KafkaException(err), what)


@contextlib.contextmanager
def translating(what: str) -> Iterator[None]:
    """Translate whatever KafkaException the block raises (no retry)."""
    try:
        yield
    except KafkaException as exc:
        raise translate(exc, what) from exc
    except FutureTimeout as exc:
        raise translate(_unanswered(exc), what) from exc


def _unanswered(exc: BaseException) -> KafkaException:
    """An admin future's `result(timeout)` that ran out (a broker that does not answer), as librdkafka's
    own timeout: retriable."""
    return KafkaException(KafkaError(KafkaError._TIMED_OUT, f"no answer in time ({type(exc).__name__})"))


class Deadline:
    """A point in monotonic time; `remaining()` never goes below zero."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.at


_TIMEOUT_CODES = frozenset({KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT, KafkaError._MSG_TIMED_OUT})


def is_timeout(err: KafkaError | None) -> bool:
    """Whether a call or a delivery timed out (not answered: what the broker did is unknown)."""
    return err is not None and err.code() in _TIMEOUT_CODES


def in_doubt(what: str, detail: str, err: KafkaError | None = None) -> TransactionInDoubtError:
    return TransactionInDoubtError(
        f"{what}: {detail}: the transaction is in doubt; its producer is not used again", kafka_error=err
    )


def call(fn: Callable[[], T], *, what: str, timeout_s: float, log=None, transactional: bool = False) -> T:
    """Call `fn` until it succeeds, retrying retriable KafkaExceptions within `timeout_s`.

    Non-retriable errors, and retriable ones once the deadline has passed, are raised as the EosError
    subclass that `classify` names. `transactional` (a call of the open transaction): one that timed out
    is not retried on the same producer but raised as TransactionInDoubtError.
    """
    deadline = Deadline(timeout_s)
    backoff = 0.05
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except (KafkaException, FutureTimeout) as raised:
            exc = raised if isinstance(raised, KafkaException) else _unanswered(raised)
            err = kafka_error_of(exc)
            if transactional and is_timeout(err) and not err.fatal():
                raise in_doubt(what, err.str(), err) from exc
            if classify(err) is not Kind.RETRIABLE or deadline.expired():
                raise translate(exc, what) from exc
            if log is not None:
                log.warning("retrying", call=what, attempt=attempt, error=str(exc))
            time.sleep(min(backoff, deadline.remaining()))
            backoff = min(backoff * 2, 1.0)


def reach(
    fn: Callable[[float], T],
    *,
    where: str,
    timeout_s: float,
    refused: Callable[[], KafkaError | None],
) -> T:
    """`fn(attempt_timeout)` (a metadata request) until it answers: short attempts, so credentials the
    broker refused (`refused()`, from the client's error callback) surface at once as
    AuthenticationError rather than at the deadline, which raises BrokerUnreachableError."""
    deadline = Deadline(timeout_s)
    while True:
        try:
            return fn(min(1.0, max(deadline.remaining(), 0.1)))
        except KafkaException as exc:
            denied = refused()
            if denied is not None:
                raise AuthenticationError(
                    f"the broker at {where} refused the credentials: {denied.str()}"
                ) from exc
            if deadline.expired():
                err = kafka_error_of(exc)
                raise BrokerUnreachableError(
                    f"no Kafka broker at {where} answered within {timeout_s:g}s ({err.str() if err else exc})"
                ) from exc


#: a librdkafka setting with a value it always refuses: asked after the name in question, it keeps
#: `is_client_setting` from ever creating a client
_REFUSED = ("queue.buffering.max.kbytes", "not a number")


@functools.lru_cache(maxsize=1024)
def is_client_setting(name: str) -> bool:
    """Whether librdkafka knows the setting `name` (whatever its value): asked of librdkafka itself,
    whose property names change with its version, and which tells an unknown name ("No such
    configuration property") from a bad value."""
    try:
        Producer({name: "0", _REFUSED[0]: _REFUSED[1]})
    except KafkaException as exc:
        return not str(exc.args[0].str()).startswith("No such configuration property")
    except Exception:  # noqa: BLE001 - confluent-kafka's own keys (error_cb, logger, ...) check their type
        return True
    return True
