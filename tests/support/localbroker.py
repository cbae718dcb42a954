"""KRaft Kafka brokers run from the official jars, for machines without Docker: one node
(`LocalBroker`), or a replicated cluster of several on loopback (`LocalCluster`, for `make chaos
CHAOS_ARGS="--brokers 3"`).

`make broker-up` / `make broker-down` and the integration-test fixture all go through `LocalBroker`,
so there is one way to start and stop it. `up` is idempotent (a live pid file means "already up");
`down` stops exactly the process recorded in the pid file.

    python -m tests.support.localbroker up|down|status [--home DIR] [--port N]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import attrs

from eos._spark._cache import cache_dir, kafka_libs
from eos.session import free_port

_SERVER_PROPERTIES = """\
process.roles=broker,controller
node.id={node_id}
controller.quorum.voters={voters}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs={data_dir}
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
min.insync.replicas=1
group.initial.rebalance.delay.ms=0
transaction.abort.timed.out.transaction.cleanup.interval.ms=5000
"""

# With a SASL port: a SASL/PLAIN listener with these users, and ACLs enforced (StandardAuthorizer).
# PLAINTEXT and controller connections are ANONYMOUS, a super user, so they keep working unchanged.
SASL_USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
_SASL_PROPERTIES = """\
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=\
org.apache.kafka.common.security.plain.PlainLoginModule required \
username="admin" password="{admin}" {users};
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin;User:ANONYMOUS
allow.everyone.if.no.acl.found=false
"""

# With an OAuth port: OAUTHBEARER tokens (JWTs) validated by Kafka's own handler against a JWKS.
_OAUTH_PROPERTIES = """\
listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER
listener.name.oauth.oauthbearer.sasl.jaas.config=\
org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;
listener.name.oauth.oauthbearer.sasl.server.callback.handler.class=\
org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
listener.name.oauth.oauthbearer.sasl.oauthbearer.jwks.endpoint.url={jwks}
"""

# With an SSL port: mutual TLS, the client's certificate required (its principal is User:CN=...).
_SSL_PROPERTIES = """\
listener.name.ssl.ssl.client.auth=required
listener.name.ssl.ssl.keystore.type=PEM
listener.name.ssl.ssl.keystore.location={keystore}
listener.name.ssl.ssl.truststore.type=PEM
listener.name.ssl.ssl.truststore.location={ca}
"""


def _with_listener(text: str, name: str, port: int, protocol: str) -> str:
    """server.properties `text` with one more client listener, advertised, of security `protocol`."""
    endpoint = f"{name}://127.0.0.1:{port}"
    lines = (
        f"{line},{endpoint}" if line.startswith(("listeners=", "advertised.listeners=")) else line
        for line in text.splitlines()
    )
    return "\n".join(lines).replace("CONTROLLER:PLAINTEXT", f"CONTROLLER:PLAINTEXT,{name}:{protocol}") + "\n"


_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log_dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
"""


class BrokerError(RuntimeError):
    """The local broker could not be started or stopped."""


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped) is not alive for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


