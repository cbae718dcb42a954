"""Every error eos raises: one hierarchy, all under `EosError`.

    EosError                    any error of eos's
    ├── ConfigError             a setting is invalid; names the field (also a ValueError)
    ├── BatchSchemaError        the batch lacks or mistypes a column; raised before any transaction
    ├── BrokerUnreachableError  no broker answered within the deadline
    ├── AuthenticationError     the broker refused the credentials (SASL/SSL)
    ├── TopicNotFoundError      an input or output topic does not exist; raised before any transaction
    ├── ForeignOffsetError      the group's committed input offset was not committed by this app;
    │                           raised before anything of that input partition is written or skipped
    ├── GroupNotEmptyError      the broker refused to change a group's offsets: the group has members
    ├── ChangelogError          a state store's changelog topic cannot back it (too few partitions,
    │                           not compacted); raised before the store is used
    ├── StoreLockedError        another process holds a state store's lock beyond the deadline
    ├── SchemaRegistryError     the Schema Registry refused a schema (incompatible, unknown subject, not
    │                           authorized) or did not answer; names the subject; raised on the driver
    │                           before any transaction (a worker's first lookup can raise it too)
    ├── NondeterministicBatchError
    │                           a re-run of a batch computed other rows for a part already committed
    │                           (input_mode "any"); names batch and part; nothing of that part written
    ├── PartTooLargeError       a part's one transaction would outlive transaction.timeout.ms (input_mode
    │                           "any"); aborted, names batch and part and what bounds a part
    ├── InputGapError           `eos offsets reset` set an input partition's offset back and the query
    │                           resumed past it (its checkpoint): the records between would be skipped;
    │                           raised before anything of that input partition is written or skipped
    ├── CommitLostError         a committed transaction is not visible on a partition it wrote to (the
    │                           broker aborted it there); raised before anything of that input partition
    │                           is skipped; names the offset, the partitions and what to do
    ├── OutputTypeError         an output field has a type Kafka cannot carry (also a TypeError); the
    │                           task reports it as the ProcessError of the record that returned it
    ├── RecordError             one input record could not become output; names its topic/partition/offset.
    │   │                       The open transaction was aborted: committed output and offsets are unchanged.
    │   │                       `poison`: the record itself is at fault (on_error="dead_letter" routes it to
    │   │                       the dead-letter topic); else the pipeline or the cluster is.
    │   ├── ProcessError        the user's `process` / `process_batch` function raised or returned bad output
    │   ├── ProduceError        the client or broker refused the output (too large, no topic, not authorized)
    │   ├── SerializationError  an output does not fit its schema (value_serializer / key_serializer)
    │   ├── DeserializationError
    │   │                       an input record cannot be read with its schema (value_deserializer /
    │   │                       key_deserializer)
    │   ├── TooManyDeadLettersError
    │   │                       more bad records in a batch than max_dead_letters_per_batch
    │   ├── InputOrderError     an input partition's rows reached a task split or out of offset order
    │   └── InputCoordinateError
    │                           a row's topic/partition/offset are not those of the record Spark read
    │                           it from; raised before anything of that input partition is written or
    │                           skipped
    └── KafkaClientError        a Kafka client call failed; the subclass is its class in librdkafka's model:
        ├── RetriableError      the same call may succeed again (raised once its deadline has passed)
        │   ├── OffsetsUnstableError
        │   │                   an open transaction of another incarnation holds an input partition's
        │   │                   committed offset (asked without waiting for it to end)
        │   └── TransactionInDoubtError
        │                       a transactional call or a produce timed out: the producer is not used
        │                       again; a fresh one's init_transactions settles the transaction
        ├── TransactionAbortableError
        │   │                   abort the transaction, mark the partition's state unclean, redo from the
        │   │                   committed offset
        │   └── DeliveryFailedError
        │                       an output was not delivered; the redo writes record by record to name it
        └── FatalError          the producer is unusable: close it and raise
            ├── FencedError     a newer incarnation owns the transactional.id: this attempt is a zombie
            └── TransactionTimeoutError
                                the transaction outlived transaction.timeout.ms and the broker aborted it

A leaf: this module imports nothing from eos (and nothing from confluent-kafka but a type), so every
module can import it. Where confluent-kafka's errors become these is `eos._kafka._translate`, the one
boundary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from confluent_kafka import KafkaError


class EosError(Exception):
    """Base class of every error eos raises.

    What to do: Catch it for any error of eos's; the subclass says what happened and what to do.
    """


class ConfigError(EosError, ValueError):
    """A setting is missing, unknown or has a bad value; `field` names it (a Config field, a dotted key
    or a `format("eos")` option). Raised before any transaction: nothing was written.

    What to do: Fix the setting it names; nothing was written.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.reason = message
        super().__init__(f"invalid config {field!r}: {message}")


