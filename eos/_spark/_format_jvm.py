"""`format("eos")` on the JVM data path (classic Spark 4.0+).

With eos's jar on Spark's class path, Spark resolves `format("eos")` to the JVM class `eos.DefaultSource`
(eos/_spark/jvm/DefaultSource.java) before any Python data source, and `eos.register` registers eos's
Python data source as "eos-python" for it to hand queries to. A stream the JVM writer can write (the
pass-through sink: `_jvm_writer.ineligible`) is not handed over: Spark gives it a sink whose batches
come here, to the foreachBatch sink (`eos.sink.Sink`), which writes them through the JVM writer. Its
rows never enter Python, and it pays none of the Python data source's workers.

Each batch is appended to the query's ledger, as the Python data source's commit does, so that
`eos ledger show` and `eos.MetricsListener` read both routes alike.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from eos._core._spec import Functions
from eos._log import get_logger
from eos._spark import _jvm_writer, _ledger
from eos._spark._datasource import Settings, settings_of
from eos.config import Config

#: the class Spark resolves format("eos") to, and the name eos's Python data source then takes
CLASS = "eos.DefaultSource"
PYTHON_NAME = "eos-python"


class Router:
    """eos's answer to `eos.DefaultSource`: which route a stream takes, and its batches. One per JVM:
    the classic driver's (`route`), or a Spark Connect server's (`eos._format_server`)."""

    def __init__(self, sc: Any, sink: Callable[[Config], Any]) -> None:
        self.sc = sc
        self.sink = sink  # eos.sink.Sink (a layer above this one)

    def route(self, functions: str | None, options: Mapping[str, str]) -> str:
        """`functions`: the session's FUNCTIONS conf (`registered`)."""
        if functions is None:  # "eos" registered by no eos in this session: its own data source
            return "python"
        try:
            config = settings_of(dict(options)).config
        except Exception:  # noqa: BLE001 - the Python data source raises it, naming the option
            return "python"
        why = "data_path is 'python'" if config.data_path == "python" else None
        why = why or functions or _jvm_writer.ineligible(config, Functions())
        if why is not None:
            get_logger("eos.sink", app_id=config.app_id).info(
                'format("eos") takes the Python data source', reason=why
            )
            return "python"
        return "jvm"

    def batches(self, options: Mapping[str, str]) -> Batches:
        settings = settings_of(dict(options))
        return Batches(self.sc, settings, self.sink(settings.config))

    class Java:
        implements = ["eos.DefaultSource$Router"]


class Batches:
    """A stream's foreachBatch sink, called by Spark's streaming thread for each batch, and its ledger."""

    def __init__(self, sc: Any, settings: Settings, sink: Any) -> None:
        self.sc = sc
        self.settings = settings
        self.sink = sink

    def call(self, jdf: Any, batch_id: int, query: str | None) -> None:
        from pyspark.sql import DataFrame, SparkSession

        session = SparkSession(self.sc, jdf.sparkSession())
        try:
            self.sink(DataFrame(jdf, session), batch_id)
        except BaseException:
            self._record(batch_id, query, "failed", (), "jvm" if self.sink._jvm else "python")
            raise
        summary = self.sink.last  # every batch the sink wrote has one
        self._record(batch_id, query, "committed", summary.per_partition, summary.data_path)

    def _record(self, batch_id: int, query: str | None, outcome: str, partitions, data_path: str) -> None:
        """The batch in the ledger, as the Python data source's commit (or abort) writes it, with the
        path that wrote it (the foreachBatch sink's: a batch whose lineage it cannot read is written in
        Python); its tasks are not told apart (a failed attempt's figures are not known)."""
        rows = [{"task": None, "attempt": None, **stats} for stats in partitions]
        _ledger.record(  # the batch's log event is the sink's own ("batch written")
            self.settings.ledger,
            self.settings.retain,
            batch_id,
            self.settings.config,
            outcome,
            query,
            rows,
            tasks_failed=0 if outcome == "committed" else None,
            data_path=data_path,
        )

    class Java:
        implements = ["eos.DefaultSource$Batches"]


_routers: dict[Any, Router] = {}  # by SparkContext: one router per driver JVM
_routers_lock = threading.Lock()


#: the session conf `eos.DefaultSource` reads (its FUNCTIONS)
FUNCTIONS = "spark.eos.format.functions"


def registered(spark: Any, functions: Functions) -> None:
    """Tell `eos.DefaultSource` that `spark` registered "eos" with `functions` (a classic or a Spark
    Connect session): "" where its streams may take the JVM data path, else why they do not."""
    try:
        spark.conf.set(FUNCTIONS, _jvm_writer.functions_ineligible(functions) or "")
    except Exception as exc:  # noqa: BLE001 - a platform that refuses session settings: streams stay Python
        get_logger("eos.session").warning(
            'format("eos") stays on the Python data source', reason=f"{FUNCTIONS} cannot be set: {exc}"
        )


def route(spark: Any, functions: Functions, sink: Callable[[Config], Any]) -> bool:
    """Whether Spark resolves `format("eos")` to `eos.DefaultSource` in classic session `spark` (eos's
    jar on the class path Spark looks data sources up in; added there where it is not yet): if so, the
    driver's streams are routed by this process from now on, a JVM-route stream's batches written by
    `sink(config)`."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None or not _loadable(spark):
        return False
    with _routers_lock:
        if spark.sparkContext not in _routers:
            serve(spark.sparkContext, sink, jvm.eos.DefaultSource.route)
    registered(spark, functions)
    return True


def serve(sc: Any, sink: Callable[[Config], Any], register: Callable[[Router], None]) -> Router:
    """This process's Router for the JVM of `sc`, handed to `register` (a Py4J callback)."""
    from pyspark.java_gateway import ensure_callback_server_started

    ensure_callback_server_started(sc._gateway)
    router = _routers[sc] = Router(sc, sink)
    register(router)
    return router


def _loadable(spark: Any) -> bool:
    """Whether Spark's data source lookup finds `eos.DefaultSource`: the jar is put on the driver's
    class loader where Spark's launcher left one that takes more (PySpark's own driver)."""
    from eos._spark._affinity import _jar_path, _Jvm, _loads

    jvm = spark._jvm
    loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
    if _loads(loader, CLASS):
        return True
    jar = _jar_path()
    if jar is None or _Jvm.apart(spark.sparkContext):  # stays the Python data source until a restart
        return False
    try:  # Spark's MutableURLClassLoader (spark-submit's, PySpark's driver's) takes more jars
        loader.addURL(jvm.java.io.File(str(jar)).toURI().toURL())
    except Exception:  # noqa: BLE001 - another loader (an embedding application's): "eos" stays Python
        return False
    return _loads(loader, CLASS)