@attrs.define
class LocalBroker:
    home: Path
    port: int = 9092
    controller_port: int = attrs.field()
    #: a SASL_PLAINTEXT listener with ACLs enforced (see SASL_USERS); None: PLAINTEXT only
    sasl_port: int | None = attrs.field(default=None, kw_only=True)
    #: a SASL_PLAINTEXT listener named OAUTH taking OAUTHBEARER tokens, validated against the JWKS at
    #: `oauth_jwks_url` (Kafka's own OAuthBearerValidatorCallbackHandler); both or neither
    oauth_port: int | None = attrs.field(default=None, kw_only=True)
    oauth_jwks_url: str | None = attrs.field(default=None, kw_only=True)
    #: an SSL listener requiring a client certificate signed by `ssl_ca` (PEM); the broker's own key and
    #: certificate in the PEM file `ssl_keystore`; both or neither (tests/support/tls.py makes them)
    ssl_port: int | None = attrs.field(default=None, kw_only=True)
    ssl_ca: str | None = attrs.field(default=None, kw_only=True)
    ssl_keystore: str | None = attrs.field(default=None, kw_only=True)
    #: server.properties that replace the defaults above (e.g. auto.create.topics.enable=true)
    overrides: dict[str, str] = attrs.field(factory=dict, kw_only=True)
    #: in a cluster: this node's id, every controller ("1@host:port,..."), and the shared cluster id
    node_id: int = attrs.field(default=1, kw_only=True)
    voters: str | None = attrs.field(default=None, kw_only=True)
    cluster_id: str | None = attrs.field(default=None, kw_only=True)
    #: "broker,controller" (one node does both), "broker" or "controller" (a cluster's own quorum)
    roles: str = attrs.field(default="broker,controller", kw_only=True)

    @controller_port.default
    def _controller_default(self) -> int:
        return self.port + 1

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def _listen_port(self) -> int:
        """The port that says the process is up (a controller has no client listener)."""
        return self.controller_port if self.roles == "controller" else self.port

    @property
    def sasl_bootstrap_servers(self) -> str | None:
        return f"127.0.0.1:{self.sasl_port}" if self.sasl_port else None

    @property
    def oauth_bootstrap_servers(self) -> str | None:
        return f"127.0.0.1:{self.oauth_port}" if self.oauth_port else None

    @property
    def ssl_bootstrap_servers(self) -> str | None:
        return f"127.0.0.1:{self.ssl_port}" if self.ssl_port else None

    @property
    def pid_file(self) -> Path:
        return self.home / "broker.pid"

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if _alive(pid) else None

    def _write_config(self) -> Path:
        self.home.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(exist_ok=True)
        props = self.home / "server.properties"
        text = _SERVER_PROPERTIES.format(
            port=self.port,
            controller_port=self.controller_port,
            node_id=self.node_id,
            voters=self.voters or f"{self.node_id}@127.0.0.1:{self.controller_port}",
            data_dir=self.home / "data",
        )
        if self.roles == "broker":
            text = text.replace("process.roles=broker,controller", "process.roles=broker").replace(
                f",CONTROLLER://127.0.0.1:{self.controller_port}", ""
            )
        elif self.roles == "controller":
            lines = [
                line
                for line in text.replace("process.roles=broker,controller", "process.roles=controller")
                .replace(f"listeners=PLAINTEXT://127.0.0.1:{self.port},", "listeners=")
                .splitlines()
                if not line.startswith(("advertised.listeners=", "inter.broker.listener.name="))
            ]
            text = "\n".join(lines) + "\n"
        if self.sasl_port:
            sasl = f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}"
            text = (
                text.replace(
                    f"listeners=PLAINTEXT://127.0.0.1:{self.port},",
                    f"listeners=PLAINTEXT://127.0.0.1:{self.port},{sasl},",
                )
                .replace(
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port},{sasl}",
                )
                .replace("CONTROLLER:PLAINTEXT", "CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT")
            )
            users = " ".join(f'user_{u}="{p}"' for u, p in SASL_USERS.items())
            text += _SASL_PROPERTIES.format(admin=SASL_USERS["admin"], users=users)
        if self.oauth_port:
            text = _with_listener(text, "OAUTH", self.oauth_port, "SASL_PLAINTEXT")
            text += _OAUTH_PROPERTIES.format(jwks=self.oauth_jwks_url)
        if self.ssl_port:
            text = _with_listener(text, "SSL", self.ssl_port, "SSL")
            text += _SSL_PROPERTIES.format(ca=self.ssl_ca, keystore=self.ssl_keystore)
        for key, value in self.overrides.items():  # a later line of a properties file wins
            text += f"{key}={value}\n"
        props.write_text(text)
        (self.home / "log4j2.properties").write_text(_LOG4J2.format(log_dir=self.log_dir))
        return props

    def _java(self, main: str, *args: str) -> list[str]:
        libs = kafka_libs()
        if not any(libs.glob("kafka_2.13-*.jar")):
            raise BrokerError(f"no Kafka jars in {libs}: run `make setup` first")
        return [
            os.environ.get("JAVA", "java"),
            "-Xms256m",
            "-Xmx1g",
            "-XX:+UseG1GC",
            f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.log_dir}",
            # Kafka 4 reads an OAUTHBEARER JWKS only from a URL this property allows
            *(
                [f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={self.oauth_jwks_url}"]
                if self.oauth_jwks_url
                else []
            ),
            "-cp",
            f"{libs}/*",
            main,
            *args,
        ]

    def _format(self, props: Path) -> None:
        if (self.home / "data" / "meta.properties").exists():
            return
        cluster_id = self.cluster_id or uuid.uuid4().hex[:22]
        out = subprocess.run(
            self._java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props)),
            capture_output=True,
            text=True,
        )
        if out.returncode != 0:
            raise BrokerError(f"formatting storage failed:\n{out.stdout}\n{out.stderr}")

    def up(self, timeout: float = 90.0) -> None:
        """Start the broker unless it already runs, then wait until it serves metadata."""
        self.start()
        self._wait_ready(timeout)

    def start(self) -> None:
        """Start the broker process unless it already runs (not waiting for it: a cluster's nodes need
        each other's votes before any of them serves)."""
        if self.pid() is None:
            if _port_open(self._listen_port):
                raise BrokerError(f"port {self._listen_port} is taken by a process this broker did not start")
            props = self._write_config()
            self._format(props)
            with open(self.log_dir / "broker.out", "ab") as out:
                proc = subprocess.Popen(
                    self._java("kafka.Kafka", str(props)),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            self.pid_file.write_text(str(proc.pid))

    def _wait_ready(self, timeout: float) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        while time.monotonic() < deadline:
            if self.pid() is None:
                raise BrokerError(
                    f"broker exited during start-up; see {self.log_dir}/server.log\n{self._tail()}"
                )
            if self.roles == "controller":
                if _port_open(self.controller_port):
                    return
            elif _port_open(self.port):
                try:
                    md = admin.list_topics(timeout=2)
                    if md.brokers:
                        return
                except Exception:  # noqa: BLE001 - not ready yet; the deadline bounds this loop
                    pass
            time.sleep(0.3)
        raise BrokerError(
            f"broker did not answer on {self.bootstrap_servers} within {timeout:.0f}s\n{self._tail()}"
        )

    def _tail(self, lines: int = 30) -> str:
        out = []
        for name in ("server.log", "broker.out"):
            log = self.log_dir / name
            if log.exists():
                out += log.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(out)

    def down(self, timeout: float = 60.0) -> bool:
        """Stop the recorded broker process (SIGTERM, then SIGKILL). Returns whether one was running."""
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
            while _alive(pid):
                time.sleep(0.1)
        self.pid_file.unlink(missing_ok=True)
        # The port must be free before a restart can bind it again.
        while _port_open(self._listen_port) and time.monotonic() < deadline + 10:
            time.sleep(0.2)
        return True

    def kill(self) -> None:
        """SIGKILL the broker: a crash, not a shutdown."""
        pid = self.pid()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            while _alive(pid):
                time.sleep(0.05)
        self.pid_file.unlink(missing_ok=True)


_REPLICATED = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "unclean.leader.election.enable": "false",
}


