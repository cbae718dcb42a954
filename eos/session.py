"""Spark entry points: a local session with the Kafka connector, the read_committed Kafka source, and
the `format("eos")` data source (`register`)."""

from __future__ import annotations

import json
import os
import socket
import sys
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from eos._core._input import INPUT_COLUMN
from eos._core._spec import OnCommit, Process, ProcessBatch
from eos._kafka import _cluster, _offsets, _topics
from eos._kafka._java import spark_source_options
from eos._log import get_logger
from eos._spark import _flavour
from eos._spark._cache import connector_jars, connector_package
from eos.config import SPARK_OPTIONS_REDACTION_CONF, SPARK_REDACTION_REGEX, Config, widened_redaction_regex
from eos.errors import EosError
from eos.state import StoreSpec

#: `local[*]` with up to 4 attempts per task, as a cluster has by default (plain `local[*]` has 1).
DEFAULT_MASTER = "local[*, 4]"
_CONNECT_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"


def spark_session(
    app_name: str = "eos",
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    remote: str | None = None,
):
    """A SparkSession with Spark's Kafka connector: classic, or Spark Connect with `remote`.

    - `spark_session()`: a local classic session (`EOS_SPARK_MASTER` or `local[*, 4]`).
    - `spark_session(remote="local")` (or `"local[2]"`, ...): starts a Spark Connect server from the
      PySpark install, in this process's JVM, and returns a Connect session to it.
    - `spark_session(remote="sc://host:port")`: a Connect session to a running server (which must have
      the connector and eos installed, see docs/deploy.md). `SPARK_REMOTE` in the environment works as
      `remote`.

    Under `spark-submit` the session is the submitted job's: its `--master`, `--jars` and `--packages`
    apply. Elsewhere the connector jars for the installed PySpark come from `make setup`
    (`$EOS_CACHE/spark-jars/<version>`, Scala 2.12 for Spark 3.5, 2.13 for 4.x); without them, Spark
    resolves the same connector from Maven itself (`spark.jars.packages`).

    Parameters:

    - `app_name`: the session's `spark.app.name` (default "eos"); not used for a session to a running
      Connect server (`remote="sc://..."`).
    - `master`: the Spark master URL of a classic or `remote="local"` session. None (the default):
      `EOS_SPARK_MASTER` if set, else the one `spark-submit` gave, else `local[*, 4]`. Not used with
      `remote="sc://..."`, nor with `remote="local[2]"` and the like, whose master is that string.
    - `conf`: more Spark settings, applied after eos's own (`spark.ui.enabled=false`,
      `spark.sql.shuffle.partitions`, `spark.redaction.regex`, ...), so a key given here replaces eos's
      value (under `remote="local"`, the Connect server's plugin, address and token settings stay
      eos's), except `spark.jars` and `spark.jars.packages`: jars given there (Delta Lake's, say) are
      added to the connector's.
      For `remote="sc://..."` they are set on the Connect session.
    - `remote`: where to run Spark Connect (above); None (the default): `SPARK_REMOTE` if set, else a
      classic session.
    """
    remote = remote or os.environ.get("SPARK_REMOTE")
    _flavour.require(classic=remote is None or remote.startswith("local"))
    overlap = _flavour.overlapping()
    if overlap is not None:
        get_logger("eos.session").warning("pyspark installs overlap", why=overlap)
    import pyspark
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if remote is not None and not remote.startswith("local"):
        builder = SparkSession.builder.remote(remote)
        for key, value in (conf or {}).items():
            builder = builder.config(key, value)
        return _with_data_source(builder.getOrCreate())

    settings = {
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(2 * (os.cpu_count() or 2)),
        "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
        "spark.python.worker.reuse": "true",
        # Kafka options carry credentials into plans and event logs: hide every kind eos knows of.
        "spark.redaction.regex": SPARK_REDACTION_REGEX,
    }
    # Started by spark-submit (the JVM is already up, PySpark connects to it): its --master, --jars and
    # --packages apply, and overriding them here would turn a cluster job into a local one.
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    jars = connector_jars()
    if jars and not submitted:
        settings["spark.jars"] = ",".join(str(j) for j in jars)
    elif not submitted:
        settings["spark.jars.packages"] = connector_package(pyspark.__version__)
    master = master or os.environ.get("EOS_SPARK_MASTER") or (None if submitted else DEFAULT_MASTER)
    settings = _merged(settings, conf or {})
    if remote is not None:
        master = (master or DEFAULT_MASTER) if remote == "local" else remote
        return _local_connect(master, settings)
    builder = SparkSession.builder if master is None else SparkSession.builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    # After spark_session(remote="local") the process is in Connect mode (`_connect_mode`), where PySpark's
    # builder hands back the Connect session: the classic one of the same JVM is wanted here.
    connect_mode = os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
    try:
        spark = builder.getOrCreate()
    finally:
        if connect_mode is not None:
            os.environ["SPARK_CONNECT_MODE_ENABLED"] = connect_mode
    spark.sparkContext.setLogLevel(os.environ.get("EOS_SPARK_LOG_LEVEL", "WARN"))
    return _with_data_source(spark)


