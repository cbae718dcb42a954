"""The `eos` command without a broker: argument parsing and its exit code 2, the --to offset spec,
table formatting, the Config the clients are built from, the Java tool's settings file, and the local
state scan and wipe (with the real store files and locks of eos.state, each backend)."""

from __future__ import annotations

import pytest

from eos.cli import _state as _cli_state
from eos.cli import build_config, build_parser, main
from eos.cli._base import (
    EXIT_REFUSED,
    EXIT_USAGE,
    CliError,
    OffsetSpecError,
    format_table,
    lag,
    parse_offset_spec,
)
from eos.cli._broker import _java_properties, admin_properties, parse_tool_table
from eos.errors import ConfigError
from eos.state._backends import KINDS, backend
from eos.state._store import PartitionStore

# -- argument parsing -------------------------------------------------------------------------------


def parse(*argv: str, environ=None):
    return build_parser(environ or {}).parse_args(list(argv))


def usage_error(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        parse(*argv)
    assert exit_info.value.code == EXIT_USAGE
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("eos: error: "), lines
    return lines[0]


def test_global_options_default_from_the_environment_and_may_follow_the_subcommand():
    args = parse("offsets", "show", "--app", "a")
    assert (args.bootstrap_servers, args.timeout) == ("127.0.0.1:9092", 10.0)
    args = parse("offsets", "show", "--app", "a", environ={"EOS_BOOTSTRAP_SERVERS": "k1:9092,k2:9092"})
    assert args.bootstrap_servers == "k1:9092,k2:9092"
    before = parse("--bootstrap-servers", "b:1", "--timeout", "2.5", "offsets", "show", "--app", "a")
    after = parse("offsets", "show", "--app", "a", "--bootstrap-servers", "b:1", "--timeout", "2.5")
    assert (
        (before.bootstrap_servers, before.timeout) == (after.bootstrap_servers, after.timeout) == ("b:1", 2.5)
    )
    # given both before and after the subcommand, the later one wins
    assert parse("--timeout", "3", "state", "show", "--app", "a", "--timeout", "4").timeout == 4.0


def test_offsets_reset_takes_exactly_one_target(capsys):
    assert parse("offsets", "reset", "--app", "a", "--to", "earliest").to == "earliest"
    assert parse("offsets", "reset", "--app", "a", "--to", "LATEST").to == "latest"
    assert parse("offsets", "reset", "--app", "a", "--shift", "-5").shift == -5
    assert parse("offsets", "reset", "--app", "a", "--to", '{"t": {"0": 3}}').to == {"t": {0: 3}}
    assert "one of the arguments --to --shift --to-datetime is required" in usage_error(
        capsys, "offsets", "reset", "--app", "a"
    )
    assert "not allowed with argument" in usage_error(
        capsys, "offsets", "reset", "--app", "a", "--to", "earliest", "--shift", "1"
    )


@pytest.mark.parametrize(
    "argv, expected",
    [
        ([], "the following arguments are required: COMMAND"),
        (["offsets"], "the following arguments are required: ACTION"),
        (["offsets", "show"], "the following arguments are required: --app"),
        (
            ["offsets", "reset", "--app", "a", "--to", "yesterday"],
            "argument --to: 'yesterday' is not earliest",
        ),
        (["offsets", "reset", "--app", "a", "--shift", "x"], "argument --shift: invalid int value"),
        (["--timeout", "0", "offsets", "show", "--app", "a"], "argument --timeout: '0' must be above 0"),
        (["state", "wipe", "--app", "a", "--topic", "t", "--partition", "-1"], "'-1' must be >= 0"),
        (["transactions", "abort", "--topic", "t", "--partition", "0"], "required: --start-offset"),
        (["transactions", "nope"], "invalid choice: 'nope'"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(capsys, argv, expected):
    assert expected in usage_error(capsys, *argv)


def test_argument_combinations_checked_after_parsing_exit_2_before_any_broker_call(capsys):
    # 127.0.0.1:9 is never contacted: these are refused before the first broker call.
    code = main(
        ["--bootstrap-servers", "127.0.0.1:9", "offsets", "reset", "--app", "a", "--to", '{"t": {"0": 1}}']
        + ["--topic", "t"]
    )
    assert code == EXIT_USAGE
    assert capsys.readouterr().err.startswith("eos: error: --topic does not combine with --to JSON")
    code = main(["--bootstrap-servers", "127.0.0.1:9", "transactions", "find-hanging", "--partition", "0"])
    assert code == EXIT_USAGE
    assert capsys.readouterr().err == "eos: error: --partition needs --topic\n"


def test_an_illegal_app_id_is_a_config_error_exit_2(capsys):
    assert main(["offsets", "show", "--app", "no spaces"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("eos: error: invalid config 'app_id'") and err.count("\n") == 1


# -- the offset spec of --to ------------------------------------------------------------------------


def test_offset_spec_words_and_spark_json():
    assert parse_offset_spec(" Earliest ") == "earliest"
    assert parse_offset_spec("latest") == "latest"
    assert parse_offset_spec('{"a": {"0": 42, "1": -2}, "b.c_d-e": {"3": -1}}') == {
        "a": {0: 42, 1: -2},
        "b.c_d-e": {3: -1},
    }


@pytest.mark.parametrize(
    "text, message",
    [
        ("soon", "is not earliest, latest or JSON"),
        ("[1, 2]", "is not earliest, latest or JSON"),
        ('{"a": ', "is not earliest, latest or JSON like .*: Expecting value"),
        ("{}", "must be a non-empty object"),
        ('{"a": 5}', "expected a non-empty object"),
        ('{"a": {}}', "expected a non-empty object"),
        ('{"a": {"x": 1}}', "partition 'x' is not an integer"),
        ('{"a": {"-1": 1}}', "partition '-1' is not an integer"),
        ('{"a": {"0": -3}}', "offset -3 is not an integer >= 0"),
        ('{"a": {"0": 1.5}}', "offset 1.5 is not"),
        ('{"a": {"0": true}}', "offset True is not"),
        ('{"a": {"0": "5"}}', "offset '5' is not"),
        ('{"a b": {"0": 1}}', "'a b' is not a legal Kafka topic name"),
    ],
)
def test_offset_spec_errors_say_what_is_wrong(text, message):
    with pytest.raises(OffsetSpecError, match=message):
        parse_offset_spec(text)


# -- output -----------------------------------------------------------------------------------------


def test_table_aligns_text_left_numbers_right_and_shows_none_as_a_dash():
    table = format_table(
        ["TOPIC", "PARTITION", "COMMITTED", "LAG"],
        [("orders", 0, 42, 1234), ("orders-long-name", 11, None, 0)],
    )
    assert table.splitlines() == [
        "TOPIC             PARTITION  COMMITTED   LAG",
        "orders                    0         42  1234",
        "orders-long-name         11          -     0",
    ]
    assert format_table(["A", "B"], []) == "A  B"


def test_lag():
    assert lag(4, 10) == 6
    assert lag(None, 10) is None
    assert lag(4, None) is None
    assert lag(12, 10) == 0  # a committed offset past the end (a truncated log) is no negative lag


def test_tool_table_parsing():
    text = "TransactionalId\tCoordinator\tState\t\napp:t:0        \t1          \tOngoing\t\n\n"
    assert parse_tool_table(text) == (
        ["TransactionalId", "Coordinator", "State"],
        [["app:t:0", "1", "Ongoing"]],
    )
    assert parse_tool_table("") == ([], [])


# -- the Config and the Java tool's settings --------------------------------------------------------


def test_config_takes_the_shared_client_settings_and_nothing_else_from_the_environment():
    environ = {
        "EOS_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "EOS_KAFKA_SASL_MECHANISM": "PLAIN",
        "EOS_KAFKA_SASL_USERNAME": "alice",
        "EOS_KAFKA_SASL_PASSWORD": "s3cret",
        "EOS_ADMIN_RETRIES": "3",
        "EOS_APP_ID": "from-env",  # the CLI's --app wins: the environment's app is ignored
        "EOS_BOOTSTRAP_SERVERS": "env:9092",  # only the --bootstrap-servers default (argparse)
        "EOS_COMMIT_INTERVAL_MS": "not a number",  # the pipeline's settings do not concern the CLI
        "EOS_STATE_DIR": "/env/state",
        "EOS_KAFKA_TOOLS_VERSION": "4.0.0",  # the CLI's Kafka tools, not the client setting tools.version
    }
    config = build_config("orders", "b:9092", 2.5, None, environ)
    assert (config.app_id, config.bootstrap_servers, config.operation_timeout_ms) == (
        "orders",
        "b:9092",
        2500,
    )
    assert config.kafka == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "s3cret",
    }
    assert config.admin["retries"] == "3"
    assert config.state_dir == "/env/state"
    assert build_config("orders", "b:9092", 1, "/flag/state", environ).state_dir == "/flag/state"
    assert "s3cret" not in repr(config)
    with pytest.raises(ConfigError, match="bootstrap_servers"):
        build_config("orders", "no-port", 1, None, {})


def test_java_tool_settings_carry_security_as_the_java_client_spells_it():
    config = build_config(
        "orders",
        "b:9092",
        3,
        None,
        {
            "EOS_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
            "EOS_KAFKA_SASL_MECHANISM": "PLAIN",
            "EOS_KAFKA_SASL_USERNAME": "alice",
            "EOS_KAFKA_SASL_PASSWORD": 'p"w\\d',
        },
    )
    props = admin_properties(config, 3)
    assert props["security.protocol"] == "SASL_PLAINTEXT"
    assert props["sasl.mechanism"] == "PLAIN"
    assert props["sasl.jaas.config"] == (
        "org.apache.kafka.common.security.plain.PlainLoginModule required"
        ' username="alice" password="p\\"w\\\\d";'
    )
    assert "sasl.password" not in props and "sasl.username" not in props  # librdkafka-only names
    assert "bootstrap.servers" not in props  # given as --bootstrap-server
    assert props["request.timeout.ms"] == props["default.api.timeout.ms"] == "3000"


def test_java_tool_settings_trust_the_ca_file_librdkafka_uses():
    config = build_config(
        "orders",
        "b:9092",
        3,
        None,
        {"EOS_KAFKA_SECURITY_PROTOCOL": "SSL", "EOS_KAFKA_SSL_CA_LOCATION": "/ca.pem"},
    )
    props = admin_properties(config, 3)
    assert (props["security.protocol"], props["ssl.truststore.type"], props["ssl.truststore.location"]) == (
        "SSL",
        "PEM",
        "/ca.pem",
    )
    assert "ssl.ca.location" not in props


def test_java_properties_escaping_round_trips():
    body = _java_properties({"a.b": "x=y:z # not a comment", "k": " lead\\back\nline", "u": "é"})
    assert body.splitlines() == [
        "a.b=x\\=y\\:z \\# not a comment",
        "k=\\ lead\\\\back\\nline",
        "u=\\u00e9",
    ]


# -- local state ------------------------------------------------------------------------------------


@pytest.fixture(params=KINDS)
def kind(request):
    return request.param


def make_store(root, app, topic, partition, name, writes, checkpoint=True, kind="rocksdb") -> PartitionStore:
    store = backend(kind)(root / app / f"{topic}-{partition}", name, transactional=True)
    store.open(1)
    for key, value in writes.items():
        store.put(key, value)
    store.commit(len(writes))
    if not checkpoint:
        store.delete_checkpoint()
    return store


def test_state_scan_reads_keys_checkpoint_local_offset_and_lock(tmp_path, kind):
    held = make_store(tmp_path, "app", "in.put-x", 0, "counts", {b"a": b"1", b"b": b"2"}, kind=kind)
    make_store(tmp_path, "app", "in.put-x", 0, "sums", {b"a": b"1"}, kind=kind).close()
    make_store(tmp_path, "app", "in.put-x", 12, "counts", {b"c": b"3"}, checkpoint=False, kind=kind).close()
    (tmp_path / "app" / "not-a-partition").mkdir()
    try:
        found = {(s.topic, s.partition, s.store): s for s in _cli_state.scan(tmp_path, "app")}
        assert sorted(found) == [
            ("in.put-x", 0, "counts"),
            ("in.put-x", 0, "sums"),
            ("in.put-x", 12, "counts"),
        ]
        counts = found[("in.put-x", 0, "counts")]
        assert (counts.keys, counts.checkpoint, counts.local, counts.locked) == (2, 2, 2, True)
        sums = found[("in.put-x", 0, "sums")]
        assert (sums.keys, sums.checkpoint, sums.local, sums.locked) == (1, 1, 1, False)
        unclean = found[("in.put-x", 12, "counts")]
        assert (unclean.keys, unclean.checkpoint, unclean.local) == (1, None, 1)
        assert _cli_state.scan(tmp_path, "other-app") == []
    finally:
        held.close()


def test_state_wipe_refuses_a_locked_store_and_then_removes_checkpoint_and_database(tmp_path, kind):
    held = make_store(tmp_path, "app", "t", 3, "counts", {b"a": b"1"}, kind=kind)
    make_store(tmp_path, "app", "t", 3, "sums", {b"a": b"1"}, kind=kind).close()
    directory = tmp_path / "app" / "t-3"
    with pytest.raises(CliError, match="store 'counts' of t/3 is locked by a running process") as refused:
        _cli_state.wipe(tmp_path, "app", "t", 3, None)
    assert refused.value.code == EXIT_REFUSED
    assert (directory / "sums.checkpoint").exists()  # refused means nothing wiped, not even the free store
    assert _cli_state.wipe(tmp_path, "app", "t", 3, "sums") == ["sums"]
    assert not (directory / "sums.checkpoint").exists() and not (directory / f"sums.{kind}").exists()
    assert (directory / "counts.checkpoint").exists()
    held.close()
    assert _cli_state.wipe(tmp_path, "app", "t", 3, None) == ["counts", "sums"]
    assert sorted(p.name for p in directory.iterdir()) == ["counts.lock", "sums.lock"]
    # the store, reopened as a task would, has no checkpoint: it is unclean and will be restored
    again = backend(kind)(directory, "counts", transactional=True)
    again.open(1)
    try:
        assert again.read_checkpoint() is None and list(again.items()) == []
    finally:
        again.close()


def test_state_wipe_names_what_is_missing(tmp_path):
    make_store(tmp_path, "app", "t", 0, "counts", {b"a": b"1"}).close()
    with pytest.raises(CliError, match="unknown app 'nobody'") as unknown:
        _cli_state.wipe(tmp_path, "nobody", "t", 0, None)
    assert unknown.value.code == 3
    with pytest.raises(CliError, match="no state for t/1 of app 'app'"):
        _cli_state.wipe(tmp_path, "app", "t", 1, None)
    with pytest.raises(CliError, match=r"no store 'sums' for t/0 .* \(stores: counts\)"):
        _cli_state.wipe(tmp_path, "app", "t", 0, "sums")


def test_state_wipe_through_main(tmp_path, capsys):
    make_store(tmp_path, "app", "t", 0, "counts", {b"a": b"1"}).close()
    argv = ["state", "wipe", "--app", "app", "--topic", "t", "--partition", "0", "--state-dir", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out == (
        "wiped store 'counts' of t/0: checkpoint and local database deleted;"
        " the next run restores it from app-t-counts-changelog\n"
    )
