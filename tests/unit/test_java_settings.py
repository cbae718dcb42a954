"""The Java client's settings as Spark queries carry them (`kafka.*`), translated to librdkafka's: one
case per row of `eos._kafka._java.SETTINGS`, each also built into a real librdkafka client (which
refuses a name or value it does not know), and the JKS commands run with the JDK's own keytool."""

from __future__ import annotations

import shutil
import ssl
import subprocess

import pytest
from confluent_kafka import Consumer, Producer

import eos
from eos._kafka import _java
from eos._kafka._java import SETTINGS, from_java

#: a value each Java setting takes, as a Spark query would write it
JAVA_VALUES = {
    "acks": "all",
    "batch.size": "65536",
    "buffer.memory": "33554433",
    "compression.type": "zstd",
    "delivery.timeout.ms": "45000",
    "enable.idempotence": "true",
    "linger.ms": "20",
    "max.in.flight.requests.per.connection": "5",
    "max.request.size": "2097152",
    "retries": "2147483647",
    "max.block.ms": "60000",
    "partitioner.class": "org.apache.kafka.clients.producer.RoundRobinPartitioner",
    "partitioner.ignore.keys": "false",
    "partitioner.adaptive.partitioning.enable": "true",
    "partitioner.availability.timeout.ms": "0",
    "key.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
    "value.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
    "interceptor.classes": "com.example.Audit",
    "transaction.timeout.ms": "60000",
    "fetch.min.bytes": "1",
    "fetch.max.bytes": "52428800",
    "fetch.max.wait.ms": "500",
    "max.partition.fetch.bytes": "1048576",
    "session.timeout.ms": "45000",
    "heartbeat.interval.ms": "3000",
    "max.poll.interval.ms": "300000",
    "max.poll.records": "500",
    "check.crcs": "true",
    "client.rack": "rack-1",
    "key.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
    "value.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
    "default.api.timeout.ms": "60000",
    "client.id": "orders",
    "request.timeout.ms": "30000",
    "retry.backoff.ms": "100",
    "retry.backoff.max.ms": "1000",
    "reconnect.backoff.ms": "50",
    "reconnect.backoff.max.ms": "1000",
    "metadata.max.age.ms": "300000",
    "connections.max.idle.ms": "540000",
    "socket.connection.setup.timeout.ms": "10000",
    "socket.connection.setup.timeout.max.ms": "30000",
    "receive.buffer.bytes": "65536",
    "send.buffer.bytes": "131072",
    "client.dns.lookup": "use_all_dns_ips",
    "metric.reporters": "",
    "metrics.num.samples": "2",
    "metrics.recording.level": "INFO",
    "metrics.sample.window.ms": "30000",
    "auto.include.jmx.reporter": "true",
    "enable.metrics.push": "false",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.jaas.config": (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";'
    ),
    "sasl.kerberos.service.name": "kafka",
    "sasl.oauthbearer.token.endpoint.url": "https://idp.example.com/oauth2/token",
    "sasl.login.connect.timeout.ms": "10000",
    "sasl.login.read.timeout.ms": "10000",
    "sasl.login.retry.backoff.ms": "100",
    "sasl.login.retry.backoff.max.ms": "10000",
    "sasl.login.refresh.buffer.seconds": "300",
    "sasl.login.refresh.min.period.seconds": "60",
    "sasl.login.refresh.window.factor": "0.8",
    "sasl.login.refresh.window.jitter": "0.05",
    "sasl.login.class": "com.example.Login",
    "sasl.login.callback.handler.class": "com.example.Handler",
    "sasl.client.callback.handler.class": "com.example.Handler",
    "ssl.endpoint.identification.algorithm": "",
    "ssl.key.password": "secret",
    "ssl.cipher.suites": "ECDHE-RSA-AES256-GCM-SHA384",
    "ssl.truststore.location": "/etc/kafka/ca.pem",
    "ssl.truststore.type": "PEM",
    "ssl.truststore.password": "secret",
    "ssl.keystore.location": "/etc/kafka/client.p12",
    "ssl.keystore.password": "secret",
    "ssl.keystore.type": "PKCS12",
    "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----",
    "ssl.keystore.certificate.chain": "-----BEGIN CERTIFICATE-----",
    "ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----",
    "ssl.protocol": "TLSv1.3",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.keymanager.algorithm": "SunX509",
    "ssl.trustmanager.algorithm": "PKIX",
    "ssl.secure.random.implementation": "SHA1PRNG",
    "ssl.engine.factory.class": "com.example.Engine",
    "security.providers": "com.example.Provider",
}

