"""What eos reads from the cluster's own settings: limits it must stay within and facts it must warn
about. One DescribeConfigs of one broker; a principal without DESCRIBE_CONFIGS gets no answer, and then
nothing is checked (the clients' own errors remain)."""

from __future__ import annotations

from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, ResourceType

from eos._kafka import _clients
from eos.config import Config
from eos.errors import ConfigError


def broker_settings(config: Config, names: tuple[str, ...]) -> dict[str, str]:
    """The values of `names` on one broker of the cluster (those it reports)."""
    timeout = config.operation_timeout_ms / 1000
    admin = _clients.admin(config)
    try:
        brokers = admin.list_topics(timeout=timeout).brokers
        if not brokers:
            return {}
        resource = ConfigResource(ResourceType.BROKER, str(min(brokers)))
        entries = admin.describe_configs([resource], request_timeout=timeout)[resource].result(timeout)
    except KafkaException:
        return {}
    found = {name: entries[name].value for name in names if name in entries}
    return {name: value for name, value in found.items() if value is not None}


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


def check_transaction_timeout(config: Config) -> None:
    """transaction_timeout_ms must not exceed the broker's transaction.max.timeout.ms: every producer's
    init_transactions would fail, after the query started."""
    limit = broker_settings(config, ("transaction.max.timeout.ms",)).get("transaction.max.timeout.ms")
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
