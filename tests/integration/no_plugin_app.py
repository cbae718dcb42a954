"""A pass-through query through `foreachBatch(eos.sink(...))` under a Spark Connect server started
without eos's plugin (PySpark's own local server, `builder.remote("local")`): what test_jvm_writer.py
runs in its own process (a process holds one Spark Connect server).

    python -m tests.integration.no_plugin_app BOOTSTRAP APP_ID INPUT OUTPUT CHECKPOINT SUMMARIES DATA_PATH
"""

from __future__ import annotations

import sys
from functools import partial

from pyspark.sql import SparkSession

import eos
from eos._spark._cache import connector_jars
from examples.pipeline import append_summary


def main() -> None:
    bootstrap, app_id, source, output, checkpoint, summaries, data_path = sys.argv[1:8]
    jars = ",".join(str(j) for j in connector_jars())
    spark = SparkSession.builder.remote("local[2]").config("spark.jars", jars).getOrCreate()
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=app_id,
        output_topic=output,
        processing_guarantee="exactly_once",
        data_path=data_path,
    )
    sink = eos.sink(config, on_batch=partial(append_summary, summaries))
    query = (
        eos.read_stream(spark, config, [source])
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
