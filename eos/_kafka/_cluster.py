"""What eos reads from the cluster's own settings: limits it must stay within and facts it must warn
about. One DescribeConfigs of one broker (and the cluster's metadata); a principal without
DESCRIBE_CONFIGS gets no answer, and then nothing is checked (the clients' own errors remain)."""

from __future__ import annotations

from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, ResourceType

from eos._kafka import _clients
from eos.config import Config
from eos.errors import ConfigError

#: Kafka's internal topic of transaction states, created at the first transactional producer's request
TRANSACTION_LOG = "__transaction_state"


def broker_settings(config: Config, names: tuple[str, ...]) -> dict[str, str]:
    """The values of `names` on one broker of the cluster (those it reports)."""
    return _facts(config, names)[0]


def _facts(config: Config, names: tuple[str, ...]) -> tuple[dict[str, str], int, set[str]]:
    """`broker_settings`, the number of brokers and the cluster's topics (none of them where the
    cluster did not answer)."""
    timeout = config.operation_timeout_ms / 1000
    admin = _clients.admin(config)
    try:
        metadata = admin.list_topics(timeout=timeout)
        if not metadata.brokers:
            return {}, 0, set()
        resource = ConfigResource(ResourceType.BROKER, str(min(metadata.brokers)))
        entries = admin.describe_configs([resource], request_timeout=timeout)[resource].result(timeout)
    except KafkaException:
        return {}, 0, set()
    found = {name: entries[name].value for name in names if name in entries}
    settings = {name: value for name, value in found.items() if value is not None}
    return settings, len(metadata.brokers), set(metadata.topics)


def topic_setting(config: Config, topic: str, name: str) -> str | None:
    """The value of topic `topic`'s setting `name` (None: not reported, or no DESCRIBE_CONFIGS)."""
    timeout = config.operation_timeout_ms / 1000
    resource = ConfigResource(ResourceType.TOPIC, topic)
    try:
        entries = _clients.admin(config).describe_configs([resource], request_timeout=timeout)[resource]
        entry = entries.result(timeout).get(name)
    except KafkaException:
        return None
    return None if entry is None else entry.value


_TRANSACTIONS = (
    "transaction.max.timeout.ms",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
)


def check_transactions(config: Config) -> None:
    """What exactly_once needs of the cluster, checked before the first transaction (each would fail,
    after the query started): a transaction log it can create (its replication factor and min.isr
    within the brokers there are: else no transaction ever begins, the producers waiting for a
    coordinator until they time out), and transaction_timeout_ms within transaction.max.timeout.ms."""
    settings, brokers, topics = _facts(config, _TRANSACTIONS)
    if brokers and TRANSACTION_LOG not in topics:
        for name in _TRANSACTIONS[1:]:
            needed = settings.get(name)
            if needed is not None and needed.isdigit() and int(needed) > brokers:
                raise ConfigError(
                    "processing_guarantee",
                    f"exactly_once needs Kafka transactions, and this cluster cannot begin one: its"
                    f" transaction log ({TRANSACTION_LOG}) does not exist yet and needs {name}={needed}"
                    f" brokers, but the cluster has {brokers}. Set transaction.state.log.replication.factor"
                    f" and transaction.state.log.min.isr to at most {brokers} on the brokers (a"
                    " single-broker cluster: 1), or choose processing_guarantee='at_least_once'. Nothing"
                    " was written.",
                )
    limit = settings.get("transaction.max.timeout.ms")
    if limit is not None and config.transaction_timeout_ms > int(limit):
        raise ConfigError(
            "transaction_timeout_ms",
            f"{config.transaction_timeout_ms} is above the broker's transaction.max.timeout.ms ({limit}):"
            " the broker refuses such transactions. Lower transaction_timeout_ms (and commit_interval_ms"
            " with it) or raise the broker's limit.",
        )


def warn_offsets_retention(config: Config, log) -> None:
    """eos's tasks never join the group `app_id`, so the group has no members, and Kafka deletes its
    committed offsets once offsets.retention.minutes pass without a commit for them: an input partition
    idle that long then starts from `starting_offsets` again."""
    minutes = broker_settings(config, ("offsets.retention.minutes",)).get("offsets.retention.minutes")
    if minutes is None:
        return
    log.warning(
        "committed offsets expire",
        group=config.app_id,
        offsets_retention_minutes=int(minutes),
        detail=(
            f"the group has no members (eos tasks never join it): Kafka deletes the committed offset of"
            f" an input partition that gets no new commit for {int(minutes)} minutes, and that partition"
            f" then starts from starting_offsets={config.starting_offsets!r}"
            + (" (its rows are written again)" if config.starting_offsets == "earliest" else "")
            + ". Keep input partitions active or raise offsets.retention.minutes."
        ),
    )