class BatchSchemaError(EosError, ValueError):
    """The micro-batch cannot be written; nothing was produced or committed.

    What to do: Give the DataFrame the columns and types the message names (`value` as binary or string;
    `key`, `headers`, the Kafka source's `topic`, `partition` and `offset`); nothing was written.
    """


class BrokerUnreachableError(EosError):
    """No Kafka broker answered within the configured deadline.

    What to do: Check `bootstrap_servers`, the network and the brokers, or raise `operation_timeout_ms`
    for a cluster slow to answer; restart the query.
    """


class AuthenticationError(EosError):
    """The broker refused this client's credentials.

    What to do: Fix the credentials in `kafka` (`sasl.username` and `sasl.password`, the OAUTHBEARER or
    TLS settings: the security guide has each); restart the query.
    """


class TopicNotFoundError(EosError):
    """An output, input or dead-letter topic does not exist. eos creates only its own topics
    (changelogs, the progress topic of input_mode "any"): create it with its partitions and
    replication, as Kafka Streams requires of its sink topics.

    What to do: Create the topic (`kafka-topics.sh --create`), then restart the query.
    """

    def __init__(self, topic: str, role: str = "output") -> None:
        self.topic = topic
        super().__init__(f"{role} topic {topic!r} does not exist (eos creates only changelog topics)")


class ForeignOffsetError(EosError):
    """The committed offset of an input partition carries no stamp of this eos app.

    What to do: If the offsets are meant to be this app's (an older eos or another tool wrote them), stamp
    them where they are with `eos offsets reset --app <app_id> --shift 0 --execute`; if the group is
    shared on purpose, set `accept_foreign_offsets=True`; else choose another `app_id`.
    """

    def __init__(self, message: str, *, group: str, topic: str, partition: int, offset: int) -> None:
        self.group = group
        self.topic = topic
        self.partition = partition
        self.offset = offset
        super().__init__(message)


class GroupNotEmptyError(EosError):
    """The broker refused to change a consumer group's offsets: the group has members (a consumer
    joined it, or it is rebalancing). `eos offsets reset` exits 5 (refused) on it.

    What to do: Stop every consumer of the group (the query, or another application using its name), then
    run the command again.
    """


class ChangelogError(EosError):
    """A changelog topic cannot back its store.

    What to do: Fix the changelog topic as the message says (as many partitions as the input topic,
    `cleanup.policy=compact`); a new `app_id` starts with new changelogs and empty stores.
    """


