"""A Spark Connect server with eos installed, in a process of its own, as a Connect-only client meets one:
started from the full PySpark (`eos.spark_session(remote="local")`: eos's plugin and jar on it), with the
token SPARK_CONNECT_AUTHENTICATE_TOKEN names.

    python connect_server_app.py PORT_FILE

Writes the port it listens on to PORT_FILE once it does, then serves until it is killed.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import eos


def main() -> None:
    port_file = Path(sys.argv[1])
    eos.spark_session("connect-server", remote="local")
    from pyspark import SparkContext

    port = SparkContext._active_spark_context.getConf().get("spark.connect.grpc.binding.port")
    partial = port_file.with_suffix(".partial")
    partial.write_text(port)
    os.replace(partial, port_file)  # the test never reads half a number
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