#: settings that list jars: a `conf` value is added to eos's (Spark's Kafka connector), not put in its place
_JAR_LISTS = ("spark.jars", "spark.jars.packages")


def _merged(settings: Mapping[str, str], conf: Mapping[str, str]) -> dict[str, str]:
    """eos's session settings with the user's `conf` over them, the user's jars beside eos's."""
    out = {**settings, **conf}
    for key in _JAR_LISTS:
        jars = ",".join(v for v in (settings.get(key), conf.get(key)) if v)
        if jars:
            out[key] = jars
    return out


def _with_data_source(spark):
    """`spark` with `format("eos")` registered, where its PySpark has Python data sources (4.0+)."""
    if _has_data_sources():
        register(spark)
    return spark


def _has_data_sources() -> bool:
    import pyspark

    return int(pyspark.__version__.split(".")[0]) >= 4


def free_port() -> int:
    """A loopback port nothing listens on now: the local Spark Connect server's (also the test
    support's brokers and registries)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _local_connect(master: str, settings: dict[str, str]):
    """Start a Spark Connect server in this process's JVM (on a free loopback port, with a token) and
    return a Connect session to it. The classic session that hosts the server stays the process's
    active classic session, so `spark_session()` afterwards returns it."""
    import pyspark
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if int(pyspark.__version__.split(".")[0]) < 4:
        # 3.5's wheel has no Connect server jar and no token authentication; not tested with eos.
        raise RuntimeError(
            'eos.spark_session(remote="local") starts a Spark Connect server from the PySpark install,'
            f" which needs PySpark 4.0 or later (installed: {pyspark.__version__}). On Spark 3.5 use the"
            " classic session, eos.spark_session()."
        )
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    active = SparkContext._active_spark_context
    if active is not None and active.getConf().get("spark.plugins", "").find(_CONNECT_PLUGIN) < 0:
        raise RuntimeError(
            "a classic SparkSession without the Spark Connect server already runs in this process:"
            " call eos.spark_session(remote=...) before eos.spark_session(), or stop that session first"
        )
    if active is None:
        port = free_port()
        token = os.environ.setdefault("SPARK_CONNECT_AUTHENTICATE_TOKEN", uuid.uuid4().hex)
        settings = {
            **settings,
            **_eos_plugin(settings),
            "spark.plugins": _CONNECT_PLUGIN,
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(port),
            "spark.connect.authenticate.token": token,
        }
        builder = SparkSession.builder.master(master)
        for key, value in settings.items():
            builder = builder.config(key, value)
        remote_env = os.environ.pop("SPARK_REMOTE", None)  # else PySpark's builder goes remote itself
        try:
            classic = builder.getOrCreate()
        finally:
            if remote_env is not None:
                os.environ["SPARK_REMOTE"] = remote_env
        classic.sparkContext.setLogLevel(os.environ.get("EOS_SPARK_LOG_LEVEL", "WARN"))
    port = SparkContext._active_spark_context.getConf().get("spark.connect.grpc.binding.port")
    connect = ConnectSession.builder.remote(f"sc://localhost:{port}").getOrCreate()
    _connect_mode()
    return _with_data_source(connect)


def _eos_plugin(settings: Mapping[str, str]) -> dict[str, str]:
    """The server's settings that run eos's plugin (the JVM data path under Connect, `eos._spark._server`):
    eos's jar beside the others, and its relation plugin beside any other; none without the jar."""
    from eos._spark import _server
    from eos._spark._affinity import _jar_path

    jar = _jar_path()
    if jar is None:
        return {}
    key = "spark.connect.extensions.relation.classes"
    jars = [j for j in settings.get("spark.jars", "").split(",") if j]
    plugins = [p for p in settings.get(key, "").split(",") if p]
    return {"spark.jars": ",".join([*jars, str(jar)]), key: ",".join([*plugins, _server.PLUGIN])}