class RecordError(EosError):
    """One input record could not be processed or written; `topic`/`partition`/`offset` name it. The
    base of ProcessError, ProduceError and SerializationError: catch it for any record-level failure.

    What to do: The subclass and the record's topic, partition and offset say what to fix; with
    `on_error="dead_letter"` a record at fault itself (`poison`) goes to the dead-letter topic instead of
    failing the query.
    """

    #: the record itself is at fault (writing it again fails again, other records are fine): what
    #: on_error="dead_letter" sends to the dead-letter topic instead of failing the batch
    poison = False

    def __init__(self, message: str, *, topic: str, partition: int, offset: int) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.reason = message
        super().__init__(f"{message} (input record {topic}/{partition}@{offset}; transaction aborted)")

    def named(self, record: str) -> RecordError:
        """This error with its record named `record` instead of by input coordinates (a row of an
        `input_mode="any"` part has none: its topic/partition/offset are the part's progress
        partition and the row's index in the part)."""
        self.args = (f"{self.reason} ({record}; transaction aborted)",)
        return self


class ProcessError(RecordError):
    """The user's `process` function raised on an input record, or returned an output Kafka cannot
    carry. `through`: `process_batch` raised over input offsets `offset`..`through` (which record of
    them is to blame is not known).

    What to do: Fix the function for the record the message names, or set `on_error="dead_letter"` to send
    such records to a dead-letter topic.
    """

    poison = True

    def __init__(
        self, message: str, *, through: int | None = None, poison: bool = True, **where: Any
    ) -> None:
        """`where`: RecordError's topic, partition and offset."""
        self.through = through
        self.poison = poison
        super().__init__(message, **where)


class ProduceError(RecordError):
    """The output of an input record was refused by the Kafka client or broker.

    `candidates`: where one refusal hit the outputs of several input records (a broker refuses a whole
    record batch), their offsets, the largest output's first; the task writes them alone to find those
    refused on their own.

    What to do: The message says why the output was refused: a record too large (raise the topic's
    `max.message.bytes` or the producer's `message.max.bytes`, or use dead letters), a missing topic
    (create it), a missing ACL (grant WRITE on the topic).
    """

    def __init__(
        self,
        message: str,
        *,
        topic: str,
        partition: int,
        offset: int,
        candidates: tuple[int, ...] = (),
        poison: bool = False,
        kafka_error: KafkaError | None = None,
    ) -> None:
        self.candidates = candidates
        self.poison = poison
        self.kafka_error = kafka_error
        super().__init__(message, topic=topic, partition=partition, offset=offset)


class SerializationError(RecordError):
    """An output's value or key does not fit its Schema Registry schema (a bad record: on_error
    ="dead_letter" routes it). `through`: the output of a `process_batch` call over input offsets
    `offset`..`through` (which record of them is to blame is not known).

    What to do: Make the output fit the schema (or evolve the schema), or set `on_error="dead_letter"` to
    send such records to a dead-letter topic.
    """

    poison = True

    def __init__(
        self, message: str, *, topic: str, partition: int, offset: int, through: int | None = None
    ) -> None:
        self.through = through
        super().__init__(message, topic=topic, partition=partition, offset=offset)


class DeserializationError(RecordError):
    """An input record's bytes cannot be read with its Schema Registry schema: not Confluent-framed, a
    schema id the registry does not have, a corrupt body, a writer schema the reader's cannot resolve
    (a bad record: on_error="dead_letter" routes it). `topic`/`partition`/`offset` name it where the
    query has them (None otherwise).

    What to do: Check that the input topic holds Confluent-framed records of a schema the registry has, or
    set `on_error="dead_letter"` to send unreadable records to a dead-letter topic.
    """

    poison = True

    def __init__(self, message: str, *, topic: str | None, partition: int | None, offset: int | None) -> None:
        super().__init__(message, topic=topic, partition=partition, offset=offset)  # type: ignore[arg-type]
        where = f"input record {topic}/{partition}@{offset}" if topic is not None else "no input coordinates"
        self.args = (f"{message} ({where})",)


class SchemaRegistryError(EosError):
    """The Schema Registry refused a schema or a lookup, or could not be reached within
    operation_timeout_ms. `status` / `error_code`: the registry's HTTP status and error code (None when
    it did not answer).

    What to do: The message names the subject and the registry's answer: register or evolve the schema
    compatibly, fix the registry's URL or credentials in `schema_registry`, or raise
    `operation_timeout_ms`.
    """

    def __init__(
        self, message: str, *, subject: str | None, status: int | None = None, error_code: int | None = None
    ) -> None:
        self.subject = subject
        self.status = status
        self.error_code = error_code
        super().__init__(message)