@attrs.define
class LocalCluster:
    """`size` brokers on loopback and a controller quorum of its own (one node), everything replicated
    `size` ways with min.insync.replicas 2, as Kafka's own transactions tests run. The controller stands
    apart so that brokers can be lost (two of three at once) while partition leadership and ISRs still
    change, as in a production KRaft cluster."""

    home: Path
    size: int = 3
    overrides: dict[str, str] = attrs.field(factory=dict)
    controller: LocalBroker = attrs.field(init=False)
    nodes: list[LocalBroker] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        controller_id = 100
        controller_port = free_port()
        voters = f"{controller_id}@127.0.0.1:{controller_port}"
        cluster_id = uuid.uuid4().hex[:22]
        replicas = str(min(3, self.size))
        settings = {
            **_REPLICATED,
            "default.replication.factor": replicas,
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            **self.overrides,
        }
        common = {"voters": voters, "cluster_id": cluster_id, "overrides": settings}
        self.controller = LocalBroker(
            self.home / "controller",
            free_port(),
            controller_port,
            node_id=controller_id,
            roles="controller",
            **common,
        )
        self.nodes = [
            LocalBroker(
                self.home / f"broker-{i}",
                free_port(),
                controller_port,
                node_id=i,
                roles="broker",
                **common,
            )
            for i in range(1, self.size + 1)
        ]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(node.bootstrap_servers for node in self.nodes)

    def node(self, node_id: int) -> LocalBroker:
        return self.nodes[node_id - 1]

    def up(self, timeout: float = 120.0) -> None:
        self.controller.up(timeout)
        for node in self.nodes:
            node.start()
        for node in self.nodes:
            node._wait_ready(timeout)

    def down(self) -> None:
        for node in self.nodes:
            node.down()
        self.controller.down()