def _connect_mode() -> None:
    """Make this process a Spark Connect client, as PySpark's own `builder.remote("local")` does once its
    server is up. `pyspark.sql.functions` (`F.col`, `F.lit`, ...) builds Connect Columns only when
    `pyspark.sql.utils.is_remote()`, i.e. with `SPARK_CONNECT_MODE_ENABLED` set; otherwise it builds
    classic ones, which the Connect session's DataFrames cannot take (`df.groupBy(F.col("key"))`:
    "TypeError: 'Column' object is not callable"). `SPARK_LOCAL_REMOTE`: the server's classic
    SparkContext lives in this process (PySpark refuses one in a Connect client otherwise), and stopping
    the Connect session stops it and the server, and leaves Connect mode (both variables go).

    The switch is one per process: classic DataFrames here get Connect Columns from `F` too and refuse
    them (NOT_COLUMN_OR_STR); column names and SQL strings (`selectExpr`) work with both."""
    os.environ["SPARK_LOCAL_REMOTE"] = "1"
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"


def starting_offsets(config: Config, topics: Sequence[str]) -> str:
    """Spark's `startingOffsets`: the group's committed offsets (Kafka is the source of truth, so a lost
    Spark checkpoint does not reprocess committed input). An input partition without one starts at its
    earliest or latest offset (`starting_offsets`), resolved here and committed for the group (stamped as
    eos's own): every batch then has a committed offset to check its rows against, the first too, which
    a sink that cannot regroup needs (`format("eos")`, `foreach_writer`: a task holding a later piece of
    a split partition looks for the input between the committed offset and its first row).

    Parameters:

    - `config`: the `eos.Config` whose brokers and `app_id` (the consumer group) are read, and whose
      `starting_offsets` ("earliest" or "latest") places a partition the group has no offset for.
    - `topics`: the input topics; every partition of each is included, and a missing topic raises
      TopicNotFoundError.
    """
    counts = _topics.require(config, topics, "input")
    tps = [(t, p) for t in topics for p in range(counts[t])]
    # Not require-stable: a transaction left open by a crashed driver would hold the answer back for up to
    # transaction.timeout.ms, and starting below an offset about to commit is safe (tasks skip those rows).
    committed = _offsets.committed(config, tps, stable=False)
    unstarted = [tp for tp, offset in committed.items() if offset is None]
    if unstarted:
        log = get_logger("eos.session", app_id=config.app_id)
        starts = _offsets.log_offsets(config, unstarted, config.starting_offsets == "latest", log)
        try:
            if starts:
                _offsets.commit_many(config, starts)
        except EosError as exc:  # an open transaction may carry offsets for them: its task settles it
            log.warning(
                "could not commit where new input partitions start", error=str(exc), partitions=len(starts)
            )
        committed.update(starts)
    default = -2 if config.starting_offsets == "earliest" else -1  # Spark's names for them
    spec: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in committed.items():
        spec.setdefault(topic, {})[str(partition)] = default if offset is None else offset
    return json.dumps(spec, sort_keys=True)


