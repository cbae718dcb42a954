"""eos.Config: validation, the three constructors, secrets, immutability, pickling, transactional ids."""

from __future__ import annotations

import importlib.util
import pickle

import attrs
import pytest

import eos
from eos.config import redact

BASE = {"bootstrap_servers": "127.0.0.1:9092", "app_id": "orders-enricher", "output_topic": "orders-out"}


def make(**overrides) -> eos.Config:
    return eos.Config(**{**BASE, **overrides})


# -- valid construction --------------------------------------------------------------------------------


def test_valid_config_keeps_values_and_defaults():
    config = make(processing_guarantee="exactly_once", commit_every=5, producer={"linger.ms": 7})
    assert config.bootstrap_servers == "127.0.0.1:9092"
    assert config.app_id == "orders-enricher"
    assert config.output_topic == "orders-out"
    assert config.processing_guarantee == eos.EXACTLY_ONCE
    assert config.exactly_once is True
    assert config.commit_every == 5
    assert config.producer["linger.ms"] == 7


def test_default_guarantee_is_exactly_once_and_at_least_once_is_chosen():
    config = make()
    assert config.processing_guarantee == eos.EXACTLY_ONCE
    assert config.exactly_once is True
    assert eos.Config.from_env({}, **BASE).exactly_once
    assert eos.Config.from_properties(
        {"bootstrap.servers": "b:1", "app.id": "a", "output.topic": "o"}
    ).exactly_once
    assert make(processing_guarantee="at_least_once").exactly_once is False


@pytest.mark.parametrize("value", ["exactly_once_v2", "EXACTLY_ONCE", " exactly_once "])
def test_guarantee_aliases_normalise_to_exactly_once(value):
    assert make(processing_guarantee=value).processing_guarantee == "exactly_once"


@pytest.mark.parametrize(
    "overrides",
    [
        {"bootstrap_servers": "a:1,b:2, c.example.com:9093"},
        {"app_id": "A.b_c-9"},
        {"app_id": "x" * 200},
        {"output_topic": None, "output_topic_column": "dest"},
        {"output_partition_column": "out_partition"},
        {"starting_offsets": "latest"},
        {"max_redo": 0},
        {"kafka": {"security.protocol": "SASL_SSL"}, "consumer": {"fetch.min.bytes": 1}},
        {"state_store": "rocksdb"},
    ],
)
def test_other_valid_settings_are_accepted(overrides):
    config = make(**overrides)
    for name, value in overrides.items():
        assert getattr(config, name) == value


# -- invalid construction ------------------------------------------------------------------------------

INVALID = [
    ("processing_guarantee", {"processing_guarantee": "exactly-twice"}),
    ("processing_guarantee", {"processing_guarantee": ""}),
    ("bootstrap_servers", {"bootstrap_servers": ""}),
    ("bootstrap_servers", {"bootstrap_servers": " , "}),
    ("bootstrap_servers", {"bootstrap_servers": "localhost"}),
    ("bootstrap_servers", {"bootstrap_servers": "localhost:abc"}),
    ("bootstrap_servers", {"bootstrap_servers": ":9092"}),
    ("bootstrap_servers", {"bootstrap_servers": "a:1,b"}),
    ("app_id", {"app_id": ""}),
    ("app_id", {"app_id": "orders enricher"}),
    ("app_id", {"app_id": "orders:enricher"}),
    ("app_id", {"app_id": "orders/enricher"}),
    ("app_id", {"app_id": "x" * 201}),
    ("output_topic", {"output_topic": None}),
    ("output_topic", {"output_topic": "bad topic"}),
    ("output_topic", {"output_topic": "t" * 250}),
    ("output_topic_column", {"output_topic": None, "output_topic_column": "topic"}),
    ("output_partition_column", {"output_partition_column": "partition"}),
    ("output_partition_column", {"output_partition_column": "offset"}),
    ("commit_interval_ms", {"commit_interval_ms": 60_000, "transaction_timeout_ms": 60_000}),
    ("commit_interval_ms", {"commit_interval_ms": 90_000}),
    ("commit_every", {"commit_every": 0}),
    ("commit_every", {"commit_every": -5}),
    ("commit_every", {"commit_every": True}),
    ("commit_every", {"commit_every": "10"}),
    ("transaction_timeout_ms", {"transaction_timeout_ms": 0}),
    ("operation_timeout_ms", {"operation_timeout_ms": -1}),
    ("starting_offsets", {"starting_offsets": "beginning"}),
    ("producer.transactional.id", {"producer": {"transactional.id": "mine"}}),
    ("producer.enable.idempotence", {"producer": {"enable.idempotence": False}}),
    ("producer.transaction.timeout.ms", {"producer": {"transaction.timeout.ms": 1000}}),
    ("consumer.group.id", {"consumer": {"group.id": "other"}}),
    ("consumer.isolation.level", {"consumer": {"isolation.level": "read_uncommitted"}}),
    ("consumer.enable.auto.commit", {"consumer": {"enable.auto.commit": True}}),
    ("admin.bootstrap.servers", {"admin": {"bootstrap.servers": "x:1"}}),
    ("kafka.group.id", {"kafka": {"group.id": "other"}}),
    ("kafka.transactional.id", {"kafka": {"transactional.id": "mine"}}),
    ("state_store", {"state_store": "lmdb"}),
]


