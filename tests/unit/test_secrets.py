"""Secret values never reach an error, a log line or a repr: a `sasl.jaas.config` eos cannot translate,
`format("eos")` options with a bad value, `eos.Config`; and `eos.register` widens the session's
option redaction regex (tests/integration/test_secrets.py runs that against Spark)."""

from __future__ import annotations

import logging

import pytest

import eos
from eos import session
from eos._kafka._java import from_java
from eos._spark._datasource import settings_of
from eos.cli._base import CliError
from eos.cli._properties import client_settings
from eos.config import SPARK_OPTIONS_REDACTION_CONF, SPARK_REDACTION_REGEX, widened_redaction_regex

SECRET = "s3cr3t"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
GOOD = {"kafka.bootstrap.servers": "b:9092", "topic": "out", "eos.app.id": "app"}

#: sasl.jaas.config values without a login module eos translates, each with the secret somewhere
UNTRANSLATABLE = [
    f'password="{SECRET}" username="u"',  # password first: its first word is the secret's option
    f"password={SECRET} username=u;",
    f"{SECRET}",
    f'"{SECRET}" required username="u";',
    f'{SECRET}.LoginModule required username="u" password="{SECRET}";',
    f'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientSecret="{SECRET}";',
    f'com.sun.security.auth.module.Krb5LoginModule required keyTab="/{SECRET}.keytab";',
    f'{PLAIN} required password="{SECRET}";',  # no username
    f'{PLAIN} required username="u" pasword="{SECRET}";',  # no password
]


@pytest.mark.parametrize("value", UNTRANSLATABLE)
def test_an_untranslatable_jaas_config_is_refused_without_any_of_its_value(value, caplog):
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="eos")
    with pytest.raises(eos.ConfigError) as info:
        from_java({"sasl.jaas.config": value})
    assert info.value.field == "sasl.jaas.config"
    shown = f"{info.value}\n{info.value.reason}\n{caplog.text}"
    assert SECRET not in shown, shown
    assert info.value.__cause__ is None and info.value.__context__ is None


@pytest.mark.parametrize("value", UNTRANSLATABLE)
def test_format_eos_and_the_cli_refuse_it_without_its_value(value, caplog):
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="eos")
    with pytest.raises(eos.ConfigError) as info:
        settings_of({**GOOD, "kafka.sasl.jaas.config": value})
    with pytest.raises(CliError) as cli:
        client_settings({"sasl.jaas.config": value}, "--command-config f")
    assert info.value.field == "kafka.sasl.jaas.config"
    shown = f"{info.value}\n{cli.value}\n{caplog.text}"
    assert SECRET not in shown, shown


def test_a_known_login_module_is_still_named():
    kerberos = "com.sun.security.auth.module.Krb5LoginModule"
    with pytest.raises(
        eos.ConfigError, match="Krb5LoginModule needs useKeyTab=true.*sasl.kerberos.kinit.cmd"
    ):
        from_java({"sasl.jaas.config": f"kafkashaded.{kerberos} required useTicketCache=true;"})
    with pytest.raises(eos.ConfigError, match="does not start with PlainLoginModule, ScramLoginModule"):
        from_java({"sasl.jaas.config": f'password="{SECRET}" username="u"'})


SECRET_OPTIONS = {
    "eos.schema.registry.basic.auth.user.info": f"alice:{SECRET}-1",
    "eos.schema.registry.url": f"https://alice:{SECRET}-2@registry:8081",
    "kafka.ssl.key.password": f"{SECRET}-3",
    "kafka.ssl.keystore.password": f"{SECRET}-4",
    "kafka.ssl.truststore.password": f"{SECRET}-5",
    "kafka.sasl.jaas.config": f'{PLAIN} required username="alice" password="{SECRET}-6";',
    "kafka.ssl.key.pem": f"-----BEGIN PRIVATE KEY-----{SECRET}-7",
    "eos.producer.sasl.oauthbearer.client.secret": f"{SECRET}-8",
}


