"""Mutual TLS: the test broker's SSL listener requires a client certificate signed by its CA
(tests/support/tls.py). eos's clients read a PKCS12 key store and a PEM CA (librdkafka's names), Spark's
Kafka source gets them as the Java client's stores from `eos.read_stream`; and a JKS key store, which
librdkafka cannot read, is refused with the keytool command that converts it, which works."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from conftest import TLS_KEYSTORE_PASSWORD, event_log_conf, finish, seed_for, start_pipeline, writers_ran

import eos
from eos import testing

PARTITIONS = 2


@pytest.fixture
def mtls(broker, names):
    local = broker.require_local()
    if broker.certificates is None or local.ssl_port is None:
        pytest.skip("needs the local broker's SSL listener")
    principal = broker.certificates.client_principal
    source, output, app, sent = seed_for(local, names, principal, 200, "tls-app", PARTITIONS)
    return local, broker.certificates, source, output, app, sent


@pytest.mark.parametrize("path", ["python", pytest.param("jvm", marks=pytest.mark.long)])
def test_the_pipeline_runs_over_mutual_tls_and_the_key_store_password_stays_out_of_logs(mtls, tmp_path, path):
    local, certs, source, output, app, sent = mtls
    conf_dir, events = event_log_conf(tmp_path)
    env = {
        "EOS_PROCESSING_GUARANTEE": "exactly_once",
        "EOS_KAFKA_SECURITY_PROTOCOL": "SSL",
        "EOS_KAFKA_SSL_CA_LOCATION": str(certs.ca),
        "EOS_KAFKA_SSL_KEYSTORE_LOCATION": str(certs.client_p12),
        "EOS_KAFKA_SSL_KEYSTORE_PASSWORD": TLS_KEYSTORE_PASSWORD,
        "EOS_LOG_LEVEL": "debug",
        "SPARK_CONF_DIR": str(conf_dir),
        "EOS_DATA_PATH": path,
    }
    summaries = tmp_path / "summaries.jsonl"
    finish(
        start_pipeline(local.ssl_bootstrap_servers, app, source, output, tmp_path / "ckpt", summaries, env)
    )
    result = testing.verify_exactly_once(local.bootstrap_servers, output, testing.flatten(sent))
    assert result.exactly_once, result
    logs = summaries.with_suffix(".log").read_text()
    writers_ran(path, logs, summaries)
    event_logs = "".join(p.read_text(errors="replace") for p in events.rglob("*") if p.is_file())
    assert "SparkListenerSQLExecutionStart" in event_logs
    assert TLS_KEYSTORE_PASSWORD not in logs, (
        "the key store password in the driver's, JVM's or workers' output"
    )
    assert TLS_KEYSTORE_PASSWORD not in event_logs, "the key store password in Spark's event log"


def test_a_jks_key_store_is_refused_with_a_command_that_makes_one_that_works(spark, mtls, tmp_path):
    """A Spark query's JKS key store given to format("eos"): refused, naming the keytool command; the
    store that command writes (PKCS12), given instead, runs the query exactly once over mutual TLS."""
    local, certs, source, output, app, sent = mtls
    keytool = shutil.which("keytool")
    assert keytool, "no keytool on PATH (the JDK's, which Spark needs)"
    jks = tmp_path / "client.jks"
    subprocess.run(
        [keytool, "-importkeystore", "-srckeystore", str(certs.client_p12), "-srcstoretype", "PKCS12",
         "-srcstorepass", TLS_KEYSTORE_PASSWORD, "-destkeystore", str(jks), "-deststoretype", "JKS",
         "-deststorepass", TLS_KEYSTORE_PASSWORD, "-noprompt"],
        check=True, capture_output=True,
    )  # fmt: skip
    java = {
        "kafka.bootstrap.servers": local.ssl_bootstrap_servers,
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.location": str(certs.ca),
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.keystore.location": str(jks),
        "kafka.ssl.keystore.password": TLS_KEYSTORE_PASSWORD,
    }
    options = {**java, "topic": output, "eos.app.id": app, "eos.processing.guarantee": "exactly_once"}
    with pytest.raises(eos.ConfigError) as info:
        from eos._spark._datasource import settings_of

        settings_of(options)
    message = str(info.value)
    assert "kafka.ssl.keystore.location" in message and TLS_KEYSTORE_PASSWORD not in message
    command = message.split("`")[1].replace("keytool ", f"{keytool} ", 1)
    command += f" -srcstorepass {TLS_KEYSTORE_PASSWORD} -deststorepass {TLS_KEYSTORE_PASSWORD}"  # it asks
    subprocess.run(command, shell=True, check=True, cwd=tmp_path, capture_output=True)
    options.update(
        {"kafka.ssl.keystore.location": str(tmp_path / "keystore.p12"), "kafka.ssl.keystore.type": "PKCS12"}
    )

    reader = (
        spark.readStream.format("kafka").option("subscribe", source).option("startingOffsets", "earliest")
    )
    for key, value in {**java, **options}.items():
        if key.startswith("kafka."):
            reader = reader.option(key, value)
    writer = eos.with_input_column(reader.load()).writeStream.format("eos")
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.option("checkpointLocation", str(tmp_path / "ckpt")).trigger(
        availableNow=True
    ).start().awaitTermination()
    result = testing.verify_exactly_once(local.bootstrap_servers, output, testing.flatten(sent))
    assert result.exactly_once, result
