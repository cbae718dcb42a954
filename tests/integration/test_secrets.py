"""Secrets in `format("eos")` options stay out of Spark's plans on a session eos did not build.

`eos.spark_session()` starts Spark with a wide `spark.redaction.regex`; a user's own session has Spark's
default, which misses `eos.schema.registry.basic.auth.user.info` (and PEM keys, passphrases, ...).
`eos.register(spark)` widens the session's `spark.sql.redaction.options.regex` instead, the runtime conf
that Spark's plans (explain, a failed query's message, the SQL UI and event logs) redact data source
options with, together with `spark.redaction.regex`."""

from __future__ import annotations

import contextlib
import re

import pytest
from conftest import seed

import eos
from eos.config import SPARK_REDACTION_REGEX
from eos.session import with_input_column

#: Spark's defaults, as a session built without eos has them
SPARK_DEFAULT_REGEX = r"(?i)secret|password|token|access[.]?key"
SPARK_DEFAULT_OPTIONS_REGEX = "(?i)url"
OPTIONS_REGEX = "spark.sql.redaction.options.regex"
REDACTED = "*********(redacted)"

SECRETS = {
    "eos.schema.registry.basic.auth.user.info": "alice:s3cr3t-USERINFO",
    "kafka.ssl.key.password": "s3cr3t-KEYPASSWORD",
    "kafka.ssl.keystore.password": "s3cr3t-KEYSTOREPASSWORD",
    "kafka.ssl.truststore.password": "s3cr3t-TRUSTSTOREPASSWORD",
    "kafka.ssl.keystore.key": "-----BEGIN PRIVATE KEY----- s3cr3t-PEM",
    "kafka.sasl.jaas.config": (
        "org.apache.kafka.common.security.plain.PlainLoginModule required"
        ' username="alice" password="s3cr3t-JAAS";'
    ),
}


@contextlib.contextmanager
def _defaults(session):
    """`session` with Spark's own redaction settings, as on a session built without eos; restored after."""
    before = {k: session.conf.get(k) for k in ("spark.redaction.regex", OPTIONS_REGEX)}
    legacy = "spark.sql.legacy.setCommandRejectsSparkCoreConfs"  # lets a running session set the core conf
    session.conf.set(legacy, "false")
    session.conf.set("spark.redaction.regex", SPARK_DEFAULT_REGEX)
    session.conf.unset(OPTIONS_REGEX)
    try:
        assert session.conf.get(OPTIONS_REGEX) == SPARK_DEFAULT_OPTIONS_REGEX
        yield session
    finally:
        for key, value in before.items():
            session.conf.set(key, value)
        session.conf.unset(legacy)


@pytest.fixture
def user_session(spark):
    """A classic session of the user's (its own conf, the process's active one while the test runs)."""
    session = spark.newSession()
    jvm_session = spark._jvm.org.apache.spark.sql.SparkSession
    jvm_session.setActiveSession(session._jsparkSession)  # Spark looks Python data sources up there
    try:
        with _defaults(session):
            yield session
    finally:
        jvm_session.setActiveSession(spark._jsparkSession)


def _start(session, bootstrap, names, tmp_path, source, output, **extra):
    fmt = eos.register(session, names("eos"))  # "eos" itself is the conftest session's already
    df = with_input_column(
        session.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
    )
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "topic": output,
        "eos.app.id": names("app"),
        "checkpointLocation": str(tmp_path / "ckpt"),
        **SECRETS,
        **extra,
    }
    return df.writeStream.format(fmt).options(**options).trigger(availableNow=True).start()


def _assert_hidden(text: str, where: str) -> None:
    for key, value in SECRETS.items():
        marker = re.search(r"s3cr3t-\w+", value).group()
        assert marker not in text, f"{key}'s value in {where}:\n{text}"


def test_register_keeps_secret_options_out_of_a_user_sessions_plans(user_session, bootstrap, names, tmp_path):
    source, output, _ = seed(bootstrap, names, 5, partitions=1)
    query = _start(user_session, bootstrap, names, tmp_path, source, output)
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()
    plan = query._jsq.explainInternal(True)  # what query.explain(True) prints (no capsys: eos's log
    # would keep writing to pytest's captured stream once it is closed)
    assert "WriteToMicroBatchDataSource" in plan  # the plan that carries the options
    _assert_hidden(plan, "query.explain(True)")
    for key in SECRETS:
        assert f"{key}={REDACTED}" in plan, plan
    _assert_hidden(str(query.lastProgress), "lastProgress")
    _assert_hidden(str(query), "str(query)")
    # the Spark UI's SQL tab, and the event log's SparkListenerSQLExecutionStart, show these
    store = user_session._jsparkSession.sharedState().statusStore()
    executions = store.executionsList()
    assert executions.size() > 0
    ui = "\n".join(
        f"{e.description()}\n{e.details()}\n{e.physicalPlanDescription()}"
        for e in (executions.apply(i) for i in range(executions.size()))
    )
    _assert_hidden(ui, "the SQL UI's executions")
    regex = user_session.conf.get(OPTIONS_REGEX)
    assert SPARK_DEFAULT_OPTIONS_REGEX in regex and SPARK_REDACTION_REGEX in regex  # widened, not replaced


def test_a_failed_querys_message_keeps_secret_options_out(user_session, bootstrap, names, tmp_path):
    """A bad option fails the query at its start; Spark's message carries the plan with every option."""
    source, output, _ = seed(bootstrap, names, 5, partitions=1)
    query = _start(
        user_session, bootstrap, names, tmp_path, source, output, **{"eos.processing.guarantee": "twice"}
    )
    with pytest.raises(Exception) as info:
        query.awaitTermination(300)
    message = str(info.value)
    assert "'eos.processing.guarantee'" in message and "eos.schema.registry.basic.auth.user.info" in message
    _assert_hidden(message, "the failed query's message")


def test_under_spark_connect_register_extends_the_sessions_own_regex(connect, bootstrap, names, tmp_path):
    """The server's session gets the conf; what the session had (here one that also hides any value
    naming a "vault") stays, and a second register adds nothing."""
    source, output, _ = seed(bootstrap, names, 5, partitions=1)
    with _defaults(connect):
        own = r"(?i)url|vault"
        connect.conf.set(OPTIONS_REGEX, own)
        query = _start(
            connect, bootstrap, names, tmp_path, source, output, **{"eos.processing.guarantee": "twice"}
        )
        widened = connect.conf.get(OPTIONS_REGEX)
        assert own in widened and SPARK_REDACTION_REGEX in widened
        eos.register(connect, names("eos2"))
        assert connect.conf.get(OPTIONS_REGEX) == widened
        with pytest.raises(Exception) as info:
            query.awaitTermination(300)
    message = str(info.value)
    assert "eos.schema.registry.basic.auth.user.info" in message, message
    _assert_hidden(message, "the failed query's message (Spark Connect)")
