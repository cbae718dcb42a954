"""`eos.spark_session(conf=...)`: the user's settings over eos's, except the jar lists, which add up."""

from __future__ import annotations

from eos.session import _merged


def test_the_users_jars_are_added_to_the_connectors_and_other_keys_replace_eoss():
    eos_own = {"spark.jars": "/c/kafka.jar", "spark.ui.enabled": "false"}
    conf = {"spark.jars": "/d/delta.jar", "spark.ui.enabled": "true", "spark.sql.extensions": "X"}
    assert _merged(eos_own, conf) == {
        "spark.jars": "/c/kafka.jar,/d/delta.jar",
        "spark.ui.enabled": "true",
        "spark.sql.extensions": "X",
    }
    # a wheel without fetched jars: the connector comes from spark.jars.packages, so do Delta's
    packages = {"spark.jars.packages": "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0"}
    merged = _merged(packages, {"spark.jars.packages": "io.delta:delta-spark_2.13:4.0.0"})
    assert merged["spark.jars.packages"].split(",") == [
        "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0",
        "io.delta:delta-spark_2.13:4.0.0",
    ]
    assert _merged({}, {"spark.jars": "/d/delta.jar"}) == {"spark.jars": "/d/delta.jar"}
    assert _merged(eos_own, {"spark.jars": ""}) == {**eos_own, "spark.jars": "/c/kafka.jar"}
