"""What eos asks about topics, each question one way: which exist and with how many partitions
(metadata: the driver's D2, the CLI, the changelogs, the progress topic); whether this principal may
write one (the producer, before its first record to it); when a new topic's partitions have leaders;
and the progress topic of `input_mode="any"` (docs/protocol.md, "Any DataFrame"), created or grown to
`parts` partitions before a part's transaction commits an offset to it."""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, NewPartitions, NewTopic

from eos import _names
from eos._kafka import _clients, _translate
from eos.config import Config
from eos.errors import TopicNotFoundError


def partitions(config: Config, topics: Iterable[str]) -> dict[str, int]:
    """Partition count per topic; raises BrokerUnreachableError if no broker answers in time and
    EosError subclasses for topics that are missing (the caller decides which)."""
    client = _clients.admin(config)

    def refused():
        client.poll(0)  # serves the error callback that records refused credentials
        return _clients.authentication_failure(config)

    metadata = _translate.reach(
        lambda timeout: client.list_topics(timeout=timeout),
        where=config.bootstrap_servers,
        timeout_s=config.operation_timeout_ms / 1000,
        refused=refused,
    )
    out: dict[str, int] = {}
    for topic in topics:
        md = metadata.topics.get(topic)
        if md is None or md.error is not None:
            continue
        out[topic] = len(md.partitions)
    return out


def require(config: Config, topics: Iterable[str], role: str) -> dict[str, int]:
    """`partitions`, raising TopicNotFoundError for the first of `topics` that is missing."""
    topics = list(topics)
    found = partitions(config, topics)
    for topic in topics:
        if topic not in found:
            raise TopicNotFoundError(topic, role)
    return found


def unwritable(config: Config, topic: str) -> str | None:
    """Why this principal cannot write `topic` (None: it can). Asked of the admin client
    (DescribeTopics): a producer's metadata request for a missing topic would create it on a broker with
    auto.create.topics.enable=true. The answer includes this principal's operations on the topic
    (KIP-430): a refused write fails a transaction in a state librdkafka may not abort cleanly, so eos
    checks WRITE before producing."""
    timeout = config.operation_timeout_ms / 1000
    missing = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC}

    def describe():
        futures = _clients.admin(config).describe_topics(
            TopicCollection([topic]), request_timeout=timeout, include_authorized_operations=True
        )
        try:
            return futures[topic].result(timeout)
        except KafkaException as exc:
            err = _translate.kafka_error_of(exc)
            if err is not None and (
                err.code() in missing or err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
            ):
                return err
            raise

    found = _translate.call(describe, what=f"looking up output topic {topic!r}", timeout_s=timeout)
    if isinstance(found, KafkaError):
        if found.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            return unwritable_reason(topic, "denied", found.str())
        return unwritable_reason(topic, "missing", found.str())
    operations = found.authorized_operations
    if operations is not None and not {AclOperation.WRITE, AclOperation.ALL} & set(operations):
        return unwritable_reason(topic, "no_write")
    return None


def unwritable_reason(topic: str, why: str, detail: str = "") -> str:
    """What an error says of an output topic that cannot be written (`why`: "denied", the broker refused
    to describe it; "missing"; "no_write", it may be described but not written), with the client's
    `detail`."""
    if why == "denied":
        return f"output to {topic!r} refused: {detail}"
    if why == "missing":
        return f"output topic {topic!r} is not available: it does not exist ({detail})"
    return f"output to {topic!r} refused: Topic authorization failed (no WRITE permission)"


def create(config: Config, new: NewTopic, what: str) -> None:
    """Create a topic; one that exists already (another task or process created it first) is no error."""
    admin = _clients.admin(config)
    timeout = config.operation_timeout_ms / 1000
    _translate.call(
        lambda: _existing(admin.create_topics([new], request_timeout=timeout), new.topic, timeout, _CREATED),
        what=what,
        timeout_s=timeout,
    )


