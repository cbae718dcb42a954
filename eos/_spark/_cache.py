"""Where the fetched jars and the local broker's files live, and which connector jars fit the
installed Spark.

`make setup` fills it; `EOS_CACHE` moves it (the default is `.cache` beside the `eos` package,
which is the checkout's root for an editable install). Spark's Kafka connector is fetched per Spark
version (`spark-jars/<version>/`), built for that version's Scala: 2.12 for Spark 3.5, 2.13 for 4.x.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    env = os.environ.get("EOS_CACHE")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / ".cache"  # beside the eos package


def kafka_libs() -> Path:
    """The broker's jars: `make setup`'s (the default Kafka of docker/maven/broker-pom.xml), or with
    `EOS_BROKER_VERSION` set, those `make matrix` fetched for that version. (Not `EOS_KAFKA_*`: those are
    client settings, `eos.Config.from_env`.)"""
    version = os.environ.get("EOS_BROKER_VERSION")
    return cache_dir() / "kafka" / version / "libs" if version else cache_dir() / "kafka" / "libs"


def installed_spark() -> str:
    import pyspark

    return pyspark.__version__


def scala_binary(spark_version: str) -> str:
    """The Scala line Spark's own Maven artifacts are built for."""
    return "2.12" if int(spark_version.split(".")[0]) < 4 else "2.13"


def connector_package(spark_version: str) -> str:
    """Spark's Kafka connector as `spark.jars.packages` / `--packages` names it."""
    return f"org.apache.spark:spark-sql-kafka-0-10_{scala_binary(spark_version)}:{spark_version}"


def spark_jars_dir(spark_version: str | None = None) -> Path:
    """The connector jars `make setup` fetched for `spark_version` (default: the installed PySpark)."""
    return cache_dir() / "spark-jars" / (spark_version or installed_spark())


def connector_jars(spark_version: str | None = None) -> list[Path]:
    """The jars in `spark_jars_dir(spark_version)`, in order; none where `make setup` fetched none."""
    return sorted(spark_jars_dir(spark_version).glob("*.jar"))


def maven_args() -> str:
    """The Maven properties `make setup` fetches the installed Spark's connector with."""
    version = installed_spark()
    scala = scala_binary(version)
    return f"-Dspark.version={version} -Dscala.binary={scala} -DoutputDirectory={spark_jars_dir(version)}"
