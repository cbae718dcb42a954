"""`format("eos")` options become a Config and the data source's own settings (`settings_of`), and its
ledger (`eos._spark._ledger`): files per batch, attempts appended, old batches dropped. No Spark, no
broker."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark.sql.datasource")

import eos  # noqa: E402
from eos._spark import _ledger  # noqa: E402
from eos._spark._datasource import settings_of  # noqa: E402
from eos.cli._main import main as cli  # noqa: E402

GOOD = {"kafka.bootstrap.servers": "b:9092", "topic": "out", "eos.app.id": "app"}


def test_spark_kafka_options_and_eos_dotted_keys_make_the_config():
    settings = settings_of(
        {
            **GOOD,
            "eos.processing.guarantee": "exactly_once",
            "eos.commit.every": "500",
            "eos.producer.linger.ms": "5",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.password": "hunter2",
            "checkpointlocation": "/ck",  # Spark lower-cases option keys
            "path": "ignored",
        }
    )
    config = settings.config
    assert (config.bootstrap_servers, config.output_topic, config.app_id) == ("b:9092", "out", "app")
    assert config.exactly_once and config.commit_every == 500
    assert dict(config.producer) == {"linger.ms": "5"}
    assert dict(config.kafka) == {"security.protocol": "SASL_SSL", "sasl.password": "hunter2"}
    assert "hunter2" not in repr(config)
    assert settings.ledger == "/ck/eos-ledger" and settings.check_input and settings.retain == _ledger.RETAIN


def test_store_snapshots_go_under_the_checkpoint_unless_placed_or_turned_off():
    assert settings_of({**GOOD, "checkpointlocation": "s3://b/ck/"}).config.state_snapshot_location == (
        "s3://b/ck/eos-snapshots"
    )
    placed = settings_of({**GOOD, "checkpointlocation": "/ck", "eos.state.snapshot.location": "gs://s/x"})
    assert placed.config.state_snapshot_location == "gs://s/x"
    off = settings_of({**GOOD, "checkpointlocation": "/ck", "eos.state.snapshot.interval.ms": "0"})
    assert off.config.state_snapshot_interval_ms == 0
    assert settings_of(GOOD).config.state_snapshot_location is None  # no checkpoint option: none


def test_java_client_names_are_translated_as_spark_users_write_them():
    jaas = (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="s3cr3t";'
    )
    settings = settings_of({**GOOD, "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.jaas.config": jaas})
    assert dict(settings.config.kafka) == {
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "s3cr3t",
    }
    kerberos = 'com.sun.security.auth.module.Krb5LoginModule required keyTab="/k";'
    with pytest.raises(eos.ConfigError) as info:
        settings_of({**GOOD, "kafka.sasl.jaas.config": kerberos})
    assert info.value.field == "kafka.sasl.jaas.config" and "/k" not in str(info.value)


def test_own_options():
    settings = settings_of(
        {**GOOD, "eos.input.filtered": "true", "eos.ledger.dir": "s3://b/l", "eos.ledger.retain": "7"}
    )
    assert (settings.check_input, settings.ledger, settings.retain) == (False, "s3://b/l", 7)
    assert settings_of(GOOD).ledger is None  # no checkpoint location given: no ledger


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({**GOOD, "eos.comit.every": "1"}, "eos.comit.every"),
        ({k: v for k, v in GOOD.items() if k != "topic"}, "topic"),
        ({k: v for k, v in GOOD.items() if k != "eos.app.id"}, "eos.app.id"),
        ({k: v for k, v in GOOD.items() if k != "kafka.bootstrap.servers"}, "kafka.bootstrap.servers"),
        ({**GOOD, "kafka.bootstrap.servers": "nohostport"}, "kafka.bootstrap.servers"),
        ({**GOOD, "eos.processing.guarantee": "twice"}, "eos.processing.guarantee"),
        ({**GOOD, "eos.commit.every": "many"}, "eos.commit.every"),
        ({**GOOD, "kafka.group.id": "other"}, "kafka.group.id"),
        ({**GOOD, "eos.input.filtered": "maybe"}, "eos.input.filtered"),
        ({**GOOD, "eos.ledger.retain": "0"}, "eos.ledger.retain"),
        ({**GOOD, "eos.metrics.port": "9108"}, "eos.metrics.port"),
        ({**GOOD, "eos.on.error": "dead_letter"}, "eos.dead.letter.topic"),
    ],
)
def test_a_bad_option_is_named(options, named):
    with pytest.raises(eos.ConfigError) as info:
        settings_of(options)
    assert info.value.field == named, str(info.value)
    assert f"'{named}'" in str(info.value)


def test_dead_letter_options_make_the_config():
    config = settings_of({**GOOD, "eos.on.error": "dead_letter", "eos.dead.letter.topic": "dlq"}).config
    assert (config.on_error, config.dead_letter_topic, config.max_dead_letters_per_batch) == (
        "dead_letter",
        "dlq",
        100,
    )


def test_ledger_appends_attempts_and_keeps_the_last_batches(tmp_path, capsys):
    location = str(tmp_path / "ck" / "eos-ledger")

    def attempt(batch, skipped):
        part = {"topic": "in", "partition": 0, "transactional_id": "app:in:0", "first_offset": batch * 10}
        part.update(last_offset=batch * 10 + 9, committed_before=batch * 10, records_in=10, skipped=skipped)
        part.update(records_out=10 - skipped, transactions=1, task=0)
        return {"outcome": "committed", "partitions": [part]}

    for batch in range(5):
        _ledger.append(location, batch, attempt(batch, 0), retain=3)
    _ledger.append(location, 4, attempt(4, 4), retain=3)  # batch 4 run again after a driver crash
    assert _ledger.batch_ids(location) == [2, 3, 4]
    [entry] = _ledger.read_batches(location, [4])
    assert [a["partitions"][0]["skipped"] for a in entry["attempts"]] == [0, 4]
    assert not [p for p in (tmp_path / "ck" / "eos-ledger").iterdir() if p.name.startswith(".")]

    assert (
        cli(["ledger", "show", "--checkpoint-location", str(tmp_path / "ck"), "--batch", "4", "--json"]) == 0
    )
    assert [a["outcome"] for a in json.loads(capsys.readouterr().out)["attempts"]] == ["committed"] * 2
    assert cli(["ledger", "show", "--checkpoint-location", str(tmp_path / "ck"), "--last", "1"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["BATCH", "ATTEMPT", "OUTCOME"] and len(table) == 3
    assert table[2].split()[:2] == ["4", "2"] and "40-49" in table[2]
    assert cli(["ledger", "show", "--checkpoint-location", str(tmp_path / "none")]) == 1
    assert "no eos ledger at" in capsys.readouterr().err


def test_format_eos_takes_the_jvm_route_only_for_a_query_the_jvm_writer_writes():
    """eos.DefaultSource asks `Router.route` per stream, with the session's FUNCTIONS conf
    (`_format_jvm.registered`): "jvm" for a pass-through query of a session that registered "eos" without
    functions, "python" (the Python data source) for anything else."""
    from eos._core._spec import Functions
    from eos._spark import _format_jvm
    from eos._spark._format_jvm import Router

    class Conf(dict):
        def set(self, key, value):
            self[key] = value

    class Session:
        def __init__(self):
            self.conf = Conf()

    plain, counting = Session(), Session()
    _format_jvm.registered(plain, Functions())
    _format_jvm.registered(counting, Functions(process=lambda row, state: None))
    none, process = plain.conf[_format_jvm.FUNCTIONS], counting.conf[_format_jvm.FUNCTIONS]
    assert (none, process) == ("", "the query has a process function")
    router = Router(sc=None, sink=None)
    assert router.route(none, GOOD) == "jvm"
    assert router.route(none, {**GOOD, "eos.data.path": "python"}) == "python"
    assert router.route(none, {**GOOD, "eos.value.serializer": "avro"}) == "python"
    assert router.route(none, {**GOOD, "eos.producer.batch.num.messages": "10"}) == "python"
    assert router.route(process, GOOD) == "python"  # its functions run in Python
    assert router.route(None, GOOD) == "python"  # a session no eos registered "eos" in
    assert router.route(none, {**GOOD, "eos.comit.every": "5"}) == "python"  # the data source names it


def test_the_session_conf_the_provider_reads_is_the_one_eos_register_sets():
    """`eos.DefaultSource` reads FUNCTIONS from the session; `_format_jvm.registered` writes it."""
    import re
    from pathlib import Path

    from eos._spark import _format_jvm

    source = Path(_format_jvm.__file__).parent / "jvm" / "DefaultSource.java"
    [name] = re.findall(r'String FUNCTIONS = "([^"]+)";', source.read_text())
    assert name == _format_jvm.FUNCTIONS


def test_a_misspelt_eos_option_names_the_one_it_resembles():
    with pytest.raises(eos.ConfigError) as info:
        settings_of({**GOOD, "eos.processing.gaurantee": "exactly_once"})
    assert info.value.field == "eos.processing.gaurantee"
    assert "did you mean 'eos.processing.guarantee'?" in info.value.reason
