"""A secured cluster: SASL/PLAIN credentials and ACLs reach every client eos creates — producer,
consumers, admin and the Spark Kafka source — from the one `Config.kafka` mapping."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from conftest import (
    error_text,
    event_log_conf,
    finish,
    grant_pipeline,
    group_offsets,
    start_pipeline,
    writers_ran,
)

import eos
from eos import testing
from tests.support.localbroker import SASL_USERS


@pytest.fixture
def secured(broker, names):
    """Topics and ACLs: alice may do everything the pipeline needs; bob may not write the output."""
    local = broker.require_local()
    source, output = names("sec-in"), names("sec-out")
    testing.create_topic(local.bootstrap_servers, source, 2)
    testing.create_topic(local.bootstrap_servers, output, 2)
    sent = testing.produce_sequence(local.bootstrap_servers, source, 2, 500)
    app = names("sec-app")
    reads = ("DESCRIBE", "READ")
    grant_pipeline(local, "User:alice", source, output, app, output_operations=(*reads, "WRITE"))
    grant_pipeline(local, "User:bob", source, output, app, output_operations=reads)
    return local, source, output, app, sent


def _config(local, user, password, app, output, **kw):
    return eos.Config(
        bootstrap_servers=local.sasl_bootstrap_servers,
        app_id=app,
        output_topic=output,
        processing_guarantee="exactly_once",
        kafka={
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": password,
        },
        **kw,
    )


# The Python path: make chaos (long-test); make test runs it over TLS and OAUTHBEARER (test_tls.py,
# test_oauth.py), and this SASL/PLAIN run on the JVM data path, which the others do not take.
@pytest.mark.parametrize("path", [pytest.param("python", marks=pytest.mark.long), "jvm"])
def test_correct_credentials_run_the_pipeline_and_secrets_stay_out_of_logs(secured, tmp_path, path):
    """The example pipeline as its own driver process, credentials from EOS_KAFKA_* variables; its
    whole stderr (driver, JVM, executors' Python workers) is kept and searched for the password. On
    both data paths: the JVM one hands the credentials to the executors' Java client."""
    local, source, output, app, sent = secured
    # Spark's event log (SQL plans, the environment, every job) is written too, through spark-defaults.
    conf_dir, events = event_log_conf(tmp_path)
    oauth = "principal=alice extension_secretmarker=oauth-marker-5f3a"  # a librdkafka-only secret
    env = {
        "EOS_PROCESSING_GUARANTEE": "exactly_once",
        "EOS_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "EOS_KAFKA_SASL_MECHANISM": "PLAIN",
        "EOS_KAFKA_SASL_USERNAME": "alice",
        "EOS_KAFKA_SASL_PASSWORD": SASL_USERS["alice"],
        "EOS_KAFKA_SASL_OAUTHBEARER_CONFIG": oauth,
        "EOS_LOG_LEVEL": "debug",
        "SPARK_CONF_DIR": str(conf_dir),
        "EOS_DATA_PATH": path,
    }
    summaries = tmp_path / "summaries.jsonl"
    proc = start_pipeline(
        local.sasl_bootstrap_servers, app, source, output, tmp_path / "ckpt", summaries, env
    )
    finish(proc)

    result = testing.verify_exactly_once(local.bootstrap_servers, output, testing.flatten(sent))
    assert result.exactly_once, result
    logs = summaries.with_suffix(".log").read_text()
    writers_ran(path, logs, summaries)
    event_logs = "".join(p.read_text(errors="replace") for p in events.rglob("*") if p.is_file())
    assert "SparkListenerSQLExecutionStart" in event_logs  # the query plans are in there
    for secret in (SASL_USERS["alice"], "oauth-marker-5f3a"):
        assert secret not in logs, f"{secret!r} in the driver's, JVM's or workers' output"
        assert secret not in event_logs, f"{secret!r} in Spark's event log (plans, environment)"


@pytest.mark.parametrize(
    "key",
    [
        "sasl.password",
        "sasl.oauthbearer.config",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.assertion.private.key.passphrase",
        "sasl.oauthbearer.assertion.private.key.pem",
        "ssl.key.password",
        "ssl.key.pem",
        "ssl_key",
        "ssl.keystore.password",
        "ssl.keystore.key",
        "ssl.truststore.password",
        "sasl.jaas.config",
        "sasl.oauthbearer.client.credentials.client.secret",
        "sasl.kerberos.kinit.cmd",
    ],
)
def test_every_secret_bearing_setting_is_hidden_from_reprs_and_spark_plans(key):
    """librdkafka's sensitive properties and the Java client's PASSWORD configs (see eos/config.py)."""
    import re

    from eos.config import SPARK_REDACTION_REGEX

    marker = "value-that-must-not-show"
    config = eos.Config(bootstrap_servers="b:1", app_id="a", output_topic="o", kafka={key: marker})
    assert marker not in repr(config)
    assert re.search(SPARK_REDACTION_REGEX, f"kafka.{key}"), "Spark would print this option's value"


def test_wrong_password_fails_fast_with_a_clear_error(spark, secured, capfd):
    local, source, output, app, _ = secured
    config = _config(local, "alice", "not-the-password", app, output, operation_timeout_ms=20_000)

    with pytest.raises(eos.AuthenticationError, match="refused the credentials"):
        eos.read_stream(spark, config, [source])
    with pytest.raises(eos.AuthenticationError):
        eos.sink(config)(
            spark.createDataFrame([], "topic string, partition int, offset long, value binary"), 0
        )
    captured = capfd.readouterr()
    assert "not-the-password" not in captured.out + captured.err


def _batch(spark, local, source: str):
    """`source`'s two partitions from offset 0, as one batch."""
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", local.bootstrap_servers)
        .option("subscribe", source)
        .option("startingOffsets", json.dumps({source: {"0": 0, "1": 0}}))
        .load()
    )


