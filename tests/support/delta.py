"""Delta Lake for the tests that stream a Delta table into Kafka (tests/integration/test_delta.py): the
Delta release built for the installed Spark, its jars (`make long-test` fetches them with
docker/maven/delta-pom.xml) and the session settings that load it.

    python -m tests.support.delta maven-args   # the Maven properties the Makefile fetches with
"""

from __future__ import annotations

import sys
from pathlib import Path

from eos._spark._cache import cache_dir, installed_spark, scala_binary

#: Spark's minor version -> the Delta release built against it (Delta's own compatibility table)
RELEASES = {"3.5": "3.3.2", "4.0": "4.0.0", "4.1": "4.3.1", "4.2": "4.4.0"}

EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def release(spark_version: str | None = None) -> str:
    spark_version = spark_version or installed_spark()
    minor = ".".join(spark_version.split(".")[:2])
    if minor not in RELEASES:
        raise LookupError(f"no Delta release is known here for Spark {spark_version}: add it to RELEASES")
    return RELEASES[minor]


def jars_dir(spark_version: str | None = None) -> Path:
    return cache_dir() / "delta-jars" / (spark_version or installed_spark())


def maven_args() -> str:
    version = installed_spark()
    return (
        f"-Ddelta.version={release(version)} -Dscala.binary={scala_binary(version)}"
        f" -DoutputDirectory={jars_dir(version)}"
    )


def jars() -> list[Path]:
    """The fetched jars; AssertionError naming the make target where there are none."""
    found = sorted(jars_dir().glob("*.jar"))
    assert found, f"no Delta jars in {jars_dir()}: `make long-test` fetches them (docker/maven/delta-pom.xml)"
    return found


def spark_conf() -> dict[str, str]:
    """Session settings that load Delta beside Spark's Kafka connector (eos.spark_session adds its own
    jars to these)."""
    return {
        "spark.jars": ",".join(str(j) for j in jars()),
        "spark.sql.extensions": EXTENSION,
        "spark.sql.catalog.spark_catalog": CATALOG,
    }


if __name__ == "__main__":
    if sys.argv[1:] != ["maven-args"]:
        sys.exit("usage: python -m tests.support.delta maven-args")
    print(maven_args())
