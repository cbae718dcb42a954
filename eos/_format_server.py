"""The Python process a Spark Connect server's `format("eos")` streams are routed by.

A classic driver's `eos.register` routes them from the driver's own Python process. A Connect server has
none, so its `eos.DefaultSource` starts this module (eos/_spark/jvm/ServerDriver.java) at the first
stream of a session whose client registered eos. It attaches to the server's JVM over Py4J, as
spark-submit attaches a Python application, and registers a Router: each JVM-route batch is then
written by the foreachBatch sink here, through the JVM writer, with no Python process of its own.
"""

from __future__ import annotations

import os
import signal
import sys


def main() -> None:
    # a terminal's Ctrl-C is the server's to handle: PySpark's handler here would cancel all its jobs
    os.setsid()
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    from eos._spark import _format_jvm
    from eos.sink import Sink

    class Attached(SparkContext):
        """PySpark's context over the server's own, which nothing here may stop (PySpark stops a
        context whose start failed, and the JVM context with it)."""

        def stop(self) -> None:
            server = getattr(self, "_accumulatorServer", None)
            if server is not None:
                server.shutdown()

    gateway = launch_gateway()  # the server's, from PYSPARK_GATEWAY_PORT and PYSPARK_GATEWAY_SECRET
    jvm = gateway.jvm
    jsc = jvm.org.apache.spark.api.java.JavaSparkContext.fromSparkContext(jvm.eos.ServerDriver.context())
    sc = Attached(gateway=gateway, jsc=jsc, conf=SparkConf(_jconf=jsc.getConf()))
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # the server's default session, wrapped first: PySpark makes the first session it wraps the JVM's
    # default, which a batch's (a client's) must not become
    SparkSession(sc)
    token = os.environ.get("EOS_SERVER_DRIVER_TOKEN")
    _format_jvm.serve(sc, Sink, lambda router: jvm.eos.ServerDriver.registered(token, router))
    sys.stdin.buffer.read()  # until the server's JVM exits
    os._exit(0)  # Py4J's threads, the server gone, would keep a normal exit waiting


if __name__ == "__main__":
    main()