def _features(bootstrap_servers: str, *args: str) -> subprocess.CompletedProcess:
    """Kafka's own FeatureCommand, from the broker jars."""
    return subprocess.run(
        [os.environ.get("JAVA", "java"), "-cp", f"{kafka_libs()}/*", "org.apache.kafka.tools.FeatureCommand"]
        + ["--bootstrap-server", bootstrap_servers, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def finalized(bootstrap_servers: str, feature: str) -> int | None:
    """The level `feature` (`transaction.version`, ...) is finalized at on a running cluster."""
    for line in _features(bootstrap_servers, "describe").stdout.splitlines():
        fields = dict(part.split(": ", 1) for part in line.split("\t") if ": " in part)
        if fields.get("Feature") == feature:
            return int(fields.get("FinalizedVersionLevel", "0"))
    return None


def set_feature(bootstrap_servers: str, feature: str, level: int) -> None:
    """Finalize `feature` at `level` on a running cluster, up or down."""
    now = finalized(bootstrap_servers, feature)
    if now == level:
        return
    action = "downgrade" if now is not None and now > level else "upgrade"
    out = _features(bootstrap_servers, action, "--feature", f"{feature}={level}")
    if out.returncode != 0:
        raise BrokerError(f"{feature}={level} not finalized:\n{out.stdout}\n{out.stderr}")


def default_broker() -> LocalBroker:
    port = int(os.environ.get("KAFKA_PORT", "9092"))
    return LocalBroker(home=cache_dir() / "broker", port=port)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.localbroker")
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.add_argument("--home", type=Path)
    parser.add_argument("--port", type=int)
    parser.add_argument("--controller-port", type=int, help="default: port + 1")
    parser.add_argument("--sasl-port", type=int, help="add a SASL/PLAIN listener with ACLs enforced")
    args = parser.parse_args(argv)
    broker = default_broker()
    if args.home:
        broker.home = args.home
    if args.port:
        broker = LocalBroker(home=broker.home, port=args.port)
    if args.controller_port:
        broker.controller_port = args.controller_port
    if args.sasl_port:
        broker.sasl_port = args.sasl_port
    try:
        if args.action == "up":
            was_up = broker.pid() is not None
            broker.up()
            state = "already up" if was_up else "started"
            where = f"{broker.bootstrap_servers} (pid {broker.pid()}, logs {broker.log_dir})"
            print(f"kafka broker {state} on {where}")
        elif args.action == "down":
            stopped = broker.down()
            print("kafka broker stopped" if stopped else "kafka broker was not running")
        else:
            pid = broker.pid()
            print(f"up on {broker.bootstrap_servers} (pid {pid})" if pid else "down")
            return 0 if pid else 1
    except BrokerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