#: what librdkafka gets for the rows that are not the same name and value
EXPECTED = {
    "buffer.memory": {"queue.buffering.max.kbytes": "32769"},
    "max.request.size": {"message.max.bytes": "2097152"},
    "fetch.max.wait.ms": {"fetch.wait.max.ms": "500"},
    "receive.buffer.bytes": {"socket.receive.buffer.bytes": "65536"},
    "send.buffer.bytes": {"socket.send.buffer.bytes": "131072"},
    "sasl.jaas.config": {"sasl.username": "u", "sasl.password": "p"},
    "ssl.endpoint.identification.algorithm": {"ssl.endpoint.identification.algorithm": "none"},
    "ssl.truststore.location": {"ssl.ca.location": "/etc/kafka/ca.pem"},
    "ssl.keystore.key": {"ssl.key.pem": "-----BEGIN PRIVATE KEY-----"},
    "ssl.keystore.certificate.chain": {"ssl.certificate.pem": "-----BEGIN CERTIFICATE-----"},
    "ssl.truststore.certificates": {"ssl.ca.pem": "-----BEGIN CERTIFICATE-----"},
}

#: settings librdkafka checks only where their files or other settings exist: translated, not built
_NOT_BUILT = {
    "ssl.truststore.location",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.truststore.certificates",
    "security.protocol",
    "sasl.mechanism",
    "sasl.jaas.config",
    "sasl.kerberos.service.name",
    "ssl.cipher.suites",
    "ssl.endpoint.identification.algorithm",
    "sasl.oauthbearer.token.endpoint.url",
}


def test_every_row_has_a_case():
    assert set(JAVA_VALUES) == set(SETTINGS)


@pytest.mark.parametrize("key", sorted(SETTINGS))
def test_each_java_setting(key):
    rule, value = SETTINGS[key], JAVA_VALUES[key]
    props = {key: value}
    if key == "ssl.truststore.location":
        props["ssl.truststore.type"] = "PEM"
    if key == "ssl.keystore.location":
        props["ssl.keystore.type"] = "PKCS12"
    if rule.kind == "refused" or key == "sasl.login.callback.handler.class":  # a class not OIDC's: refused
        with pytest.raises(eos.ConfigError) as info:
            from_java(props)
        assert info.value.field == key and rule.note in str(info.value)
        assert value not in str(info.value) or value in rule.note
        return
    got = from_java(props)
    if rule.kind == "ignored":
        assert got == {}
    else:
        assert got == EXPECTED.get(key, {key: value})
    if key not in _NOT_BUILT and got:
        # librdkafka takes the name and the value (a producer or a consumer setting; unknown ones raise)
        base = {"bootstrap.servers": "127.0.0.1:1"}
        try:
            Producer({**base, **got}).flush(0)
        except Exception:  # noqa: BLE001 - a consumer-only setting: a consumer must take it
            Consumer({**base, "group.id": "g", **got}).close()


def test_a_bad_byte_count_names_the_setting():
    with pytest.raises(eos.ConfigError, match="buffer.memory must be a number of bytes"):
        from_java({"buffer.memory": "32MB"})


def test_a_delivery_timeout_beyond_the_transactions_is_capped_not_refused_by_librdkafka():
    from eos._kafka._clients import producer_settings

    config = eos.Config(
        bootstrap_servers="127.0.0.1:1",
        app_id="a",
        output_topic="o",
        processing_guarantee="exactly_once",
        kafka=from_java({"delivery.timeout.ms": "120000", "linger.ms": "50"}),
    )
    settings = producer_settings(config, "a:t:0")
    assert settings["message.timeout.ms"] == 60_000 and "delivery.timeout.ms" not in settings
    assert settings["linger.ms"] == "50"  # the user's setting wins over eos's default
    Producer({k: v for k, v in settings.items() if k != "transactional.id"}).flush(0)
    shorter = eos.Config(**{**_fields(config), "kafka": {"delivery.timeout.ms": "10000"}})
    assert producer_settings(shorter, "a:t:0")["message.timeout.ms"] == 10_000