@pytest.mark.parametrize(
    ("field", "overrides"), INVALID, ids=[f"{f}-{i}" for i, (f, _) in enumerate(INVALID)]
)
def test_invalid_setting_raises_config_error_naming_the_field(field, overrides):
    with pytest.raises(eos.ConfigError) as info:
        make(**overrides)
    assert info.value.field == field
    assert repr(field) in str(info.value)


def test_rocksdb_without_rocksdict_names_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "rocksdict" else real(name, *a)
    )
    with pytest.raises(eos.ConfigError, match=r"pip install 'eos-spark\[rocksdb\]'") as info:
        make(state_store="rocksdb")
    assert info.value.field == "state_store"
    assert make().state_store == "sqlite"  # the default needs nothing more


def test_negative_max_redo_raises_config_error():
    with pytest.raises(eos.ConfigError) as info:
        make(max_redo=-1)
    assert info.value.field == "max_redo"


def test_config_error_is_a_value_error():
    with pytest.raises(ValueError):
        make(app_id="")


# -- from_env --------------------------------------------------------------------------------------


ENV = {"EOS_BOOTSTRAP_SERVERS": "broker:9092", "EOS_APP_ID": "env-app", "EOS_OUTPUT_TOPIC": "env-out"}


def test_from_env_reads_every_scalar_and_parses_ints():
    config = eos.Config.from_env(
        {
            **ENV,
            "EOS_PROCESSING_GUARANTEE": "exactly_once_v2",
            "EOS_COMMIT_EVERY": " 25 ",
            "EOS_TRANSACTION_TIMEOUT_MS": "90000",
            "EOS_MAX_REDO": "0",
            "EOS_STARTING_OFFSETS": "latest",
            "UNRELATED": "x",
        }
    )
    assert (config.bootstrap_servers, config.app_id, config.output_topic) == (
        "broker:9092",
        "env-app",
        "env-out",
    )
    assert config.processing_guarantee == "exactly_once"
    assert config.commit_every == 25
    assert config.transaction_timeout_ms == 90_000
    assert config.max_redo == 0
    assert config.starting_offsets == "latest"


@pytest.mark.parametrize(
    ("var", "field"), [("EOS_COMMIT_EVERY", "commit_every"), ("EOS_MAX_REDO", "max_redo")]
)
def test_from_env_int_parse_error_names_the_variable(var, field):
    with pytest.raises(eos.ConfigError) as info:
        eos.Config.from_env({**ENV, var: "ten"})
    assert info.value.field == field
    assert var in str(info.value)
    assert "'ten'" in str(info.value)


def test_from_env_client_groups():
    config = eos.Config.from_env(
        {
            **ENV,
            "EOS_KAFKA_SASL_PASSWORD": "hunter2",
            "EOS_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "EOS_PRODUCER_LINGER_MS": "20",
            "EOS_CONSUMER_FETCH_MAX_BYTES": "1024",
            "EOS_ADMIN_REQUEST_TIMEOUT_MS": "500",
        }
    )
    assert dict(config.kafka) == {"sasl.password": "hunter2", "security.protocol": "SASL_SSL"}
    assert dict(config.producer) == {"linger.ms": "20"}
    assert dict(config.consumer) == {"fetch.max.bytes": "1024"}
    assert dict(config.admin) == {"request.timeout.ms": "500"}