class TooManyDeadLettersError(RecordError):
    """on_error="dead_letter": an input partition had more bad records in one batch than
    max_dead_letters_per_batch allows; names the last one.

    What to do: Look at the dead-letter topic: so many bad records usually mean a bug upstream; raise
    `max_dead_letters_per_batch` if they are expected.
    """


class InputOrderError(RecordError):
    """The rows of an input topic-partition did not reach one task as one run in offset order.

    What to do: Keep one Spark task per input partition: no `repartition`, `union` or `minPartitions`
    between the Kafka source and eos, or use `input_mode="any"`.
    """


class InputCoordinateError(RecordError):
    """A row's input coordinates (`topic`, `partition`, `offset`) are not the record Spark read it from:
    a column overwritten, or coordinates copied onto rows that are not that record. `column` names the
    first column that differs; topic/partition/offset are what the row says (not a record's name, so
    the message does not call them one).

    What to do: Keep the Kafka source's `topic`, `partition` and `offset` columns as it read them (route
    records with `output_topic_column` and `output_partition_column`), or use `input_mode="any"` for rows
    that are not the source's records.
    """

    def __init__(self, message: str, *, column: str, topic: str, partition: int, offset: int) -> None:
        self.column = column
        super().__init__(message, topic=topic, partition=partition, offset=offset)
        # RecordError's text names an input record and an aborted transaction; here nothing was begun,
        # and the coordinates are what the row claims: the message stands as it is
        self.args = (message,)


class KafkaClientError(EosError):
    """A Kafka client call failed; `kafka_error` is confluent-kafka's KafkaError where there was one.
    The base of RetriableError, FatalError and their kin: eos maps librdkafka's errors onto these
    classes in one place.

    What to do: The subclass says whether eos retried, redid or stopped; the message has the client's own
    error.
    """

    def __init__(self, message: str, *, kafka_error: KafkaError | None = None) -> None:
        self.kafka_error = kafka_error
        super().__init__(message)


class RetriableError(KafkaClientError):
    """A retriable error that outlasted its deadline.

    What to do: Check the brokers (the message names the call); raise `operation_timeout_ms` for a slow
    cluster. Restarting the query is safe.
    """


class OffsetsUnstableError(RetriableError):
    """The input partition's committed offset is held by an open transaction of another incarnation
    (UNSTABLE_OFFSET_COMMIT), and the caller asked not to wait for it: a task whose kept producer cannot
    end that transaction takes a fresh one that can (step 2).

    What to do: Nothing: eos handles it (a fresh producer ends the open transaction).
    """


class TransactionInDoubtError(RetriableError):
    """A transactional call (commit, abort, sending the offsets) or an output's delivery timed out:
    whether the broker acted on it is unknown, and records of the transaction may still be on their way.
    The producer is not used again (a late record must not land in its next transaction: librdkafka does
    not speak transactions v2, KIP-890); a fresh producer's init_transactions settles the transaction,
    committing it where its commit was received, else aborting it, and the task goes on from the
    committed offset.

    What to do: Nothing, usually: the task goes on with a fresh producer. If it repeats, the brokers are
    slow or overloaded; raise `operation_timeout_ms`.
    """


class TransactionAbortableError(KafkaClientError):
    """The current transaction must be aborted; the producer stays usable.

    What to do: Nothing, usually: eos aborts and redoes the transaction up to `max_redo` times. If it
    still fails, the message has the broker's reason.
    """


class DeliveryFailedError(TransactionAbortableError):
    """An output record of the open transaction was not delivered. Bulk writes do not track which input
    record each output came from; the task aborts and redoes the transaction record by record, which
    names the record (a ProduceError) or succeeds.

    What to do: Nothing, usually: the redo names the record (a ProduceError) or succeeds.
    """