def test_the_jvm_producers_wait_20_ms_after_a_coordinator_lookup_unless_the_user_says_otherwise():
    """The JVM data path's producers: eos's defaults (docs/design.md, "The Java producer's wait after a
    coordinator lookup"), each one the user's `kafka` or `producer` setting replaces."""
    from eos._spark._jvm_writer import _producer

    config = eos.Config(bootstrap_servers="127.0.0.1:1", app_id="a", output_topic="o")
    settings = _producer(config, None)
    assert (settings["retry.backoff.ms"], settings["linger.ms"]) == ("20", "5")
    mine = eos.Config(**{**_fields(config), "kafka": {"retry.backoff.ms": 50}, "producer": {"linger.ms": 1}})
    theirs = _producer(mine, None)
    assert (theirs["retry.backoff.ms"], theirs["linger.ms"]) == ("50", "1")


def _fields(config):
    import attrs

    return {f.name: getattr(config, f.name) for f in attrs.fields(type(config))}


# -- JKS stores: refused with the command that converts them, run here with the JDK's keytool --------


def _keytool() -> str:
    found = shutil.which("keytool")  # the JDK's, as Spark needs one (make setup checks for java)
    assert found, "no keytool on PATH"
    return found


@pytest.mark.parametrize("store", ["truststore", "keystore"])
def test_a_jks_store_is_refused_with_the_command_that_converts_it(store, tmp_path):
    with pytest.raises(eos.ConfigError) as info:
        from_java({f"ssl.{store}.location": "/etc/kafka/client.jks", f"ssl.{store}.password": "secret"})
    message = str(info.value)
    assert info.value.field == f"ssl.{store}.location" and "keytool" in message and "secret" not in message


def test_the_truststore_command_makes_a_pem_file_openssl_reads(tmp_path):
    keytool = _keytool()
    jks = tmp_path / "client.jks"
    subprocess.run(
        [keytool, "-genkeypair", "-alias", "ca", "-keyalg", "RSA", "-dname", "CN=test-ca",
         "-keystore", str(jks), "-storetype", "JKS", "-storepass", "changeit", "-keypass", "changeit",
         "-validity", "2"],
        check=True, capture_output=True,
    )  # fmt: skip
    with pytest.raises(eos.ConfigError) as info:
        from_java({"ssl.truststore.location": str(jks)})
    command = str(info.value).split("`")[1].replace("keytool ", f"{keytool} ", 1)
    command = command.replace("-storetype JKS", "-storetype JKS -storepass changeit")  # keytool would ask
    subprocess.run(command, shell=True, check=True, cwd=tmp_path, capture_output=True)
    pem = (tmp_path / "truststore.pem").read_text()
    assert pem.startswith("-----BEGIN CERTIFICATE-----") and pem.rstrip().endswith(
        "-----END CERTIFICATE-----"
    )
    ssl.create_default_context().load_verify_locations(cafile=str(tmp_path / "truststore.pem"))
    assert from_java({"ssl.truststore.location": "truststore.pem", "ssl.truststore.type": "PEM"}) == {
        "ssl.ca.location": "truststore.pem"
    }
    assert _java.SETTINGS["ssl.truststore.location"].target == "ssl.ca.location"


@pytest.mark.parametrize(
    "handler",
    [
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
        "kafkashaded.org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    ],
)
def test_the_java_oidc_login_becomes_librdkafkas_oidc_method(handler):
    """A Spark query's OAuth client credentials login (Confluent Cloud, Event Hubs, Keycloak), as
    librdkafka's `sasl.oauthbearer.method=oidc`; the secret is a value, never in an error."""
    props = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.login.callback.handler.class": handler,
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example.com/token",
        "sasl.jaas.config": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
            ' clientId="orders" clientSecret="s\\"3" scope="kafka" extension_logicalCluster="lkc-1";'
        ),
    }
    settings = from_java(props)
    assert settings == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example.com/token",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "orders",
        "sasl.oauthbearer.client.secret": 's"3',
        "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.extensions": "logicalCluster=lkc-1",
    }
    Producer({"bootstrap.servers": "127.0.0.1:1", **settings}).flush(0)  # librdkafka takes them


