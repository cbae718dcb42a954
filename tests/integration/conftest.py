"""The one Kafka broker fixture, and the Spark session, for every integration test.

Broker, in order of preference:
  1. `KAFKA_BOOTSTRAP_SERVERS` if set (an external broker; restart tests are skipped);
  2. testcontainers with the official apache/kafka image when a Docker engine answers;
  3. the local broker from the official jars (`tests/support/localbroker.py`), started for the session.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import attrs
import pyspark
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from eos import testing
from eos.session import free_port
from tests.support import jvm, tls
from tests.support.apicurio import Apicurio
from tests.support.localbroker import LocalBroker
from tests.support.oidc import OidcProvider
from tests.support.processes import DriverProcess

KAFKA_IMAGE = "apache/kafka:4.1.1"

jvm.install()  # before any Spark JVM starts: the session's, and every driver process's


@attrs.define
class Broker:
    bootstrap_servers: str
    local: LocalBroker | None = None  # set when this session started the broker and can restart it
    #: the identity provider the local broker's OAUTHBEARER listener trusts (test_oauth.py)
    oidc: OidcProvider | None = None
    #: the CA and certificates of the local broker's mutual-TLS listener (test_tls.py)
    certificates: tls.Certificates | None = None

    def require_local(self) -> LocalBroker:
        if self.local is None:
            pytest.skip("needs the local jar broker (restarts and kills are not possible on this broker)")
        return self.local


#: the client the OIDC provider knows, as a Kafka principal User:<id>
OAUTH_CLIENT, OAUTH_SECRET = "eos-oauth-client", "oauth-client-secret-7c1d"
#: the password of the TLS client's PKCS12 key store
TLS_KEYSTORE_PASSWORD = "keystore-password-41e2"


def _docker_answers() -> bool:
    try:
        import docker

        docker.from_env(timeout=3).ping()
        return True
    except Exception:  # noqa: BLE001 - any failure means "no Docker engine here"
        return False


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        yield Broker(external)
        return
    if _docker_answers():
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer(KAFKA_IMAGE) as container:
            yield Broker(container.get_bootstrap_server())
        return
    oidc = OidcProvider(tmp_path_factory.mktemp("oidc"), {OAUTH_CLIENT: OAUTH_SECRET}).start()
    certificates = tls.make(tmp_path_factory.mktemp("tls"), TLS_KEYSTORE_PASSWORD)
    local = LocalBroker(
        home=tmp_path_factory.mktemp("kafka"),
        port=free_port(),
        controller_port=free_port(),
        sasl_port=free_port(),  # SASL/PLAIN with ACLs beside the PLAINTEXT listener (test_security.py)
        # OAUTHBEARER tokens from `oidc`, checked by Kafka's own validator (test_oauth.py)
        oauth_port=free_port(),
        oauth_jwks_url=oidc.jwks_url,
        # mutual TLS: a client certificate signed by `certificates`' CA required (test_tls.py)
        ssl_port=free_port(),
        ssl_ca=str(certificates.ca),
        ssl_keystore=str(certificates.broker_pem),
        # Apache's default, which brokers in the field keep: a client's metadata request for a missing
        # topic creates it. eos must never do that (test_bad_input.py checks).
        overrides={
            "auto.create.topics.enable": "true",
            # the log cleaner looks for work every second, not every 15: a test compacts a changelog
            "log.cleaner.backoff.ms": "1000",
            # client quotas measured over 2 s, not 11: a throttled client gets no 10 s head start
            "quota.window.num": "2",
        },
    )
    local.up()
    try:
        yield Broker(local.bootstrap_servers, local, oidc, certificates)
    finally:
        local.down()
        oidc.stop()


#: Spark 4.1.1's Kafka source (SPARK-55271): a query restarted on a batch its offset log planned
#: before the stop runs and commits that batch, then fails building its progress report with this
#: NullPointerException; the next restart goes on. Spark's own sinks hit it too (no eos involved).
SPARK_55271 = 'because the return value of "scala.Option.get()" is null'
_ON_SPARK_41 = pyspark.__version__.startswith("4.1.")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On PySpark 4.1.x (make matrix), a test that restarts a query mid-batch fails on SPARK-55271
    before it can check anything; such a failure, and no other, is reported as xfailed."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.excinfo is not None and _ON_SPARK_41 and SPARK_55271 in str(report.longrepr):
        report.outcome = "skipped"
        report.wasxfail = f"SPARK-55271 (Spark {pyspark.__version__}'s Kafka source), not eos"


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Apicurio]:
    """A real Schema Registry (Apicurio, built by `make setup`), one per session; tests use their own
    subjects."""
    registry = Apicurio(tmp_path_factory.mktemp("registry") / "registry.log").start()
    yield registry
    registry.stop()


@pytest.fixture(scope="session")
def bootstrap(broker: Broker) -> str:
    return broker.bootstrap_servers


def _connect_available() -> bool:
    """A Spark Connect server can start from this PySpark install (4.0+, with the `connect` extra)."""
    if int(pyspark.__version__.split(".")[0]) < 4:
        return False
    try:
        import grpc  # noqa: F401 - the Connect client's transport
    except ImportError:
        return False
    return True


@pytest.fixture(scope="session")
def sessions(broker: Broker):
    """The classic session and, where PySpark has a Connect server, a Connect session to one in the
    same JVM (started first: the classic session then is the one hosting the server)."""
    import eos

    connect = eos.spark_session("eos-tests", remote="local") if _connect_available() else None
    classic = eos.spark_session("eos-tests")
    yield classic, connect
    if connect is not None:
        connect.stop()  # first: it releases its server-side session, which needs the server up
    classic.stop()


@pytest.fixture(scope="session")
def spark(sessions):
    return sessions[0]


@pytest.fixture(scope="session")
def connect(sessions):
    if sessions[1] is None:
        pytest.skip("Spark Connect needs PySpark 4.0+ with the connect extra")
    return sessions[1]


@pytest.fixture(autouse=True)
def pyspark_api_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """PySpark has one Connect switch per process (`pyspark.sql.utils.is_remote()`, read from the
    environment), which `eos.spark_session(remote="local")` turns on as PySpark's `builder.remote("local")`
    does. On, `pyspark.sql.functions` and classic `mapInArrow` build Connect Columns and UDFs, which
    classic DataFrames refuse; off, `F` builds classic Columns, which Connect DataFrames refuse. This
    process holds both sessions: a test that asks for `connect` and not `spark` runs with it on, every
    other one (and the driver processes it starts) with it off."""
    if "connect" in request.fixturenames and "spark" not in request.fixturenames:
        return
    for name in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`make dist`'s sdist and wheel of this checkout, built once for the tests that install or ship them."""
    out = tmp_path_factory.mktemp("dist")
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    argv = [sys.executable, "-m", "build", "--outdir", str(out), str(root)]
    built = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert built.returncode == 0, f"{argv}: {built.stdout[-2000:]}{built.stderr[-2000:]}"
    return out


