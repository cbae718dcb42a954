"""Which of Spark's own progress channels a foreachBatch sink can fill: a rate source, an `observe` on
the streaming DataFrame and one on a DataFrame the batch function derives and collects (as eos's sink
does with its tasks' stats), and what `StreamingQueryProgress` then holds. No Kafka.

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python -m bench.probes.progress_channels

PySpark 4.0.0 prints `observedMetrics` with the outer observation only and `sink.metrics` empty: the
reason eos pairs its figures with the progress in a listener (docs/guide/observability.md).
"""

from __future__ import annotations

import tempfile
import time


def main() -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.readStream.format("rate").option("rowsPerSecond", 50).load()

    def batch(batch_df, batch_id):
        inner = batch_df.mapInArrow(lambda batches: batches, batch_df.schema)
        inner.observe("inner", F.count(F.lit(1)).alias("rows")).collect()

    with tempfile.TemporaryDirectory() as checkpoint:
        query = (
            df.observe("outer", F.count(F.lit(1)).alias("rows"))
            .writeStream.foreachBatch(batch)
            .option("checkpointLocation", checkpoint)
            .start()
        )
        time.sleep(12)
        for progress in query.recentProgress[-3:]:
            print(
                f"batch {progress.batchId}: observedMetrics {progress.observedMetrics}"
                f" sink {progress.sink.description} metrics {progress.sink.metrics}"
            )
        query.stop()
    spark.stop()


if __name__ == "__main__":
    main()