def test_from_env_overrides_keyword_defaults_and_merges_groups():
    config = eos.Config.from_env(
        {**ENV, "EOS_PROCESSING_GUARANTEE": "exactly_once", "EOS_PRODUCER_LINGER_MS": "20"},
        processing_guarantee="at_least_once",
        app_id="default-app",
        commit_every=7,
        producer={"linger.ms": 1, "batch.size": 10},
    )
    assert config.processing_guarantee == "exactly_once"
    assert config.app_id == "env-app"
    assert config.commit_every == 7  # not in the environment: the default holds
    assert dict(config.producer) == {"linger.ms": "20", "batch.size": 10}


def test_from_env_keyword_defaults_alone_are_enough():
    config = eos.Config.from_env({}, **BASE)
    assert config == make()


def test_from_env_reserved_passthrough_is_rejected():
    with pytest.raises(eos.ConfigError) as info:
        eos.Config.from_env({**ENV, "EOS_CONSUMER_GROUP_ID": "other"})
    assert info.value.field == "consumer.group.id"


@pytest.mark.parametrize(
    ("var", "hint"),
    [
        ("EOS_PROCESSING_GAURANTEE", "did you mean 'EOS_PROCESSING_GUARANTEE'?"),
        ("EOS_COMIT_EVERY", "did you mean 'EOS_COMMIT_EVERY'?"),
        ("EOS_LOGLEVEL", "did you mean 'EOS_LOG_LEVEL'?"),
        ("EOS_KAFKA_", "EOS_KAFKA_<NAME> for every client"),
        ("EOS_WHATEVER", "EOS_<SETTING>"),
    ],
)
def test_from_env_an_unknown_eos_variable_is_refused_naming_what_it_resembles(var, hint):
    # before: ignored without a word, and the query ran at the default guarantee
    with pytest.raises(eos.ConfigError) as info:
        eos.Config.from_env({**ENV, var: "exactly_once"})
    assert info.value.field == var and hint in info.value.reason


@pytest.mark.parametrize(
    ("var", "name"), [("EOS_KAFKA_SASL_PASWORD", "sasl.pasword"), ("EOS_PRODUCER_LINGER_MSX", "linger.msx")]
)
def test_from_env_a_client_setting_librdkafka_does_not_have_is_refused(var, name):
    with pytest.raises(eos.ConfigError) as info:
        eos.Config.from_env({**ENV, var: "x"})
    assert info.value.field == var and f"librdkafka has no {name!r}" in info.value.reason
    assert "x" not in info.value.reason.replace(name, "")  # the value (a secret, perhaps) is not shown


def test_from_env_leaves_eos_own_and_the_test_rigs_variables_alone():
    own = {var: "4.1.1" for var in eos.config.OWN_VARIABLES}
    config = eos.Config.from_env({**ENV, **own, "EOS_TEST_SEED": "7"})
    # EOS_KAFKA_TOOLS_VERSION (the CLI's Kafka tools) is not the client setting `tools.version`
    assert dict(config.kafka) == {}


# -- from_properties -------------------------------------------------------------------------------


def test_from_properties_dotted_keys():
    config = eos.Config.from_properties(
        {
            "bootstrap.servers": "broker:9092",
            "app.id": "props-app",
            "processing.guarantee": "exactly_once",
            "output.topic": "props-out",
            "commit.every": "100",
            "commit.interval.ms": 1000,
            "producer.linger.ms": "15",
            "consumer.fetch.min.bytes": "2",
            "admin.request.timeout.ms": "3",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
        }
    )
    assert config.bootstrap_servers == "broker:9092"
    assert config.app_id == "props-app"
    assert config.exactly_once
    assert config.output_topic == "props-out"
    assert config.commit_every == 100
    assert config.commit_interval_ms == 1000
    assert dict(config.producer) == {"linger.ms": "15"}
    assert dict(config.consumer) == {"fetch.min.bytes": "2"}
    assert dict(config.admin) == {"request.timeout.ms": "3"}
    assert dict(config.kafka) == {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}


def test_from_properties_application_id_alias_and_overrides():
    config = eos.Config.from_properties(
        {"bootstrap.servers": "b:1", "application.id": "streams-app", "output.topic": "o"},
        processing_guarantee="exactly_once_v2",
    )
    assert config.app_id == "streams-app"
    assert config.processing_guarantee == "exactly_once"


