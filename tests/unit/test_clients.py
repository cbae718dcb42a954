"""eos._kafka._clients: the settings of every Kafka client eos creates, built from Config (no client is
created)."""

from __future__ import annotations

from functools import partial

import pytest

from eos._kafka._clients import admin_settings, consumer_settings, producer_settings
from eos._kafka._java import spark_source_options
from tests.support.configs import config as base_config

config = partial(base_config, bootstrap_servers="b1:9092,b2:9092")


def test_producer_settings_transactional():
    cfg = config(
        processing_guarantee="exactly_once",
        transaction_timeout_ms=45_000,
        kafka={"security.protocol": "SSL"},
        producer={"linger.ms": 50},
    )
    settings = producer_settings(cfg, cfg.transactional_id("in", 2))
    assert settings["bootstrap.servers"] == "b1:9092,b2:9092"
    assert settings["security.protocol"] == "SSL"
    assert settings["linger.ms"] == 50
    assert settings["enable.idempotence"] is True
    assert settings["transactional.id"] == "app:in:2"
    assert settings["transaction.timeout.ms"] == 45_000
    assert settings["message.timeout.ms"] == 45_000


@pytest.mark.parametrize(("configured", "expected"), [(10_000, 10_000), (120_000, 60_000)])
def test_message_timeout_never_exceeds_the_transaction_timeout(configured, expected):
    cfg = config(producer={"message.timeout.ms": configured})
    assert producer_settings(cfg, "app:in:0")["message.timeout.ms"] == expected


def test_producer_settings_idempotent_without_transactions():
    settings = producer_settings(config(producer={"message.timeout.ms": 120_000}), None)
    assert settings["enable.idempotence"] is True
    assert "transactional.id" not in settings
    assert "transaction.timeout.ms" not in settings
    assert settings["message.timeout.ms"] == 120_000


def test_consumer_settings_force_group_and_read_committed():
    cfg = config(kafka={"sasl.mechanism": "PLAIN"}, consumer={"fetch.min.bytes": 5})
    settings = consumer_settings(cfg, **{"enable.partition.eof": True})
    assert settings["group.id"] == "app"
    assert settings["isolation.level"] == "read_committed"
    assert settings["enable.auto.commit"] is False
    assert settings["fetch.min.bytes"] == 5
    assert settings["sasl.mechanism"] == "PLAIN"
    assert settings["enable.partition.eof"] is True


def test_admin_settings():
    settings = admin_settings(config(kafka={"security.protocol": "SSL"}, admin={"request.timeout.ms": 1}))
    assert settings["bootstrap.servers"] == "b1:9092,b2:9092"
    assert settings["security.protocol"] == "SSL"
    assert settings["request.timeout.ms"] == 1


def test_spark_source_options_plain():
    options = spark_source_options(
        config(kafka={"security.protocol": "SASL_SSL", "ssl.ca.location": "/ca.pem"})
    )
    assert options == {
        "kafka.bootstrap.servers": "b1:9092,b2:9092",
        "kafka.security.protocol": "SASL_SSL",
        # librdkafka's CA file, as the Java client's PEM trust store
        "kafka.ssl.truststore.location": "/ca.pem",
        "kafka.ssl.truststore.type": "PEM",
    }


def test_spark_source_options_carry_a_pkcs12_key_store_and_pem_strings():
    options = spark_source_options(
        config(kafka={"ssl.keystore.location": "/c.p12", "ssl.keystore.password": "pw", "ssl.ca.pem": "CA"})
    )
    assert (
        options["kafka.ssl.keystore.location"] == "/c.p12" and options["kafka.ssl.keystore.type"] == "PKCS12"
    )
    assert options["kafka.ssl.keystore.password"] == "pw"
    assert options["kafka.ssl.truststore.certificates"] == "CA" and "kafka.ssl.ca.pem" not in options
    pem = spark_source_options(config(kafka={"ssl.certificate.pem": "CERT", "ssl.key.pem": "KEY"}))
    assert (pem["kafka.ssl.keystore.type"], pem["kafka.ssl.keystore.certificate.chain"]) == ("PEM", "CERT")
    assert pem["kafka.ssl.keystore.key"] == "KEY" and "kafka.ssl.key.pem" not in pem


@pytest.mark.parametrize(
    ("mechanism", "module"),
    [
        ({}, "org.apache.kafka.common.security.plain.PlainLoginModule"),
        ({"sasl.mechanisms": "SCRAM-SHA-512"}, "org.apache.kafka.common.security.scram.ScramLoginModule"),
    ],
)
def test_spark_source_options_build_a_jaas_config_from_librdkafka_credentials(mechanism, module):
    cfg = config(kafka={"sasl.username": "alice", "sasl.password": "pw", **mechanism})
    options = spark_source_options(cfg)
    assert options["kafka.sasl.jaas.config"] == f'{module} required username="alice" password="pw";'
    assert "kafka.sasl.username" not in options and "kafka.sasl.password" not in options
    if mechanism:
        assert options["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
        assert "kafka.sasl.mechanisms" not in options


def test_spark_source_options_keep_an_explicit_jaas_config():
    jaas = 'X required username="bob" password="other";'
    options = spark_source_options(config(kafka={"sasl.username": "alice", "sasl.jaas.config": jaas}))
    assert options["kafka.sasl.jaas.config"] == jaas