def test_config_repr_hides_every_secret():
    settings = settings_of({**GOOD, **SECRET_OPTIONS})
    assert settings.config.kafka["sasl.password"] == f"{SECRET}-6"  # translated, and there
    assert SECRET not in repr(settings.config) and SECRET not in str(settings.config)
    assert SECRET not in repr(settings)


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"eos.processing.guarantee": "twice"}, "eos.processing.guarantee"),
        ({"eos.value.serializer": "avro", "eos.value.schema": "{}"}, "eos.schema.registry.url"),
        ({"eos.value.serializer": "avro"}, "eos.value.schema"),
        ({"eos.basic.auth.user.info": f"alice:{SECRET}-9"}, "eos.basic.auth.user.info"),
        ({"kafka.transactional.id": SECRET}, "transactional.id"),
        ({"eos.producer.transactional.id": SECRET}, "eos.producer.transactional.id"),
        ({"kafka.ssl.keystore.location": "/k.jks"}, "kafka.ssl.keystore.location"),
        ({"kafka.ssl.truststore.location": "/t.jks"}, "kafka.ssl.truststore.location"),
        ({"eos.metrics.port": "9108"}, "eos.metrics.port"),
        ({"eos.ledger.retain": "zero"}, "eos.ledger.retain"),
    ],
)
def test_format_eos_config_errors_never_show_a_secret(bad, named, caplog):
    options = {**GOOD, **SECRET_OPTIONS, **bad}
    if "eos.value.serializer" in bad:
        del options["eos.schema.registry.url"]
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="eos")
    with pytest.raises(eos.ConfigError) as info:
        settings_of(options)
    assert named in str(info.value)
    shown = f"{info.value}\n{caplog.text}"
    assert SECRET not in shown, shown


# -- eos.register: the session's option redaction regex --------------------------------------------------


def test_the_widened_regex_keeps_the_sessions_own_and_adds_eos_once():
    assert widened_redaction_regex(None) == SPARK_REDACTION_REGEX
    assert widened_redaction_regex("  ") == SPARK_REDACTION_REGEX
    widened = widened_redaction_regex("(?i)url")
    assert widened == f"(?:(?i)url)|(?:{SPARK_REDACTION_REGEX})"
    assert widened_redaction_regex(widened) == widened
    assert widened_redaction_regex(SPARK_REDACTION_REGEX) == SPARK_REDACTION_REGEX


class _Conf:
    def __init__(self, value: str, refuse: bool = False) -> None:
        self.values = {SPARK_OPTIONS_REDACTION_CONF: value}
        self.refuse = refuse

    def get(self, key: str) -> str:
        return self.values[key]

    def set(self, key: str, value: str) -> None:
        if self.refuse:
            raise RuntimeError("[CANNOT_MODIFY_CONFIG] not on this platform")
        self.values[key] = value


class _DataSources:
    def __init__(self) -> None:
        self.registered: list[type] = []

    def register(self, cls: type) -> None:
        self.registered.append(cls)


class _Session:
    def __init__(self, conf: _Conf) -> None:
        self.conf = conf
        self.dataSource = _DataSources()  # noqa: N815 - PySpark's name


def test_register_widens_the_sessions_option_redaction_regex():
    spark = _Session(_Conf("(?i)url"))
    assert eos.register(spark, "eos-x") == "eos-x"
    assert spark.conf.values[SPARK_OPTIONS_REDACTION_CONF] == widened_redaction_regex("(?i)url")
    eos.register(spark, "eos-y")
    assert spark.conf.values[SPARK_OPTIONS_REDACTION_CONF] == widened_redaction_regex("(?i)url")
    assert len(spark.dataSource.registered) == 2


def test_a_session_that_refuses_the_conf_registers_with_a_warning(caplog):
    spark = _Session(_Conf("(?i)url", refuse=True))
    caplog.set_level(logging.DEBUG, logger="eos")
    session.register(spark, "eos-z")
    assert len(spark.dataSource.registered) == 1
    logs = [r.eos for r in caplog.records if r.name.startswith("eos")]
    assert [r.levelname for r in caplog.records if r.name.startswith("eos")] == ["WARNING"]
    assert SPARK_OPTIONS_REDACTION_CONF in logs[0]["event"] and "CANNOT_MODIFY_CONFIG" in logs[0]["error"]