def test_from_properties_a_key_neither_eos_nor_a_clients_is_refused_naming_what_it_resembles():
    props = {"bootstrap.servers": "b:1", "app.id": "a", "output.topic": "o"}
    with pytest.raises(eos.ConfigError) as info:
        eos.Config.from_properties({**props, "processing.gaurantee": "exactly_once"})
    assert info.value.field == "processing.gaurantee"
    assert "did you mean 'processing.guarantee'?" in info.value.reason
    with pytest.raises(eos.ConfigError) as info:
        eos.Config.from_properties({**props, "consumer.isolation.levle": "read_committed"})
    assert info.value.field == "consumer.isolation.levle" and "'isolation.levle'" in info.value.reason
    # a client's setting that resembles an eos one stays the client's
    config = eos.Config.from_properties({**props, "auto.commit.interval.ms": "5"})
    assert dict(config.kafka) == {"auto.commit.interval.ms": "5"}


def test_from_properties_int_parse_error_names_the_key():
    with pytest.raises(eos.ConfigError) as info:
        eos.Config.from_properties(
            {"bootstrap.servers": "b:1", "app.id": "a", "output.topic": "o", "max.redo": "x"}
        )
    assert info.value.field == "max_redo"
    assert "max.redo" in str(info.value)


@pytest.mark.parametrize(
    ("field", "kwargs", "env", "props"),
    [
        (
            "processing_guarantee",
            {"processing_guarantee": "twice"},
            {"EOS_PROCESSING_GUARANTEE": "twice"},
            {"processing.guarantee": "twice"},
        ),
        ("app_id", {"app_id": "bad id"}, {"EOS_APP_ID": "bad id"}, {"app.id": "bad id"}),
        (
            "bootstrap_servers",
            {"bootstrap_servers": ""},
            {"EOS_BOOTSTRAP_SERVERS": ""},
            {"bootstrap.servers": ""},
        ),
        ("commit_every", {"commit_every": 0}, {"EOS_COMMIT_EVERY": "0"}, {"commit.every": "0"}),
        (
            "starting_offsets",
            {"starting_offsets": "now"},
            {"EOS_STARTING_OFFSETS": "now"},
            {"starting.offsets": "now"},
        ),
        (
            "producer.transactional.id",
            {"producer": {"transactional.id": "x"}},
            {"EOS_PRODUCER_TRANSACTIONAL_ID": "x"},
            {"producer.transactional.id": "x"},
        ),
    ],
)
def test_same_invalid_value_same_error_through_every_constructor(field, kwargs, env, props):
    errors = []
    with pytest.raises(eos.ConfigError) as info:
        make(**kwargs)
    errors.append(info.value)
    with pytest.raises(eos.ConfigError) as info:
        eos.Config.from_env({**ENV, **env})
    errors.append(info.value)
    base_props = {"bootstrap.servers": "b:1", "app.id": "a", "output.topic": "o"}
    with pytest.raises(eos.ConfigError) as info:
        eos.Config.from_properties({**base_props, **props})
    errors.append(info.value)
    assert [e.field for e in errors] == [field] * 3
    assert len({str(e) for e in errors}) == 1, [str(e) for e in errors]


# -- secrets ---------------------------------------------------------------------------------------

SECRETS = {
    "sasl.password": "s3cret-sasl",
    "ssl.key.password": "s3cret-keypw",
    "sasl.jaas.config": 'PlainLoginModule required username="u" password="s3cret-jaas";',
    "sasl.oauthbearer.client.secret": "s3cret-oauth",
    "ssl.keystore.password": "s3cret-keystore",
}


@pytest.mark.parametrize("group", ["kafka", "producer", "consumer", "admin"])
def test_secrets_never_in_repr_or_str(group):
    config = make(**{group: {**SECRETS, "security.protocol": "SASL_SSL", "sasl.username": "alice"}})
    for text in (repr(config), str(config)):
        for secret in SECRETS.values():
            assert secret not in text
        assert "SASL_SSL" in text
        assert "alice" in text
        assert "orders-enricher" in text
    # the values themselves are still there for the clients
    assert getattr(config, group)["sasl.password"] == "s3cret-sasl"


def test_ssl_private_key_pem_never_in_repr():
    config = make(kafka={"ssl.key.pem": "PEM-PRIVATE-KEY-DATA", "ssl.keystore.key": "JAVA-PEM-PRIVATE-KEY"})
    assert "PEM-PRIVATE-KEY-DATA" not in repr(config)
    assert "JAVA-PEM-PRIVATE-KEY" not in repr(config)


def test_secrets_from_env_are_hidden():
    config = eos.Config.from_env({**ENV, "EOS_KAFKA_SASL_PASSWORD": "hunter2"})
    assert config.kafka["sasl.password"] == "hunter2"
    assert "hunter2" not in repr(config)