def await_leaders(config: Config, name: str) -> None:
    """Until every partition of `name` (just created) has a leader, or operation_timeout_ms passes."""
    admin = _clients.admin(config)
    timeout = config.operation_timeout_ms / 1000
    deadline = _translate.Deadline(timeout)
    while not deadline.expired():
        if _translate.call(
            lambda: _led(admin, name, timeout), what=f"reading the metadata of {name!r}", timeout_s=timeout
        ):
            return
        time.sleep(0.1)


def create_bare(
    bootstrap: str, name: str, partitions: int, settings: Mapping[str, str] | None, timeout: float
) -> None:
    """`eos.testing.create_topic`: `create` and `await_leaders` through an admin client of `bootstrap`
    alone, raising what confluent-kafka raises (as eos.testing always has), TimeoutError where the
    leaders do not come."""
    admin = AdminClient(_clients.with_logger({"bootstrap.servers": bootstrap}))
    new = NewTopic(name, partitions, -1, config=dict(settings or {}))
    _existing(admin.create_topics([new]), name, timeout, _CREATED)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _led(admin, name, 5, partitions):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {name} has no leaders after {timeout}s")


def _led(admin: AdminClient, name: str, timeout: float, partitions: int | None = None) -> bool:
    """Whether `name`'s metadata shows it (with `partitions` partitions, where given), every partition
    with a leader."""
    md = admin.list_topics(name, timeout=timeout).topics.get(name)
    return (
        md is not None
        and md.error is None
        and (partitions is None or len(md.partitions) == partitions)
        and all(p.leader >= 0 for p in md.partitions.values())
    )


#: "already so": a topic that exists (another task or process created it first); for create_partitions,
#: also a topic that has that many partitions already
_CREATED = frozenset({KafkaError.TOPIC_ALREADY_EXISTS})
_GROWN = frozenset({KafkaError.TOPIC_ALREADY_EXISTS, KafkaError.INVALID_PARTITIONS})


def _existing(futures, name: str, timeout: float, ignore: Collection[int]) -> None:
    """Wait for a create_topics / create_partitions future; "already so" (`ignore`) is no error."""
    try:
        futures[name].result(timeout)
    except KafkaException as exc:
        error = _translate.kafka_error_of(exc)
        if error is None or error.code() not in ignore:
            raise


#: progress topics known to have at least so many partitions in this process, by (bootstrap, name): the
#: driver asks once per sink, a `format("eos")` task once per Python worker, not once per batch or task
_known_parts: dict[tuple[str, str], int] = {}


def forget_parts_topics() -> None:
    """Forget which progress topics this process has seen (a fresh worker: `eos._core._worker.reset`)."""
    _known_parts.clear()


def ensure_parts_topic(config: Config) -> None:
    """The progress topic, with at least `parts` partitions (created, or grown). It never holds a record:
    the broker accepts transactional offset commits only for partitions that exist."""
    name = _names.parts_topic(config.app_id)
    known = (config.bootstrap_servers, name)
    if _known_parts.get(known, 0) >= config.parts:
        return
    if _grow_parts_topic(config, name):
        _known_parts[known] = max(_known_parts.get(known, 0), config.parts)


def _grow_parts_topic(config: Config, name: str) -> bool:
    """Create or grow the topic; whether its metadata shows `parts` partitions before the deadline."""
    admin = _clients.admin(config)
    timeout = config.operation_timeout_ms / 1000
    have = partitions(config, [name]).get(name)
    if have is None:
        new = NewTopic(
            name, config.parts, config.changelog_replication_factor, config={"cleanup.policy": "compact"}
        )
        create(config, new, f"creating the progress topic {name!r}")
    elif have < config.parts:
        _translate.call(
            lambda: _existing(
                admin.create_partitions([NewPartitions(name, config.parts)]), name, timeout, _GROWN
            ),
            what=f"adding partitions to the progress topic {name!r}",
            timeout_s=timeout,
        )
    else:
        return True
    deadline = _translate.Deadline(timeout)
    while not deadline.expired():
        count = partitions(config, [name]).get(name, 0)
        if count >= config.parts:
            return True
        time.sleep(0.1)
    return False
