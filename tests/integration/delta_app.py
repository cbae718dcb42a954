"""Delta Lake processes for test_delta (each a Spark JVM with Delta's jars, which the tests' own session
lacks):

    python -m tests.integration.delta_app seed TABLE VERSIONS PER_KEY [SPREAD]
        appends VERSIONS versions to the Delta table at TABLE, each one file of 4 x PER_KEY rows (value
        `testing.seq_value("delta", p, seq)`, seq rising across versions; key "k<p>", or with SPREAD
        "k<p>-<seq % SPREAD>": more keys, so that a batch job's every part gets rows);
    python -m tests.integration.delta_app write BOOTSTRAP APP_ID OUTPUT TABLE VERSION JOB_ID PARTS
        writes version VERSION of the table to OUTPUT with `eos.write`, one Spark task at a time
        (local[1], a millisecond per row) so that its parts commit one after another; prints the job's
        BatchSummary as one JSON line.
"""

from __future__ import annotations

import json
import sys

import eos
from eos import testing
from tests.support import delta
from tests.support.jobs import slow_copy

KEYS = 4


def rows(version: int, per_key: int, spread: int = 0) -> list[tuple[str, str]]:
    first = version * per_key
    return [
        (f"k{p}-{seq % spread}" if spread else f"k{p}", testing.seq_value("delta", p, seq).decode())
        for seq in range(first, first + per_key)
        for p in range(KEYS)
    ]


def seed(table: str, versions: int, per_key: int, spread: int = 0) -> None:
    spark = eos.spark_session("delta-seed", master="local[1]", conf=delta.spark_conf())
    for version in range(versions):
        df = spark.createDataFrame(rows(version, per_key, spread), "key STRING, value STRING").coalesce(1)
        df.write.format("delta").mode("append").save(table)
    spark.stop()


def write(
    bootstrap: str, app_id: str, output: str, table: str, version: int, job_id: str, parts: int
) -> None:
    spark = eos.spark_session("delta-job", master="local[1]", conf=delta.spark_conf())
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=app_id,
        output_topic=output,
        processing_guarantee="exactly_once",
        parts=parts,
    )
    df = spark.read.format("delta").option("versionAsOf", version).load(table)
    df = df.selectExpr("CAST(key AS BINARY) AS key", "CAST(value AS BINARY) AS value")
    summary = eos.write(df, config, job_id, slow_copy)
    print(json.dumps(summary.as_dict(), default=str), flush=True)
    spark.stop()


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "seed":
        seed(args[0], int(args[1]), int(args[2]), *(int(a) for a in args[3:4]))
    elif command == "write":
        write(args[0], args[1], args[2], args[3], int(args[4]), args[5], int(args[6]))
    else:
        sys.exit(__doc__)
