"""A batch job's driver for test_batch_jobs: writes a Parquet table to Kafka with `eos.write`, one
Spark task at a time (local[1]) so that its parts commit one after another.

    python -m tests.integration.batch_job_app BOOTSTRAP APP_ID OUTPUT TABLE JOB_ID PARTS

Prints the job's BatchSummary as one JSON line; exits 3 on NondeterministicBatchError.
"""

from __future__ import annotations

import json
import sys

import eos
from tests.support.jobs import slow_copy


def main() -> None:
    bootstrap, app_id, output, table, job_id, parts = sys.argv[1:7]
    spark = eos.spark_session("batch-job", master="local[1]")
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=app_id,
        output_topic=output,
        processing_guarantee="exactly_once",
        parts=int(parts),
    )
    try:
        summary = eos.write(spark.read.parquet(table), config, job_id, slow_copy)
    except eos.NondeterministicBatchError as exc:
        print(json.dumps({"error": "NondeterministicBatchError", "message": str(exc)}), flush=True)
        sys.exit(3)
    print(json.dumps(summary.as_dict(), default=str), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