@pytest.fixture
def names() -> Names:
    return Names(uuid.uuid4().hex[:8])


@attrs.frozen
class Names:
    """Unique topic / app names per test, so tests never see each other's data."""

    run: str

    def __call__(self, kind: str) -> str:
        return f"{kind}-{self.run}"


@pytest.fixture(params=["jvm", pytest.param("python", marks=pytest.mark.long)])
def data_path(request: pytest.FixtureRequest) -> str:
    """The data path of a fault test's pass-through query, for one suite over both paths: make test runs
    the JVM path (the one `data_path="auto"` gives such a query), make chaos (long-test) the Python path."""
    return request.param


@pytest.fixture
def checkpoint_dir(tmp_path: Path) -> Path:
    return tmp_path / "checkpoint"


def run_query(spark, config, topics, checkpoint, process=None, sink=None, **source_options):
    """Run an eos pipeline until the input available now is written; returns the Sink (its history)."""
    import eos

    df = eos.read_stream(spark, config, topics, **source_options)
    sink = sink or eos.sink(config, process)
    write_available(df, sink, checkpoint)
    return sink


def write_available(df, batch_function, checkpoint) -> None:
    """Run `df.writeStream.foreachBatch(batch_function)` until the input available now is written."""
    query = (
        df.writeStream.foreachBatch(batch_function)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def kafka_stream(spark, bootstrap: str, topic: str):
    """Spark's own Kafka source from the earliest offset, no eos: for tests of what Spark itself does."""
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )


def group_offsets(config, topic: str, partitions: int) -> dict[int, int | None]:
    from eos._kafka import _offsets

    committed = _offsets.committed(config, [(topic, p) for p in range(partitions)])
    return {p: committed[(topic, p)] for p in range(partitions)}