def test_oidc_settings_become_the_java_login_for_sparks_source_and_back():
    from eos._kafka._java import spark_source_options

    kafka = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "orders",
        "sasl.oauthbearer.client.secret": 'se"cret',
        "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example.com/token",
        "sasl.oauthbearer.extensions": "logicalCluster=lkc-1,identityPoolId=pool-2",
    }
    config = eos.Config(bootstrap_servers="b:9092", app_id="a", output_topic="o", kafka=kafka)
    options = spark_source_options(config)
    assert options["kafka.sasl.login.callback.handler.class"] == _java.OIDC_HANDLER
    assert options["kafka.sasl.jaas.config"] == (
        f'{_java.OAUTH_MODULE} required clientId="orders" clientSecret="se\\"cret" scope="kafka"'
        ' extension_logicalCluster="lkc-1" extension_identityPoolId="pool-2";'
    )
    assert not [k for k in options if k.startswith("kafka.sasl.oauthbearer.") and "token.endpoint" not in k]
    back = from_java({k.removeprefix("kafka."): v for k, v in options.items()})
    assert back == {"bootstrap.servers": "b:9092", **kafka}


def test_an_oauth_login_without_client_credentials_is_refused_without_its_value():
    with pytest.raises(eos.ConfigError, match="needs clientId") as info:
        from_java(
            {
                "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
                ' required unsecuredLoginStringClaim_sub="hidden-sub";'
            }
        )
    assert "hidden-sub" not in str(info.value)


def test_a_kerberos_keytab_login_both_ways():
    """Translated only: the confluent-kafka wheel's librdkafka has no GSSAPI, so no KDC test runs it."""
    from eos._kafka._java import spark_source_options

    jaas = (
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true"
        ' keyTab="/etc/security/eos.keytab" principal="eos/host@EXAMPLE.COM";'
    )
    settings = from_java(
        {"sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka", "sasl.jaas.config": jaas}
    )
    assert settings == {
        "sasl.mechanism": "GSSAPI",
        "sasl.kerberos.service.name": "kafka",
        "sasl.kerberos.keytab": "/etc/security/eos.keytab",
        "sasl.kerberos.principal": "eos/host@EXAMPLE.COM",
    }
    config = eos.Config(bootstrap_servers="b:9092", app_id="a", output_topic="o", kafka=settings)
    options = spark_source_options(config)
    assert options["kafka.sasl.jaas.config"] == jaas
    assert (
        "kafka.sasl.kerberos.keytab" not in options and options["kafka.sasl.kerberos.service.name"] == "kafka"
    )


@pytest.mark.parametrize("key", _java._JVM_PRODUCER)
def test_a_producer_setting_goes_back_to_its_java_name_for_the_jvm_data_path(key):
    """`Config.producer` holds librdkafka's names; the JVM data path's producers get the Java setting
    each came from (`from_java` and back)."""
    value = "33554432" if key == "buffer.memory" else JAVA_VALUES[key]  # a whole number of KiB
    assert _java.java_producer(from_java({key: value})) == {key: value}


def test_librdkafkas_aliases_reach_the_java_names():
    aliases = {
        "request.required.acks": "all",
        "compression.codec": "lz4",
        "queue.buffering.max.ms": "20",
        "message.timeout.ms": "30000",
        "enable.idempotence": True,
    }
    assert _java.java_producer(aliases) == {
        "acks": "all",
        "compression.type": "lz4",
        "linger.ms": "20",
        "delivery.timeout.ms": "30000",
        "enable.idempotence": "true",
    }


@pytest.mark.parametrize(
    "settings,field",
    [
        ({"linger.ms": "5", "batch.num.messages": "1000"}, "producer.batch.num.messages"),
        ({"partitioner": "murmur2_random"}, "producer.partitioner"),
        ({"queue.buffering.max.kbytes": "lots"}, "producer.queue.buffering.max.kbytes"),
    ],
)
def test_a_producer_setting_without_a_java_match_is_named(settings, field):
    with pytest.raises(eos.ConfigError) as caught:
        _java.java_producer(settings)
    assert caught.value.field == field


def test_every_clients_settings_give_the_jvm_producers_only_what_a_producer_takes():
    """`Config.kafka` (every client's settings): the producer's among them turned to the Java names,
    the rest (security, a consumer's) left to reach the Java clients as they are."""
    shared = {"message.max.bytes": "4096", "security.protocol": "SSL", "fetch.min.bytes": "1"}
    assert _java.java_producer(shared, shared=True) == {"max.request.size": "4096"}
    with pytest.raises(eos.ConfigError) as caught:
        _java.java_producer({"queue.buffering.max.kbytes": "lots"}, shared=True)
    assert caught.value.field == "kafka.queue.buffering.max.kbytes"
