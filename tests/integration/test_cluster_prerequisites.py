"""What exactly_once needs of the cluster, checked by the driver before the first transaction: a
transaction log the cluster can create. A cluster of fewer brokers than its
transaction.state.log.replication.factor (Kafka's default is 3) never begins a transaction: every
producer waits for a transaction coordinator until it times out."""

from __future__ import annotations

import json

import attrs
import pytest
from conftest import group_offsets

import eos
from eos import testing
from eos.session import free_port
from tests.support.localbroker import LocalBroker


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """One broker left at Kafka's defaults for its transaction log: 3 replicas, min.isr 2."""
    broker = LocalBroker(
        tmp_path_factory.mktemp("small") / "kafka",
        port=free_port(),
        controller_port=free_port(),
        overrides={"transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2"},
    )
    broker.up()
    yield broker
    broker.down()


@pytest.mark.parametrize("path", ["python", "jvm"])
def test_a_cluster_too_small_for_its_transaction_log_is_named_before_any_transaction(
    spark, small, names, path
):
    """(Before: the first task's init_transactions waited for a coordinator until operation_timeout_ms,
    then failed with librdkafka's or the Java client's timeout.) at_least_once, which needs no
    transactions, still runs on the same cluster."""
    bootstrap = small.bootstrap_servers
    source, output = names("small-in"), names("small-out")
    testing.create_topic(bootstrap, source, 2)
    testing.create_topic(bootstrap, output, 2)
    testing.produce_sequence(bootstrap, source, 2, 10)
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("small-app"),
        output_topic=output,
        processing_guarantee="exactly_once",
        operation_timeout_ms=15_000,
        data_path=path,
    )
    batch = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", json.dumps({source: {"0": 0, "1": 0}}))
        .load()
    )

    with pytest.raises(eos.ConfigError) as info:
        eos.sink(config)(batch, 0)

    assert info.value.field == "processing_guarantee", info.value
    assert "transaction.state.log.replication.factor=3" in info.value.reason, info.value
    assert "the cluster has 1" in info.value.reason, info.value
    records, _ = testing.read_topic(bootstrap, output, isolation="read_uncommitted", timeout=10)
    assert records == []
    assert group_offsets(config, source, 2) == {0: None, 1: None}

    eos.sink(attrs.evolve(config, processing_guarantee="at_least_once"))(batch, 0)
    records, _ = testing.read_topic(bootstrap, output, timeout=30)
    assert len(records) == 20
