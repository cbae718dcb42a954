"""Kafka's command-line conventions in `eos`: --bootstrap-server, --command-config (a Java client
properties file), a reset that is a dry run unless --execute, --to-datetime; and the Kafka tools jars
`eos transactions` fetches when it has none (the failing fetch here is a real refused connection)."""

from __future__ import annotations

import datetime

import pytest

from eos.cli import build_parser, main
from eos.cli._base import EXIT_ERROR, EXIT_USAGE, CliError
from eos.cli._properties import client_settings, parse
from eos.cli._tools import tools_classpath, user_cache
from eos.session import free_port

SECRET = "s3cr3t-Pa55"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def args(*argv: str):
    return build_parser({}).parse_args(list(argv))


def test_bootstrap_server_is_kafkas_spelling_and_the_plural_still_works():
    singular = args("--bootstrap-server", "k:1", "offsets", "show", "--app", "a")
    plural = args("offsets", "show", "--app", "a", "--bootstrap-servers", "k:1")
    assert singular.bootstrap_servers == plural.bootstrap_servers == "k:1"
    assert "--bootstrap-server HOST" in build_parser({}).format_help()


def test_offsets_reset_is_a_dry_run_unless_execute(capsys):
    assert args("offsets", "reset", "--app", "a", "--to", "earliest").execute is False
    assert args("offsets", "reset", "--app", "a", "--to", "earliest", "--execute").execute is True
    with pytest.raises(SystemExit) as exit_info:
        args("offsets", "reset", "--app", "a", "--to", "earliest", "--execute", "--dry-run")
    assert exit_info.value.code == EXIT_USAGE
    assert "not allowed with argument" in capsys.readouterr().err


def test_to_datetime_takes_kafkas_format_with_or_without_a_zone(capsys):
    def ms(text: str) -> int:
        return args("offsets", "reset", "--app", "a", "--to-datetime", text).to_datetime

    assert ms("2026-11-22T09:30:00.000Z") == 1795339800000
    assert ms("2026-11-22T10:30:00.000+01:00") == 1795339800000
    local = datetime.datetime(2026, 11, 22, 9, 30, 0, 250000).astimezone()
    assert ms("2026-11-22T09:30:00.250") == int(local.timestamp() * 1000)
    with pytest.raises(SystemExit):
        args("offsets", "reset", "--app", "a", "--to-datetime", "yesterday")
    assert "is not a time like 2026-11-22T09:30:00.000" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        args("offsets", "reset", "--app", "a", "--to-datetime", "2026-11-22T09:30:00", "--to", "earliest")


def test_properties_are_read_as_java_reads_them():
    text = "\n".join(
        [
            "# a comment",
            "! another",
            "security.protocol=SASL_SSL",
            "sasl.mechanism : PLAIN",
            "client.id  eos-ops",
            "   request.timeout.ms=30000   ",
            "long.value=first \\",
            "    second",
            "escaped\\=key=a\\tb\\u00e9",
            "empty.value=",
        ]
    )
    assert parse(text, "f") == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "client.id": "eos-ops",
        "request.timeout.ms": "30000   ",
        "long.value": "first second",
        "escaped=key": "a\tbé",
        "empty.value": "",
    }
    with pytest.raises(CliError, match="f, line 1: malformed"):
        parse("k=\\u12", "f")


def test_client_settings_translate_java_names_for_librdkafka():
    jaas = f'{PLAIN} required username="ops" password="{SECRET}";'
    props = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": jaas,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/kafka/ca.pem",
    }
    assert client_settings(props, "f") == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "ops",
        "sasl.password": SECRET,
        "ssl.ca.location": "/etc/kafka/ca.pem",
    }
    shaded = {"sasl.jaas.config": "kafkashaded." + jaas.replace("plain.Plain", "scram.Scram")}
    assert client_settings(shaded, "f")["sasl.username"] == "ops"


@pytest.mark.parametrize(
    "props, message",
    [
        (
            {"sasl.jaas.config": f'{OAUTH} required clientSecret="{SECRET}";'},
            'OAuthBearerLoginModule needs clientId="..." and clientSecret="..."',
        ),
        (
            {"sasl.jaas.config": f'{PLAIN} required password="{SECRET}";'},
            'sasl.jaas.config has no username="..."',
        ),
        ({"ssl.truststore.location": "/x.jks", "ssl.truststore.password": SECRET}, "a JKS trust store"),
        ({"ssl.keystore.location": "/x.jks", "ssl.keystore.password": SECRET}, "a JKS key store"),
    ],
)
def test_what_cannot_be_translated_is_named_without_its_value(props, message):
    with pytest.raises(CliError) as error:
        client_settings(props, "--command-config f")
    assert error.value.code == EXIT_USAGE
    assert message in str(error.value) and "--command-config f" in str(error.value)
    assert SECRET not in str(error.value)


def test_a_missing_command_config_is_a_usage_error_naming_it(tmp_path, capsys):
    missing = tmp_path / "nope.properties"
    assert main(["--command-config", str(missing), "offsets", "show", "--app", "a"]) == EXIT_USAGE
    assert f"--command-config {missing}: No such file" in capsys.readouterr().err


def test_transactions_jars_that_cannot_be_fetched_say_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("EOS_CACHE", str(tmp_path))  # no broker jars of make setup there either
    nowhere = f"http://127.0.0.1:{free_port()}/maven2"  # nothing listens: a real refused connection
    monkeypatch.setenv("EOS_MAVEN_REPO", nowhere)
    with pytest.raises(CliError) as error:
        tools_classpath()
    text = str(error.value)
    assert error.value.code == EXIT_ERROR
    assert nowhere in text and "EOS_MAVEN_REPO" in text and str(user_cache()) in text
    assert not any(user_cache().glob("*.jar"))


def test_the_tools_cache_is_the_users_unless_eos_cache_is_set(tmp_path, monkeypatch):
    monkeypatch.delenv("EOS_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert user_cache().parent.parent == tmp_path / "xdg" / "eos"
    monkeypatch.setenv("EOS_CACHE", str(tmp_path / "c"))
    assert user_cache().parent.parent == tmp_path / "c"