# -- the example pipeline as its own driver process ------------------------------------------------

PIPELINE = Path(__file__).resolve().parents[2] / "examples" / "pipeline.py"


def start_pipeline(
    bootstrap, app_id, source, output, checkpoint, summaries, env=None, **flags
) -> DriverProcess:
    args = [
        sys.executable,
        str(PIPELINE),
        "--bootstrap",
        bootstrap,
        "--app-id",
        app_id,
        "--input",
        source,
        "--output",
        output,
        "--checkpoint",
        str(checkpoint),
        "--summaries",
        str(summaries),
    ]
    for flag, value in flags.items():
        args += [f"--{flag.replace('_', '-')}"] + ([] if value is True else [str(value)])
    return DriverProcess(args, env=env, log_path=str(Path(summaries).with_suffix(".log")))


def line_count(path) -> int:
    """Lines in a file the pipeline appends to (`--commits`), 0 before it exists."""
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        return sum(1 for _ in f)


def wait_for(proc: DriverProcess, progress, more: int, what: str, timeout: float = 180) -> None:
    """Return as soon as `progress()` (a count of `what`) grew by `more` after now. Fails the test when it
    never does: the driver ended first, or `timeout` passed."""
    wanted = progress() + more
    deadline = time.monotonic() + timeout
    while progress() < wanted:
        assert proc.running(), f"the driver ended before {more} more {what}:\n{proc.log_tail()}"
        assert time.monotonic() < deadline, f"{more} more {what} did not come within {timeout}s"
        time.sleep(0.01)


def kill_after(proc: DriverProcess, progress, more: int, what: str, timeout: float = 180) -> None:
    """SIGKILL the pipeline's process group (driver, JVM, Python workers) as soon as `progress()` (a count
    of `what`) grew by `more` after now, so mid-batch (`wait_for`). (A kill at a deadline would prove only
    that the process was alive.)"""
    wait_for(proc, progress, more, what, timeout)
    assert proc.kill(), f"the driver ended as the {what} came, before the kill"


def kill_after_commits(proc: DriverProcess, commits, more: int, timeout: float = 180) -> None:
    """`kill_after` `more` more transactions committed (the pipeline's `--commits` lines, on_commit's)."""
    kill_after(proc, lambda: line_count(commits), more, "commits", timeout)


def kill_after_committed(
    proc: DriverProcess, config, topic: str, partitions: int, more: int, timeout: float = 180
) -> None:
    """`kill_after` `more` more input records the group committed (the JVM data path has no on_commit)."""
    kill_after(
        proc, partial(records_committed, config, topic, partitions), more, "records committed", timeout
    )


def records_committed(config, topic: str, partitions: int) -> int:
    """The input records of `topic` the group committed, over its partitions (unstable reads too)."""
    from eos._kafka import _offsets

    found = _offsets.committed(config, [(topic, p) for p in range(partitions)], stable=False)
    return sum(offset or 0 for offset in found.values())


def writers_ran(path: str, logs: str, summaries) -> None:
    """The tasks that wrote ran on the data path `path`, with their output in `logs` (which a test
    searches for secrets): the Python workers' `partition written` events, or, on the JVM data path, every
    batch summary's `data_path` (its tasks run in the executors' JVM, whose output `logs` holds too)."""
    if path == "python":
        assert "partition written" in logs  # the executors' Python workers' logs are in there
    else:
        from tests.support.summaries import read_summaries

        assert {s["data_path"] for s in read_summaries(summaries)} == {"jvm"}


def error_text(exc: BaseException) -> str:
    """What a failed batch tells its user: Spark's exception quoting the error of the Python tasks
    (`eos.errors.X: ...`), or the JVM data path's own error, named as Python names it."""
    from eos.errors import EosError

    return f"{type(exc).__name__}: {exc}" if isinstance(exc, EosError) else str(exc)


def finish(proc: DriverProcess) -> None:
    assert proc.wait() == 0, proc.log_tail()