def read_stream(spark, config: Config, topics: Sequence[str], **options: Any):
    """`spark.readStream` from Kafka with `kafka.isolation.level=read_committed`.

    Extra keyword arguments are Spark Kafka source options (`maxOffsetsPerTrigger`, `minPartitions`,
    `includeHeaders`, ...). Headers are left out unless `includeHeaders="true"`, as in Spark: the
    `headers` column costs the JVM more than the rest of a row together when rows become Arrow batches
    (docs/design.md, "The headers column").
    `startingOffsets` applies only when the query's checkpoint is new; Spark resumes from the checkpoint
    otherwise, and eos skips whatever the group has already committed.

    Parameters:

    - `spark`: the SparkSession to read with (classic or Spark Connect).
    - `config`: the `eos.Config` of the app that writes the stream: its `bootstrap_servers` and shared
      `kafka` settings become the source's `kafka.*` options (SASL and TLS settings translated for
      Spark's Java client), and `startingOffsets` comes from its consumer group (`app_id`), as
      `eos.starting_offsets(config, topics)` gives it.
    - `topics`: the input topics, subscribed to (`subscribe`); each must exist.
    - `options`: Spark Kafka source options, each value passed as a string. They replace eos's options
      of the same name (`startingOffsets`, `subscribe`, a `kafka.*` option), except
      `kafka.isolation.level`, which stays `read_committed`.
    """
    start = starting_offsets(config, topics)
    log = get_logger("eos.session", app_id=config.app_id)
    log.info("reading stream", topics=list(topics), starting_offsets=start)
    _cluster.warn_offsets_retention(config, log)
    reader = spark.readStream.format("kafka")
    all_options = {
        **spark_source_options(config),
        "subscribe": ",".join(topics),
        "startingOffsets": start,
        **{k: str(v) for k, v in options.items()},
        "kafka.isolation.level": "read_committed",
    }
    for key, value in all_options.items():
        reader = reader.option(key, value)
    return with_input_column(reader.load())


def with_input_column(df):
    """`df`, as Spark's Kafka source loaded it, with the column `eos_input`: each row's input coordinates
    (struct of topic, partition, offset) as the source read them. Where eos cannot see which Kafka
    partition Spark read a row from (Spark Connect, `format("eos")`, `eos.foreach_writer`), it checks the
    row's `topic`, `partition` and `offset` against this column before writing or skipping anything, so
    that an overwritten column fails the query instead of losing input. `read_stream` adds it; call
    this right after `spark.readStream.format("kafka")...load()`, before the query changes any column."""
    if INPUT_COLUMN in df.columns:
        return df
    return df.selectExpr("*", f"struct(topic, partition, offset) AS {INPUT_COLUMN}")