def test_redact_keeps_non_secrets():
    assert redact({"sasl.password": "p", "linger.ms": 5}) == {"sasl.password": "***", "linger.ms": 5}


# -- immutability, pickling, transactional ids -----------------------------------------------------


def test_config_is_frozen():
    config = make(producer={"linger.ms": 5})
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        config.app_id = "other"
    with pytest.raises(TypeError):
        config.producer["linger.ms"] = 10


def test_settings_are_copied_at_construction():
    settings = {"linger.ms": 5}
    config = make(producer=settings)
    settings["linger.ms"] = 99
    assert config.producer["linger.ms"] == 5


def test_pickle_round_trip():
    config = make(
        processing_guarantee="exactly_once",
        commit_every=3,
        kafka={"sasl.password": "pw", "security.protocol": "SASL_PLAINTEXT"},
        producer={"linger.ms": 1},
        consumer={"fetch.min.bytes": 1},
        admin={"request.timeout.ms": 1},
    )
    copy = pickle.loads(pickle.dumps(config))
    assert copy == config
    assert copy is not config
    assert copy.kafka["sasl.password"] == "pw"
    assert copy.exactly_once


def test_transactional_id_is_a_pure_function_of_app_topic_partition():
    a = make(processing_guarantee="exactly_once")
    b = make(bootstrap_servers="elsewhere:1", commit_every=1, output_topic="other-out")
    assert a.transactional_id("in", 3) == b.transactional_id("in", 3) == a.transactional_id("in", 3)
    assert pickle.loads(pickle.dumps(a)).transactional_id("in", 3) == a.transactional_id("in", 3)
    ids = {
        a.transactional_id("in", 3),
        a.transactional_id("in", 4),
        a.transactional_id("in2", 3),
        make(app_id="other-app").transactional_id("in", 3),
        # would collide under a naive concatenation without a separator
        a.transactional_id("in", 13),
        a.transactional_id("in1", 3),
    }
    assert len(ids) == 6
    assert "orders-enricher" in a.transactional_id("in", 3)


# -- on_error ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"on_error": "skip"}, "on_error"),
        ({"on_error": "dead_letter"}, "dead_letter_topic"),
        ({"on_error": "dead_letter", "dead_letter_topic": "bad name!"}, "dead_letter_topic"),
        ({"on_error": "dead_letter", "dead_letter_topic": "out"}, "dead_letter_topic"),
        ({"on_error": "dead_letter", "dead_letter_topic": "dlq", "input_mode": "any"}, "on_error"),
        (
            {"on_error": "dead_letter", "dead_letter_topic": "dlq", "max_dead_letters_per_batch": 0},
            "max_dead_letters_per_batch",
        ),
    ],
    ids=["unknown", "no-topic", "illegal-topic", "the-output-topic", "input-mode-any", "bound-zero"],
)
def test_on_error_settings_are_checked_naming_the_field(overrides, field):
    with pytest.raises(eos.ConfigError) as info:
        eos.Config(bootstrap_servers="b:1", app_id="a", output_topic="out", **overrides)
    assert info.value.field == field


def test_dead_letters_are_set_the_same_through_every_constructor():
    expected = eos.Config(
        bootstrap_servers="b:1",
        app_id="a",
        output_topic="out",
        on_error="dead_letter",
        dead_letter_topic="a-dlq",
        max_dead_letters_per_batch=7,
    )
    env = {
        "EOS_BOOTSTRAP_SERVERS": "b:1",
        "EOS_APP_ID": "a",
        "EOS_OUTPUT_TOPIC": "out",
        "EOS_ON_ERROR": "dead_letter",
        "EOS_DEAD_LETTER_TOPIC": "a-dlq",
        "EOS_MAX_DEAD_LETTERS_PER_BATCH": "7",
    }
    base = {"bootstrap.servers": "b:1", "app.id": "a", "output.topic": "out", "on.error": "dead_letter"}
    assert eos.Config.from_env(env) == expected
    assert (
        eos.Config.from_properties({**base, "dead.letter.topic": "a-dlq", "max.dead.letters.per.batch": "7"})
        == expected
    )
    # Kafka Streams' name for the topic (KIP-1034)
    assert (
        eos.Config.from_properties(
            {**base, "errors.dead.letter.queue.topic.name": "a-dlq", "max.dead.letters.per.batch": "7"}
        )
        == expected
    )
