"""`eos.spark_session` decisions that need no JVM."""

from __future__ import annotations

import pyspark
import pytest
from pyspark import SparkContext

import eos


def test_a_local_connect_server_on_spark_3_5_is_refused_with_what_to_use(monkeypatch):
    monkeypatch.setattr(pyspark, "__version__", "3.5.7")
    monkeypatch.setattr(SparkContext, "_active_spark_context", None)
    with pytest.raises(
        RuntimeError, match=r"PySpark 4\.0 or later \(installed: 3\.5\.7\).*eos\.spark_session\(\)"
    ):
        eos.spark_session(remote="local")