class FatalError(KafkaClientError):
    """The producer (or client) cannot be used again.

    What to do: The message has the client's error and, for a refused `init_transactions`, the ACL or
    broker setting to fix; restart the query once it is fixed.
    """


class FencedError(FatalError):
    """Another incarnation of the same transactional.id has taken over: this attempt is a zombie.

    What to do: Nothing, if another attempt of the same task took over (Spark's retries and speculation
    do). If two queries run with the same `app_id`, stop one: they fence each other.
    """


class TransactionTimeoutError(FatalError):
    """The open transaction took longer than transaction_timeout_ms, so the broker aborted it (and fenced
    the producer): `process` is slower than the transaction allows, not a zombie.

    What to do: Commit more often (a lower `commit_every` or `commit_interval_ms`), make `process` faster,
    or raise `transaction_timeout_ms` (at most the broker's `transaction.max.timeout.ms`).
    """


class NondeterministicBatchError(EosError):
    """A part of a batch is committed, and the re-run of the batch computed other rows for it.

    What to do: Make the query deterministic (no `rand()` or `uuid()`, no order taken from an unordered
    collection), then restart it; the parts committed are not written again.
    """

    def __init__(self, message: str, *, batch_id: int, part: int) -> None:
        super().__init__(message)
        self.batch_id = batch_id
        self.part = part


class PartTooLargeError(EosError):
    """A part is written in one transaction; this one would have outlived transaction.timeout.ms.

    What to do: Raise `parts` (or `transaction_timeout_ms`) and restart the query: the batch is written in
    more, smaller parts.
    """

    def __init__(self, message: str, *, batch_id: int, part: int) -> None:
        super().__init__(message)
        self.batch_id = batch_id
        self.part = part


class InputGapError(EosError):
    """`eos offsets reset` set an input partition's committed offset back, and the query resumed it past
    that offset (Spark's Kafka source resumes from its checkpoint): the input records between would be
    skipped, never written. `offset`: the committed offset; `resumes_at`: where this run reads.

    What to do: To write the records between, start the query on a new checkpoint; to skip them, move the
    committed offset to where the query resumes with the `eos offsets reset` command the message gives.
    """

    def __init__(self, message: str, *, topic: str, partition: int, offset: int, resumes_at: int) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.resumes_at = resumes_at


class CommitLostError(EosError):
    """The transaction that committed an input offset is not visible on every partition it wrote to: the
    broker committed it on some and aborted it on others. eos stops rather than skip input whose outputs
    no read_committed reader will see.

    What to do: Run `eos repair --app <app_id> --execute`, which writes the aborted records again, once;
    then restart the query. Report the broker's behaviour to its operators.
    """

    def __init__(
        self,
        message: str,
        *,
        topic: str,
        partition: int,
        offset: int,
        lost: tuple[tuple[str, int, int], ...],
    ) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset
        #: (topic, partition, offset of the transaction's last record there) of each partition it lost
        self.lost = lost


class StoreLockedError(EosError):
    """Another process holds this store's lock beyond the deadline.

    What to do: Stop the other process that uses the store (an old executor or a second query with the
    same `app_id` and `state_dir`), or raise `operation_timeout_ms`.
    """


class OutputTypeError(EosError, TypeError):
    """A field of an output record has a type Kafka cannot carry. Converted to a RecordError by the task.

    What to do: Return from `process` an `eos.Output` (or a mapping of its fields, or `bytes`/`str` for a
    value alone), or an iterable of them; its key, value and header values as `bytes`, `str` or `None`.
    """

    def __init__(self, field: str, value: Any, message: str | None = None) -> None:
        self.field = field
        super().__init__(
            message or f"output field {field!r} must be bytes or str, not {type(value).__name__}"
        )
