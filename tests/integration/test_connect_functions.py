"""`pyspark.sql.functions` on the session from `eos.spark_session(remote="local")` (issue 39, point 3):
the process is a Spark Connect client, as after PySpark's own `SparkSession.builder.remote("local")`,
so `F.col` and friends build Connect Columns that the Connect session's DataFrames take."""

from __future__ import annotations

from pyspark.sql import functions as F


def test_functions_build_connect_columns_on_the_local_connect_session(connect):
    assert type(F.col("key")).__module__.startswith("pyspark.sql.connect."), type(F.col("key"))
    df = connect.createDataFrame([("a", 1), ("b", 2), ("a", 3)], ["key", "v"])

    counts = df.groupBy(F.col("key")).count().collect()
    assert sorted((r["key"], r["count"]) for r in counts) == [("a", 2), ("b", 1)]

    rows = df.select(F.col("key"), F.lit(10).alias("ten"), F.expr("v * 2").alias("twice")).collect()
    assert sorted(tuple(r) for r in rows) == [("a", 10, 2), ("a", 10, 6), ("b", 10, 4)]

    sums = df.groupBy("key").agg(F.sum("v").alias("total")).orderBy("key").collect()
    assert [(r["key"], r["total"]) for r in sums] == [("a", 4), ("b", 2)]


def test_the_classic_session_beside_it_keeps_classic_functions(spark, connect):
    """`eos.spark_session()` after `remote="local"` is the classic session of the same JVM. PySpark's
    Connect switch is one per process: conftest's `pyspark_api_mode` turns it off for a test that uses
    the classic session, and `F` builds classic Columns again."""
    assert type(spark).__module__ == "pyspark.sql.session", type(spark)
    assert type(F.col("key")).__module__ == "pyspark.sql.classic.column", type(F.col("key"))
    df = spark.createDataFrame([("a", 1), ("b", 2), ("a", 3)], ["key", "v"])
    counts = df.groupBy(F.col("key")).agg(F.sum("v").alias("total"), F.lit(1).alias("one")).collect()
    assert sorted(tuple(r) for r in counts) == [("a", 4, 1), ("b", 2, 1)]