def _refused(spark, local, source: str, config: eos.Config) -> str:
    """The error `config`'s principal gets writing `_batch`."""
    with pytest.raises(Exception) as excinfo:
        eos.sink(config)(_batch(spark, local, source), 0)
    return error_text(excinfo.value)


def _offsets(local, app: str, source: str) -> dict:
    """The app's committed offsets of `source`'s two partitions, read as the super user."""
    plaintext = eos.Config(bootstrap_servers=local.bootstrap_servers, app_id=app, output_topic="unused")
    return group_offsets(plaintext, source, 2)


def test_principal_without_write_on_output_gets_a_clear_error_and_nothing_commits(spark, secured):
    local, source, output, app, _ = secured
    config = _config(local, "bob", SASL_USERS["bob"], app, output)
    message = _refused(spark, local, source, config)
    assert "ProduceError" in message and "authorization failed" in message.lower(), message[-3000:]
    assert output in message and f"{source}/" in message
    records, _ = testing.read_topic(local.bootstrap_servers, output, isolation="read_committed", timeout=30)
    assert records == []
    assert _offsets(local, app, source) == {0: None, 1: None}


@pytest.mark.parametrize("path", ["python", "jvm"])
def test_principal_without_the_transactional_id_acl_is_told_which_acl_and_nothing_commits(
    spark, broker, names, path
):
    """bob may read, write and commit offsets for the app, but not use its transactional ids: the first
    init_transactions is refused, and the error names the ACL (WRITE and DESCRIBE on the app's
    transactional ids, prefixed) and the command that grants it, on either data path. (Before: librdkafka's
    "Transactional Id authorization failed", or the Java client's exception.) Then the advice is followed,
    those two ACLs and no more, and the same batch is written exactly once."""
    local = broker.require_local()
    source, output, app = names("acl-in"), names("acl-out"), names("acl-app")
    testing.create_topic(local.bootstrap_servers, source, 2)
    testing.create_topic(local.bootstrap_servers, output, 2)
    sent = testing.produce_sequence(local.bootstrap_servers, source, 2, 10)
    grant_pipeline(local, "User:bob", source, output, app, transactional_ids=False)
    config = _config(local, "bob", SASL_USERS["bob"], app, output, data_path=path)
    message = _refused(spark, local, source, config)
    assert f"may not use the transactional.id '{app}:{source}:" in message, message[-3000:]
    assert f"--transactional-id {app} --resource-pattern-type prefixed" in message, message[-3000:]
    records, _ = testing.read_topic(local.bootstrap_servers, output, isolation="read_uncommitted", timeout=10)
    assert records == []
    assert _offsets(local, app, source) == {0: None, 1: None}

    granted = [  # what the message says to grant, as kafka-acls.sh would
        AclBinding(
            ResourceType.TRANSACTIONAL_ID,
            app,
            ResourcePatternType.PREFIXED,
            "User:bob",
            "*",
            op,
            AclPermissionType.ALLOW,
        )  # fmt: skip
        for op in (AclOperation.WRITE, AclOperation.DESCRIBE)
    ]
    admin = AdminClient({"bootstrap.servers": local.bootstrap_servers})  # ANONYMOUS is a super user
    for future in admin.create_acls(granted).values():
        future.result(30)
    eos.sink(config)(_batch(spark, local, source), 0)
    result = testing.verify_exactly_once(local.bootstrap_servers, output, testing.flatten(sent))
    assert result.exactly_once, result
