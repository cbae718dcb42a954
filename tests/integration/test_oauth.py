"""OAUTHBEARER with OIDC client credentials: the test broker's OAUTH listener validates real RS256 JWTs
with Kafka's own OAuthBearerValidatorCallbackHandler against the JWKS of a loopback identity provider
(tests/support/oidc.py), whose token endpoint grants them. eos's clients (librdkafka's
`sasl.oauthbearer.method=oidc`) and Spark's Kafka source (the Java client's OIDC login, which
`eos.read_stream` builds from the same settings) both log in there; `format("eos")` takes the Java
client's OAuth options as a Spark query writes them."""

from __future__ import annotations

import pytest
from conftest import OAUTH_CLIENT, OAUTH_SECRET, event_log_conf, finish, seed_for, start_pipeline, writers_ran

import eos
from eos import testing
from eos._kafka._java import OAUTH_MODULE, OIDC_HANDLER

PARTITIONS = 2


@pytest.fixture
def oauth(broker, names):
    """Topics seeded over PLAINTEXT, and the ACLs the OAuth principal needs (the broker enforces them)."""
    local = broker.require_local()
    if broker.oidc is None or local.oauth_port is None:
        pytest.skip("needs the local broker's OAUTHBEARER listener")
    source, output, app, sent = seed_for(local, names, f"User:{OAUTH_CLIENT}", 300, "oa-app", PARTITIONS)
    return local, broker.oidc, source, output, app, sent


def _oidc_settings(oidc, secret=OAUTH_SECRET) -> dict[str, str]:
    """librdkafka's names, as `Config.kafka` takes them."""
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": OAUTH_CLIENT,
        "sasl.oauthbearer.client.secret": secret,
        "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.token.endpoint.url": oidc.token_url,
    }


@pytest.mark.parametrize("path", ["python", pytest.param("jvm", marks=pytest.mark.long)])
def test_the_pipeline_runs_over_oauth_and_the_client_secret_stays_out_of_logs(oauth, tmp_path, path):
    """The example pipeline as its own driver process, reading and writing only through the OAUTH
    listener, its OAuth settings from EOS_KAFKA_* variables; its whole stderr (driver, JVM, executors'
    Python workers) and Spark's event log are searched for the client secret."""
    local, oidc, source, output, app, sent = oauth
    conf_dir, events = event_log_conf(tmp_path)
    env = {
        "EOS_PROCESSING_GUARANTEE": "exactly_once",
        **{f"EOS_KAFKA_{k.replace('.', '_').upper()}": v for k, v in _oidc_settings(oidc).items()},
        "EOS_LOG_LEVEL": "debug",
        "SPARK_CONF_DIR": str(conf_dir),
        "EOS_DATA_PATH": path,
    }
    granted = oidc.granted[OAUTH_CLIENT]
    summaries = tmp_path / "summaries.jsonl"
    finish(
        start_pipeline(local.oauth_bootstrap_servers, app, source, output, tmp_path / "ckpt", summaries, env)
    )

    result = testing.verify_exactly_once(local.bootstrap_servers, output, testing.flatten(sent))
    assert result.exactly_once, result
    agents = oidc.agents
    assert oidc.granted[OAUTH_CLIENT] > granted, "no token was asked for"
    # Spark's Kafka source (the Java client's HTTP client) and eos's clients (librdkafka's, no User-Agent)
    assert any(a.startswith("Java/") for a in agents) and agents[""] > 0, agents
    logs = summaries.with_suffix(".log").read_text()
    writers_ran(path, logs, summaries)
    event_logs = "".join(p.read_text(errors="replace") for p in events.rglob("*") if p.is_file())
    assert "SparkListenerSQLExecutionStart" in event_logs
    assert OAUTH_SECRET not in logs, "the client secret in the driver's, JVM's or workers' output"
    assert OAUTH_SECRET not in event_logs, "the client secret in Spark's event log"


def test_a_refused_client_secret_is_an_authentication_error_at_once(spark, oauth, capfd):
    local, oidc, source, output, app, _ = oauth
    config = eos.Config(
        bootstrap_servers=local.oauth_bootstrap_servers,
        app_id=app,
        output_topic=output,
        kafka=_oidc_settings(oidc, secret="not-the-secret-3b9e"),
        operation_timeout_ms=20_000,
    )
    with pytest.raises(eos.AuthenticationError, match="OAUTHBEARER token") as info:
        eos.read_stream(spark, config, [source])
    assert "not-the-secret-3b9e" not in str(info.value)
    assert oidc.refused[OAUTH_CLIENT] > 0
    captured = capfd.readouterr()
    assert "not-the-secret-3b9e" not in captured.out + captured.err


def test_format_eos_takes_the_java_clients_oauth_options(spark, oauth, tmp_path):
    """A Spark query's Java OAuth options (the login module with clientId/clientSecret, the OIDC login
    handler, the token endpoint) given to format("eos") as they are."""
    local, oidc, source, output, app, sent = oauth
    java = {
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "OAUTHBEARER",
        "kafka.sasl.login.callback.handler.class": OIDC_HANDLER,
        "kafka.sasl.oauthbearer.token.endpoint.url": oidc.token_url,
        "kafka.sasl.jaas.config": (
            f'{OAUTH_MODULE} required clientId="{OAUTH_CLIENT}" clientSecret="{OAUTH_SECRET}" scope="kafka";'
        ),
    }
    reader = (
        spark.readStream.format("kafka").option("subscribe", source).option("startingOffsets", "earliest")
    )
    for key, value in {"kafka.bootstrap.servers": local.oauth_bootstrap_servers, **java}.items():
        reader = reader.option(key, value)
    writer = eos.with_input_column(reader.load()).writeStream.format("eos")
    options = {
        "kafka.bootstrap.servers": local.oauth_bootstrap_servers,
        "topic": output,
        "eos.app.id": app,
        "eos.processing.guarantee": "exactly_once",
        **java,
    }
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.option("checkpointLocation", str(tmp_path / "ckpt")).trigger(
        availableNow=True
    ).start().awaitTermination()
    result = testing.verify_exactly_once(local.bootstrap_servers, output, testing.flatten(sent))
    assert result.exactly_once, result
