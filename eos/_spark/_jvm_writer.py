"""The JVM data path (eos/_spark/jvm/PassThrough.java): a pass-through batch's rows written by the JVM's
Kafka client in the executors, never entering Python. The driver hands the batch's plan to the writer
through Py4J, as the placement classes are handed theirs (`_affinity._Jvm`), and collects the same stats
rows the Python tasks return. Classic sessions only: a Connect session has no JVM on this side."""

from __future__ import annotations

import json
from typing import Any

from eos._core._arrow import Layout
from eos._core._stats import STATS_DDL
from eos._kafka import _java
from eos._spark._affinity import _Jvm
from eos.config import Config

_CLASS = "eos.spark.PassThrough"


def available(session: Any) -> bool:
    """Whether `session` can run the JVM writer (classic, the jar found)."""
    return _Jvm.of(session) is not None


def write(selected: Any, config: Config, batch_id: int, layout: Layout) -> list[dict[str, Any]]:
    """`selected` (one Spark partition per input partition, as the source read them) written by the JVM
    writer; the stats rows, one per input partition."""
    from pyspark.sql import DataFrame

    session = selected.sparkSession
    jvm = _Jvm.of(session)
    if jvm is None:
        raise RuntimeError("the JVM writer needs a classic session and eos's jar")
    fields = {f.name: (i, f.dataType.simpleString()) for i, f in enumerate(selected.schema.fields)}
    names = {
        "key": layout.key,
        "value": layout.value,
        "headers": layout.headers,
        "topic": layout.topic,
        "partition": layout.partition,
        "offset": layout.offset,
    }
    columns = {role: fields[name][0] for role, name in names.items() if name is not None}
    client = {k.removeprefix("kafka."): v for k, v in _java.spark_source_options(config).items()}
    spec = {
        "app_id": config.app_id,
        "output_topic": config.output_topic,
        "batch_id": batch_id,
        "commit_every": config.commit_every,
        "operation_timeout_ms": config.operation_timeout_ms,
        "accept_foreign_offsets": config.accept_foreign_offsets,
        "columns": columns,
        "key_is_string": layout.key is not None and fields[layout.key][1] == "string",
        "value_is_string": fields[layout.value][1] == "string",
        "client": client,
        "producer": {
            "client.id": f"eos-{config.app_id}",
            "linger.ms": "5",
            "enable.idempotence": "true",
            "transaction.timeout.ms": str(config.transaction_timeout_ms),
            "delivery.timeout.ms": str(config.transaction_timeout_ms),
        },
    }
    writer = jvm._new(_CLASS, json.dumps(spec))
    rows = selected._jdf.queryExecution().toRdd()
    stats = rows.toJavaRDD().mapPartitions(writer, True).rdd()
    schema = jvm.sc._jvm.org.apache.spark.sql.types.StructType.fromDDL(STATS_DDL)
    frame = DataFrame(session._jsparkSession.internalCreateDataFrame(stats, schema, False), session)
    return [row.asDict() for row in frame.collect()]