def after_failure(spark, read, consistent, seconds: float = 60.0):
    """What `read()` returns once what a failed query left has settled. awaitTermination raises as soon as
    the job fails, while Spark is still killing the job's other tasks, and a killed task's Python worker can
    still commit its transaction then: a read in that moment sees a committed offset without all the
    outputs committed with it. This waits until no task runs and `consistent(read())` holds, and returns
    the last read either way for the test's own assertions (an inconsistency that lasts is eos's, not a
    race's). `spark` is the classic session: a Connect session's server runs in its JVM."""
    tracker = spark.sparkContext._jsc.sc().statusTracker()
    deadline = time.monotonic() + seconds
    while True:
        idle = not any(info.numRunningTasks() for info in tracker.getExecutorInfos())
        value = read() if idle else None
        if value is not None and consistent(value):
            return value
        if time.monotonic() > deadline:
            return value if value is not None else read()
        time.sleep(0.5)


def seed(bootstrap, names, per_partition, partitions=4):
    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, partitions)
    testing.create_topic(bootstrap, output, partitions)
    return source, output, testing.produce_sequence(bootstrap, source, partitions, per_partition)


def commit_foreign_offset(bootstrap: str, group: str, topic: str, partition: int, offset: int) -> None:
    """`offset` committed for `topic`/`partition` in consumer group `group` by a consumer that is not
    eos (no eos stamp), as an operator's tool or another application would."""
    intruder = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    intruder.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
    intruder.close()


def seed_one_big(bootstrap, names, prefix: str, records: int, big_at: int, size: int) -> tuple[str, str]:
    """A one-partition input of `records` 10-byte values but one of `size` bytes at offset `big_at`, and
    an output topic: (input, output)."""
    source, output = names(f"{prefix}-in"), names(f"{prefix}-out")
    testing.create_topic(bootstrap, source, 1)
    testing.create_topic(bootstrap, output, 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(records):
        producer.produce(source, b"x" * (size if i == big_at else 10), partition=0)
    assert producer.flush(30) == 0
    return source, output


def seed_for(local: LocalBroker, names, principal: str, per_partition: int, app_prefix: str, partitions=2):
    """Topics seeded over PLAINTEXT and the ACLs `principal` needs for a pipeline on them (the local
    broker enforces them): (source, output, app id, sent)."""
    source, output, sent = seed(local.bootstrap_servers, names, per_partition, partitions)
    app = names(app_prefix)
    grant_pipeline(local, principal, source, output, app)
    return source, output, app, sent


def grant_pipeline(
    local: LocalBroker,
    principal: str,
    source: str,
    output: str,
    app: str,
    output_operations: tuple[str, ...] = ("ALL",),
    transactional_ids: bool = True,
) -> None:
    """The ACLs a pipeline's principal needs on the local broker (which enforces them): its topics, its
    app's changelogs, groups and transactional ids, Spark's source groups, idempotent writes.
    `output_operations`: what it may do with the output topic (AclOperation names); `transactional_ids`:
    whether it may use the app's transactional ids."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    def allow(rtype, name, op, pattern=ResourcePatternType.LITERAL):
        return AclBinding(rtype, name, pattern, principal, "*", op, AclPermissionType.ALLOW)

    acls = [
        allow(ResourceType.TOPIC, source, AclOperation.ALL),
        *(allow(ResourceType.TOPIC, output, AclOperation[op]) for op in output_operations),
        allow(ResourceType.TOPIC, app, AclOperation.ALL, ResourcePatternType.PREFIXED),
        allow(ResourceType.GROUP, app, AclOperation.ALL, ResourcePatternType.PREFIXED),
        allow(ResourceType.GROUP, "spark-kafka-source", AclOperation.ALL, ResourcePatternType.PREFIXED),
        allow(ResourceType.BROKER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE),
    ]
    if transactional_ids:
        acls.append(allow(ResourceType.TRANSACTIONAL_ID, app, AclOperation.ALL, ResourcePatternType.PREFIXED))
    admin = AdminClient({"bootstrap.servers": local.bootstrap_servers})  # ANONYMOUS is a super user
    for future in admin.create_acls(acls).values():
        future.result(30)


def event_log_conf(tmp_path: Path) -> tuple[Path, Path]:
    """A SPARK_CONF_DIR whose spark-defaults write Spark's event log (plans, environment, every job)
    uncompressed into the returned directory, for a test to search."""
    conf_dir, events = tmp_path / "spark-conf", tmp_path / "events"
    conf_dir.mkdir()
    events.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        f"spark.eventLog.enabled true\nspark.eventLog.dir {events}\nspark.eventLog.compress false\n"
    )
    return conf_dir, events