def register(
    spark,
    name: str = "eos",
    process: Process | None = None,
    stores: Mapping[str, StoreSpec | str] | None = None,
    on_commit: OnCommit | None = None,
    *,
    process_batch: ProcessBatch | None = None,
    metrics_port: int | None = None,
) -> str:
    """Register the `format("eos")` data source with `spark` (classic or Spark Connect; PySpark 4.0+);
    returns its name. `eos.spark_session()` registers the pass-through one as "eos".

    `metrics_port`: serve the figures of `spark`'s `format("eos")` queries on this port from this
    process (under Spark Connect too: PySpark runs a session's listeners in the client), through an
    `eos.MetricsListener` added to `spark` (once per port; 0: recorded, not served).

    A sink with functions registers under a name of its own, the functions travelling with it:
    `eos.register(spark, "eos-counts", count, stores={"counts": "json"})`, then
    `df.writeStream.format("eos-counts")`. The arguments are `eos.sink`'s; settings are options
    (docs/guide/ways-in.md).

    The options carry credentials (`kafka.sasl.jaas.config`, `eos.schema.registry.basic.auth.user.info`,
    ...) into Spark's plans: `spark`'s `spark.sql.redaction.options.regex` is extended to hide them
    (`_hide_secret_options`).

    Parameters:

    - `spark`: the SparkSession (PySpark 4.0 or later) the data source is registered with.
    - `name`: the name queries give `format()`, default "eos". A sink with functions usually takes a
      name of its own, as above.
    - `process`: a function `process(row, state)` per input row, as `eos.sink`'s. None (the default):
      each row is itself the output.
    - `stores`: the state stores the functions may use, as `eos.sink`'s.
    - `on_commit`: called with an `eos.Commit` on the executor after each commit, as `eos.sink`'s.
    - `process_batch`: instead of `process` (not both), a function `process_batch(batch, state)` per
      Arrow record batch, as `eos.sink`'s.
    - `metrics_port`: as above. None (the default): no listener is added.
    """
    import pyspark

    if not _has_data_sources():
        raise RuntimeError(
            f'format("eos") is a Python data source, which needs PySpark 4.0 or later (installed:'
            f" {pyspark.__version__}); on Spark 3.5 use foreachBatch(eos.sink(config))"
        )
    from eos._spark import _format_jvm
    from eos._spark._datasource import source_class
    from eos._spark._preflight import functions
    from eos.sink import Sink

    _hide_secret_options(spark)
    fns = functions(process, process_batch, stores, on_commit)
    if name == "eos" and _format_jvm.route(spark, fns, Sink):  # Spark resolves "eos" to eos.DefaultSource
        spark.dataSource.register(source_class(_format_jvm.PYTHON_NAME, fns))
    else:
        try:
            spark.dataSource.register(source_class(name, fns))
        except Exception as exc:
            if name != "eos" or "DATA_SOURCE_ALREADY_EXISTS" not in str(exc):
                raise
            # a Spark Connect server with eos's jar: its eos.DefaultSource routes streams, the Python
            # data source as "eos-python"
            spark.dataSource.register(source_class(_format_jvm.PYTHON_NAME, fns))
            _format_jvm.registered(spark, fns)
    if metrics_port is not None:
        from eos._spark._listener import listen

        listen(spark, metrics_port)
    return name


def _hide_secret_options(spark) -> None:
    """Have `spark`'s plans (explain, a failed query's message, wherever Spark prints them) hide the value of
    every option that carries a secret, as on the sessions `spark_session` starts: Spark redacts an option
    whose key or value matches `spark.redaction.regex` (fixed at start; Spark's default misses
    `eos.schema.registry.basic.auth.user.info`, PEM keys, passphrases, ...) or the session's
    `spark.sql.redaction.options.regex`, which this extends with `SPARK_REDACTION_REGEX` (what the
    session's owner set stays: theirs or eos's matches). A session that refuses the conf (a locked-down
    platform) gets a warning, not an error."""
    try:
        current = spark.conf.get(SPARK_OPTIONS_REDACTION_CONF)
        widened = widened_redaction_regex(current)
        if widened != current:
            spark.conf.set(SPARK_OPTIONS_REDACTION_CONF, widened)
    except Exception as exc:  # noqa: BLE001 - whatever the session says, format("eos") still works
        get_logger("eos.session").warning(
            f"could not set {SPARK_OPTIONS_REDACTION_CONF}: Spark's plans, UI and event logs may show"
            ' secret-bearing format("eos") options; set it (or spark.redaction.regex) to'
            " eos.config.SPARK_REDACTION_REGEX yourself",
            error=f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}",
        )
