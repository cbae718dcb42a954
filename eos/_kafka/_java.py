"""The Java Kafka client's settings — what Spark's Kafka source and sink and Kafka's own tools take —
and librdkafka's, which eos's clients take, both ways.

`from_java` turns Java client properties (`format("eos")`'s `kafka.*` options, the CLI's
`--command-config` file) into librdkafka settings, one rule per Java setting (`SETTINGS`: the same
name, renamed, converted, ignored as Java-only, or refused with what to write instead);
docs/reference/java-settings.md is generated from that table. `spark_source_options` goes the other
way, for the Spark Kafka source `eos.read_stream` builds from `Config.kafka`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from eos.config import Config
from eos.errors import ConfigError


@attrs.frozen
class Rule:
    """What `from_java` does with one Java setting."""

    #: "same" (librdkafka has it under this name, meaning the same), "renamed", "converted" (a value in
    #: other units), "ignored" (Java-only: librdkafka has no use for it), "refused" (the meaning
    #: differs, or it names a Java class: `note` says what to write instead)
    kind: str
    #: librdkafka's name (same, renamed, converted)
    target: str | None = None
    note: str = ""
    convert: Callable[[str], str] | None = None


def _same(note: str = "") -> Rule:
    return Rule("same", note=note)


def _kib(value: str) -> str:
    return str(max(1, math.ceil(int(value) / 1024)))


def _identification(value: str) -> str:
    return value.strip() or "none"


_JAVA_CLASS = "a Java class, which eos's clients (librdkafka, in Python) cannot load"
_NEGOTIATED = "librdkafka negotiates the newest TLS version OpenSSL offers"

#: Java client setting -> what eos does with it. Settings not listed pass to librdkafka as they are
#: (librdkafka's own names, and the many both clients share: see docs/reference/java-settings.md).
SETTINGS: dict[str, Rule] = {
    # -- producer
    "acks": _same(),
    "batch.size": _same("bytes per partition batch; librdkafka's default is 1,000,000, Java's 16,384"),
    "buffer.memory": Rule(
        "converted", "queue.buffering.max.kbytes", "bytes to KiB, rounded up", convert=_kib
    ),
    "compression.type": _same(),
    "delivery.timeout.ms": _same(
        "with exactly_once at most eos.transaction.timeout.ms; librdkafka's message.timeout.ms"
    ),
    "enable.idempotence": _same("eos's producers are idempotent whatever it says"),
    "linger.ms": _same(),
    "max.in.flight.requests.per.connection": _same(),
    "max.request.size": Rule("renamed", "message.max.bytes", "the largest request, and so record, sent"),
    "retries": _same(),
    "max.block.ms": Rule(
        "ignored", note="Java's send() blocking; eos bounds its own waits with eos.operation.timeout.ms"
    ),
    "partitioner.class": Rule(
        "refused",
        note=f"{_JAVA_CLASS}: eos places keys with murmur2, as Java's default partitioner does; to choose"
        " each record's partition, set eos.output.partition.column",
    ),
    "partitioner.ignore.keys": Rule("ignored", note="Java's partitioner; eos places keys with murmur2"),
    "partitioner.adaptive.partitioning.enable": Rule("ignored", note="Java's partitioner"),
    "partitioner.availability.timeout.ms": Rule("ignored", note="Java's partitioner"),
    "key.serializer": Rule(
        "refused",
        note="eos writes the key column's bytes or string, as Spark's Kafka sink does; for Schema Registry"
        " framing set eos.key.serializer",
    ),
    "value.serializer": Rule(
        "refused",
        note="eos writes the value column's bytes or string, as Spark's Kafka sink does; for Schema"
        " Registry framing set eos.value.serializer",
    ),
    "interceptor.classes": Rule(
        "refused", note=f"{_JAVA_CLASS}; eos.register(on_commit=...) sees each commit"
    ),
    "transaction.timeout.ms": Rule("refused", note="eos sets it: use eos.transaction.timeout.ms"),
    # -- consumer
    "fetch.min.bytes": _same(),
    "fetch.max.bytes": _same(),
    "fetch.max.wait.ms": Rule("renamed", "fetch.wait.max.ms"),
    "max.partition.fetch.bytes": _same(),
    "session.timeout.ms": _same(),
    "heartbeat.interval.ms": _same(),
    "max.poll.interval.ms": _same(),
    "max.poll.records": Rule("ignored", note="Java's poll() batching; eos's consumers fetch by bytes"),
    "check.crcs": _same(),
    "client.rack": _same(),
    "key.deserializer": Rule(
        "ignored",
        note="Spark's Kafka source reads bytes; eos reads Schema Registry keys with eos.key.deserializer",
    ),
    "value.deserializer": Rule(
        "ignored",
        note="Spark's Kafka source reads bytes; eos reads Schema Registry values with eos.value.deserializer",
    ),
    "default.api.timeout.ms": Rule("ignored", note="eos bounds its own waits with eos.operation.timeout.ms"),
    # -- every client
    "client.id": _same(),
    "request.timeout.ms": _same(),
    "retry.backoff.ms": _same(),
    "retry.backoff.max.ms": _same(),
    "reconnect.backoff.ms": _same(),
    "reconnect.backoff.max.ms": _same(),
    "metadata.max.age.ms": _same(),
    "connections.max.idle.ms": _same(),
    "socket.connection.setup.timeout.ms": _same(),
    "socket.connection.setup.timeout.max.ms": Rule(
        "ignored", note="librdkafka has one setup timeout: socket.connection.setup.timeout.ms"
    ),
    "receive.buffer.bytes": Rule("renamed", "socket.receive.buffer.bytes"),
    "send.buffer.bytes": Rule("renamed", "socket.send.buffer.bytes"),
    "client.dns.lookup": Rule("ignored", note="librdkafka resolves every address a name has"),
    "metric.reporters": Rule("ignored", note="Java's metrics; eos's are in docs/guide/observability.md"),
    "metrics.num.samples": Rule("ignored", note="Java's metrics"),
    "metrics.recording.level": Rule("ignored", note="Java's metrics"),
    "metrics.sample.window.ms": Rule("ignored", note="Java's metrics"),
    "auto.include.jmx.reporter": Rule("ignored", note="Java's metrics"),
    "enable.metrics.push": Rule("ignored", note="Java's metrics"),
    # -- security
    "security.protocol": _same(),
    "sasl.mechanism": _same(),
    "sasl.jaas.config": Rule(
        "converted",
        "sasl.username, sasl.password; sasl.oauthbearer.*; sasl.kerberos.*",
        "PlainLoginModule and ScramLoginModule become sasl.username and sasl.password;"
        " OAuthBearerLoginModule with clientId and clientSecret becomes sasl.oauthbearer.method=oidc and"
        " its client.id, client.secret, scope; Krb5LoginModule with a keyTab and principal becomes"
        " sasl.kerberos.keytab and .principal; other login modules are refused",
    ),
    "sasl.oauthbearer.token.endpoint.url": _same("the OIDC token endpoint"),
    "sasl.kerberos.service.name": _same(),
    "sasl.login.class": Rule("refused", note=_JAVA_CLASS),
    "sasl.login.callback.handler.class": Rule(
        "ignored",
        note="OAuthBearerLoginCallbackHandler is what sasl.oauthbearer.method=oidc does; any other class is"
        f" refused: {_JAVA_CLASS}",
    ),
    "sasl.login.connect.timeout.ms": Rule("ignored", note="Java's OAuth login"),
    "sasl.login.read.timeout.ms": Rule("ignored", note="Java's OAuth login"),
    "sasl.login.retry.backoff.ms": Rule("ignored", note="Java's OAuth login"),
    "sasl.login.retry.backoff.max.ms": Rule("ignored", note="Java's OAuth login"),
    "sasl.login.refresh.buffer.seconds": Rule(
        "ignored", note="librdkafka refreshes a token at 80 % of its life"
    ),
    "sasl.login.refresh.min.period.seconds": Rule(
        "ignored", note="librdkafka refreshes a token at 80 % of its life"
    ),
    "sasl.login.refresh.window.factor": Rule(
        "ignored", note="librdkafka refreshes a token at 80 % of its life"
    ),
    "sasl.login.refresh.window.jitter": Rule(
        "ignored", note="librdkafka refreshes a token at 80 % of its life"
    ),
    "sasl.client.callback.handler.class": Rule("refused", note=_JAVA_CLASS),
    "ssl.endpoint.identification.algorithm": Rule(
        "converted",
        "ssl.endpoint.identification.algorithm",
        'empty (no host name check) becomes "none"',
        convert=_identification,
    ),
    "ssl.key.password": _same(),
    "ssl.cipher.suites": _same("OpenSSL's cipher list syntax"),
    "ssl.truststore.location": Rule(
        "converted",
        "ssl.ca.location",
        "a PEM file (ssl.truststore.type=PEM); JKS is refused with the command",
    ),
    "ssl.truststore.type": Rule("ignored", note="read with ssl.truststore.location"),
    "ssl.truststore.password": Rule("ignored", note="a PEM trust store has none"),
    "ssl.keystore.location": Rule(
        "same", note="a PKCS12 file (ssl.keystore.type=PKCS12); JKS is refused with the command"
    ),
    "ssl.keystore.password": _same(),
    "ssl.keystore.key": Rule("renamed", "ssl.key.pem", "a PEM private key, in the setting"),
    "ssl.keystore.certificate.chain": Rule(
        "renamed", "ssl.certificate.pem", "PEM certificates, in the setting"
    ),
    "ssl.truststore.certificates": Rule("renamed", "ssl.ca.pem", "PEM certificates, in the setting"),
    "ssl.keystore.type": Rule("ignored", note="read with ssl.keystore.location"),
    "ssl.protocol": Rule("ignored", note=_NEGOTIATED),
    "ssl.enabled.protocols": Rule(
        "ignored", note="librdkafka negotiates the newest TLS version OpenSSL offers"
    ),
    "ssl.keymanager.algorithm": Rule("ignored", note="Java's key managers"),
    "ssl.trustmanager.algorithm": Rule("ignored", note="Java's trust managers"),
    "ssl.secure.random.implementation": Rule("ignored", note="Java's random source"),
    "ssl.engine.factory.class": Rule("refused", note=_JAVA_CLASS),
    "security.providers": Rule("refused", note=_JAVA_CLASS),
}

_JAAS_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": "PLAIN",
    "org.apache.kafka.common.security.scram.ScramLoginModule": "SCRAM",
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule": "OAUTHBEARER",
    "com.sun.security.auth.module.Krb5LoginModule": "GSSAPI",
    "com.ibm.security.auth.module.Krb5LoginModule": "GSSAPI",
}
# A refusal never shows the value itself, not even its first word: in a line without a login module
# that may be a password.
KERBEROS_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
#: the Java client's OIDC login handler (client credentials), in its packages since Kafka 3.1
_OIDC_HANDLERS = frozenset(
    {
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
    }
)
OIDC_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+?))(?=\s|;|$)')


def _jks_fix(store: str, location: str) -> str:
    """The exact commands that turn a JKS store at `location` into one both clients read (keytool asks
    for the password: none is shown)."""
    if store == "truststore":
        return (
            "convert it to PEM, which Java (Spark's source) reads too: `keytool -list -rfc -keystore"
            f" {location} -storetype JKS | sed -n '/-----BEGIN CERT/,/-----END CERT/p' > truststore.pem`,"
            " then set ssl.truststore.location=truststore.pem and ssl.truststore.type=PEM"
        )
    return (
        "convert it to PKCS12, which Java reads too: `keytool -importkeystore -srckeystore"
        f" {location} -srcstoretype JKS -destkeystore keystore.p12 -deststoretype PKCS12`, then set"
        " ssl.keystore.location=keystore.p12 and ssl.keystore.type=PKCS12"
    )


# Java key and trust stores: the type librdkafka reads.
_STORES = {"truststore": ("trust store", "PEM"), "keystore": ("key store", "PKCS12")}


def _jaas_refusal() -> str:
    """Why a `sasl.jaas.config` with another login module cannot be translated, without any of it."""
    return (
        "sasl.jaas.config does not start with PlainLoginModule, ScramLoginModule, OAuthBearerLoginModule or"
        " Krb5LoginModule (its value is not shown): eos's clients (librdkafka) take only PLAIN, SCRAM, OAuth"
        " client credentials and Kerberos keytab logins from it, written e.g."
        ' `org.apache.kafka.common.security.plain.PlainLoginModule required username="..." password="...";`;'
        " for other logins give librdkafka's own settings (sasl.oauthbearer.*, sasl.kerberos.*) instead"
    )


def _jaas(key: str, value: str) -> dict[str, str]:
    parts = value.strip().split(None, 1)
    module, rest = (parts + ["", ""])[:2]
    module = module.removeprefix("kafkashaded.")
    if module not in _JAAS_MODULES:
        raise ConfigError(key, _jaas_refusal())
    options = {
        m.group(1): re.sub(r"\\(.)", r"\1", m.group(2) if m.group(2) is not None else m.group(3))
        for m in _JAAS_OPTION.finditer(rest)
    }
    if _JAAS_MODULES[module] == "GSSAPI":
        if (
            options.get("useKeyTab", "").lower() != "true"
            or "keyTab" not in options
            or "principal" not in options
        ):
            raise ConfigError(
                key,
                'sasl.jaas.config with Krb5LoginModule needs useKeyTab=true, keyTab="..." and'
                ' principal="..." (librdkafka logs in from a keytab); for a ticket cache give'
                " librdkafka's sasl.kerberos.kinit.cmd instead",
            )
        return {"sasl.kerberos.keytab": options["keyTab"], "sasl.kerberos.principal": options["principal"]}
    if _JAAS_MODULES[module] == "OAUTHBEARER":
        if "clientId" not in options or "clientSecret" not in options:
            raise ConfigError(
                key,
                'sasl.jaas.config with OAuthBearerLoginModule needs clientId="..." and clientSecret="..."'
                " (the OIDC client credentials grant, with sasl.oauthbearer.token.endpoint.url); for an"
                " unsecured token give librdkafka's sasl.oauthbearer.config instead",
            )
        out = {
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": options["clientId"],
            "sasl.oauthbearer.client.secret": options["clientSecret"],
        }
        if options.get("scope"):
            out["sasl.oauthbearer.scope"] = options["scope"]
        extensions = [
            f"{k[len('extension_') :]}={v}" for k, v in options.items() if k.startswith("extension_")
        ]
        if extensions:
            out["sasl.oauthbearer.extensions"] = ",".join(extensions)
        return out
    out = {}
    for name in ("username", "password"):
        if name not in options:
            raise ConfigError(key, f'sasl.jaas.config has no {name}="..."')
        out[f"sasl.{name}"] = options[name]
    return out


def from_java(props: Mapping[str, str]) -> dict[str, str]:
    """librdkafka settings for eos's clients from Java client properties, by `SETTINGS`; a setting it
    does not list passes as it is. What cannot be translated is a ConfigError naming the key and what
    to write instead (never a secret's value)."""
    out: dict[str, str] = {}
    for key, value in props.items():
        if key == "sasl.jaas.config":
            out.update(_jaas(key, value))
            continue
        if key == "sasl.login.callback.handler.class":
            if value.strip().removeprefix("kafkashaded.") not in _OIDC_HANDLERS:
                raise ConfigError(key, f"{key} is not taken: {SETTINGS[key].note}")
            continue
        rule = SETTINGS.get(key)
        if rule is None or rule.kind == "same":
            out[key] = value
        elif rule.kind == "refused":
            raise ConfigError(key, f"{key} is not taken: {rule.note}")
        elif rule.kind in ("renamed", "converted") and key != "ssl.truststore.location":
            try:
                out[str(rule.target)] = rule.convert(value) if rule.convert else value
            except ValueError:
                raise ConfigError(key, f"{key} must be a number of bytes, not {value!r}") from None
    for store, (noun, readable) in _STORES.items():
        location = props.get(f"ssl.{store}.location")
        kind = props.get(f"ssl.{store}.type", "JKS").upper()
        if location is not None and kind != readable:
            fix = (
                _jks_fix(store, location)
                if kind == "JKS"
                else f"use a {readable} file (ssl.{store}.type={readable})"
            )
            raise ConfigError(
                f"ssl.{store}.location",
                f"ssl.{store}.location is a {kind} {noun}, which librdkafka cannot read: {fix}",
            )
    if "ssl.truststore.location" in props:
        out["ssl.ca.location"] = props["ssl.truststore.location"]
    return out


# -- the other way: Config.kafka (librdkafka's names) as Spark Kafka source options ---------------------

# librdkafka spells some security settings differently from the Java client that Spark's source uses.
_LIBRDKAFKA_ONLY = frozenset(
    {
        "ssl.ca.location",  # Java needs a truststore: set kafka.ssl.truststore.* in spark options instead
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.key.pem",
        "ssl.certificate.pem",
        "ssl.ca.pem",
        "sasl.username",  # turned into sasl.jaas.config below
        "sasl.password",
        "sasl.oauthbearer.config",  # librdkafka's OAUTHBEARER settings: the Java client has no such key
        "sasl.oauthbearer.method",  # oidc: turned into the Java client's OIDC login below
        "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.scope",
        "sasl.oauthbearer.extensions",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.keytab",  # turned into a Krb5LoginModule sasl.jaas.config below
        "sasl.kerberos.principal",
    }
)


#: The Java producer settings the JVM data path takes from `Config.producer`, which holds them under
#: librdkafka's names: SETTINGS' name for a renamed or converted one, else the Java name itself.
_JVM_PRODUCER = (
    "acks",
    "batch.size",
    "buffer.memory",
    "compression.type",
    "delivery.timeout.ms",
    "enable.idempotence",
    "linger.ms",
    "max.in.flight.requests.per.connection",
    "max.request.size",
    "request.timeout.ms",
    "retries",
    "retry.backoff.ms",
)
#: librdkafka's aliases of those settings (its CONFIGURATION.md), to its own names
_LIBRDKAFKA_ALIASES = {
    "request.required.acks": "acks",
    "compression.codec": "compression.type",
    "queue.buffering.max.ms": "linger.ms",
    "max.in.flight": "max.in.flight.requests.per.connection",
    "message.send.max.retries": "retries",
    "message.timeout.ms": "delivery.timeout.ms",
}
#: a converted setting's librdkafka value in the Java client's units
_TO_JAVA_UNITS: dict[str, Callable[[str], str]] = {"buffer.memory": lambda kib: str(int(kib) * 1024)}


def java_producer(settings: Mapping[str, Any], shared: bool = False) -> dict[str, str]:
    """`Config.producer` (librdkafka's names) as the Java client's settings, for the producers of the JVM
    data path; ConfigError naming the first setting the Java client has no equivalent of. `shared`:
    `Config.kafka`, every client's settings, of which only those a producer takes are turned (the rest
    reach the Java clients as they are, `spark_source_options`)."""
    by_librdkafka = {(SETTINGS.get(java) or _same()).target or java: java for java in _JVM_PRODUCER}
    out: dict[str, str] = {}
    for key, value in settings.items():
        java = by_librdkafka.get(_LIBRDKAFKA_ALIASES.get(key, key))
        if java is None and shared:
            continue
        if java is None:
            raise ConfigError(f"producer.{key}", "has no Java client setting eos knows to match it")
        text = str(value).lower() if isinstance(value, bool) else str(value)
        try:
            out[java] = _TO_JAVA_UNITS[java](text) if java in _TO_JAVA_UNITS else text
        except ValueError:
            raise ConfigError(
                f"{'kafka' if shared else 'producer'}.{key}", f"{value!r} is not a whole number"
            ) from None
    return out


def spark_source_options(config: Config) -> dict[str, str]:
    """`kafka.*` options for Spark's Kafka source, carrying the same shared settings."""
    options = {"kafka.bootstrap.servers": config.bootstrap_servers}
    username = config.kafka.get("sasl.username")
    password = config.kafka.get("sasl.password")
    mechanism = str(config.kafka.get("sasl.mechanism", config.kafka.get("sasl.mechanisms", "PLAIN"))).upper()
    for key, value in config.kafka.items():
        if key in _LIBRDKAFKA_ONLY:
            continue
        if key == "sasl.mechanisms":
            key = "sasl.mechanism"
        options[f"kafka.{key}"] = str(value)
    options.update(_java_tls(config.kafka))
    if (
        str(config.kafka.get("sasl.oauthbearer.method", "")).lower() == "oidc"
        and "sasl.jaas.config" not in config.kafka
    ):
        # the Java client's OIDC client credentials login, from librdkafka's settings
        jaas = {
            "clientId": config.kafka.get("sasl.oauthbearer.client.id"),
            "clientSecret": config.kafka.get("sasl.oauthbearer.client.secret"),
            "scope": config.kafka.get("sasl.oauthbearer.scope"),
        }
        for pair in str(config.kafka.get("sasl.oauthbearer.extensions") or "").split(","):
            if "=" in pair:
                name, value = pair.split("=", 1)
                jaas[f"extension_{name.strip()}"] = value.strip()
        fields = " ".join(f'{k}="{_jaas_quote(v)}"' for k, v in jaas.items() if v is not None)
        options["kafka.sasl.jaas.config"] = f"{OAUTH_MODULE} required {fields};"
        options.setdefault("kafka.sasl.login.callback.handler.class", OIDC_HANDLER)
    elif "sasl.kerberos.keytab" in config.kafka and "sasl.jaas.config" not in config.kafka:
        keytab, principal = (
            config.kafka["sasl.kerberos.keytab"],
            config.kafka.get("sasl.kerberos.principal", ""),
        )
        options["kafka.sasl.jaas.config"] = (
            f'{KERBEROS_MODULE} required useKeyTab=true storeKey=true keyTab="{_jaas_quote(keytab)}"'
            f' principal="{_jaas_quote(principal)}";'
        )
    elif username is not None and "sasl.jaas.config" not in config.kafka:
        module = (
            "org.apache.kafka.common.security.plain.PlainLoginModule"
            if mechanism == "PLAIN"
            else "org.apache.kafka.common.security.scram.ScramLoginModule"
        )
        options["kafka.sasl.jaas.config"] = (
            f'{module} required username="{_jaas_quote(username)}" password="{_jaas_quote(password)}";'
        )
    return options


def _java_tls(kafka: Mapping[str, Any]) -> dict[str, str]:
    """librdkafka's TLS files and PEM strings as the Java client's stores: a CA file or PEM becomes a
    PEM trust store, a PKCS12 key store stays one, a PEM certificate and key (strings) a PEM key store.
    (PEM certificate and key *files* have no Java equivalent short of a new file: give
    `kafka.ssl.keystore.*` options to `eos.read_stream` for them.)"""
    out: dict[str, str] = {}
    if "ssl.ca.location" in kafka:
        out["kafka.ssl.truststore.location"] = str(kafka["ssl.ca.location"])
        out["kafka.ssl.truststore.type"] = "PEM"
    elif "ssl.ca.pem" in kafka:
        out["kafka.ssl.truststore.certificates"] = str(kafka["ssl.ca.pem"])
        out["kafka.ssl.truststore.type"] = "PEM"
    if "ssl.keystore.location" in kafka:
        out["kafka.ssl.keystore.type"] = "PKCS12"  # the only key store librdkafka reads
    elif "ssl.certificate.pem" in kafka and "ssl.key.pem" in kafka:
        out["kafka.ssl.keystore.type"] = "PEM"
        out["kafka.ssl.keystore.certificate.chain"] = str(kafka["ssl.certificate.pem"])
        out["kafka.ssl.keystore.key"] = str(kafka["ssl.key.pem"])
    return out


def _jaas_quote(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"')
