"""Spark entry points: a local session with the Kafka connector, and the read_committed Kafka source."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from eos import _offsets
from eos._cache import spark_jars_dir
from eos._clients import spark_source_options
from eos._log import get_logger
from eos.config import Config

#: `local[*]` with up to 4 attempts per task, as a cluster has by default (plain `local[*]` has 1).
DEFAULT_MASTER = "local[*, 4]"


def spark_session(app_name: str = "eos", master: str | None = None, conf: Mapping[str, str] | None = None):
    """A local SparkSession with Spark's Kafka connector on `spark.jars`.

    The jars come from `make setup` (`$EOS_CACHE/spark-jars`); without them, Spark resolves the
    connector from Maven itself (`spark.jars.packages`). On a cluster, keep using `--packages`.
    """
    import pyspark
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master or os.environ.get("EOS_SPARK_MASTER", DEFAULT_MASTER))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(2 * (os.cpu_count() or 2)))
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .config("spark.python.worker.reuse", "true")
    )
    jars = sorted(spark_jars_dir().glob("*.jar"))
    if jars:
        builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
    else:
        builder = builder.config(
            "spark.jars.packages", f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"
        )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("EOS_SPARK_LOG_LEVEL", "WARN"))
    return spark


def starting_offsets(config: Config, topics: Sequence[str]) -> str:
    """Spark's `startingOffsets`: the group's committed offsets where it has them (Kafka is the source
    of truth, so a lost Spark checkpoint does not reprocess committed input), else the configured default."""
    counts = _offsets.require_topics(config, topics, "input")
    tps = [(t, p) for t in topics for p in range(counts[t])]
    committed = _offsets.committed(config, tps)
    if all(v is None for v in committed.values()):
        return config.starting_offsets
    default = -2 if config.starting_offsets == "earliest" else -1
    spec: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in committed.items():
        spec.setdefault(topic, {})[str(partition)] = default if offset is None else offset
    return json.dumps(spec, sort_keys=True)


def read_stream(spark, config: Config, topics: Sequence[str], **options: Any):
    """`spark.readStream` from Kafka with `kafka.isolation.level=read_committed` and headers included.

    Extra keyword arguments are Spark Kafka source options (`maxOffsetsPerTrigger`, `minPartitions`, ...).
    `startingOffsets` applies only when the query's checkpoint is new; Spark resumes from the checkpoint
    otherwise, and eos skips whatever the group has already committed.
    """
    start = starting_offsets(config, topics)
    get_logger(app_id=config.app_id).info("reading stream", topics=list(topics), starting_offsets=start)
    reader = spark.readStream.format("kafka")
    all_options = {
        **spark_source_options(config),
        "subscribe": ",".join(topics),
        "startingOffsets": start,
        "includeHeaders": "true",
        **{k: str(v) for k, v in options.items()},
        "kafka.isolation.level": "read_committed",
    }
    for key, value in all_options.items():
        reader = reader.option(key, value)
    return reader.load()
