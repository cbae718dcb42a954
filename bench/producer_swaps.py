"""How often a batch's tasks swap Python workers, and what the kept producers then cost, on a running
broker (`make broker-up`):

    .venv/bin/python -m bench.producer_swaps [--bootstrap 127.0.0.1:9092] [--records 25000]
        [--per-trigger 10000]

A stateless exactly_once query over 4 input partitions, local Spark; per batch, from its BatchSummary:
the producers tasks created and replaced, and each partition's init_transactions and currency check
(ms). A batch whose kept producers were all replaced is one whose tasks ran in the other worker than
the batch before (PySpark hands a task to the worker idle longest). docs/benchmarks.md quotes it.
"""

from __future__ import annotations

import argparse
import tempfile
import uuid

import eos
from eos import testing

PARTITIONS = 4


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--records", type=int, default=25_000, help="per input partition")
    parser.add_argument("--per-trigger", type=int, default=10_000, help="maxOffsetsPerTrigger")
    args = parser.parse_args()
    run = uuid.uuid4().hex[:6]
    source, output = f"swaps-in-{run}", f"swaps-out-{run}"
    for topic in (source, output):
        testing.create_topic(args.bootstrap, topic, PARTITIONS)
    testing.produce_sequence(args.bootstrap, source, PARTITIONS, args.records)
    config = eos.Config(
        bootstrap_servers=args.bootstrap,
        app_id=f"swaps-{run}",
        output_topic=output,
        processing_guarantee="exactly_once",
    )
    spark = eos.spark_session("producer-swaps")
    summaries: list[eos.BatchSummary] = []
    with tempfile.TemporaryDirectory() as checkpoint:
        query = (
            eos.read_stream(spark, config, [source], maxOffsetsPerTrigger=args.per_trigger)
            .writeStream.foreachBatch(eos.sink(config, on_batch=summaries.append))
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    print("batch  created  replaced  sink ms  init ms per partition          check ms per partition")
    for s in summaries:
        init = [round(1000 * p["init_seconds"], 1) for p in s.per_partition]
        check = [round(1000 * p["check_seconds"], 1) for p in s.per_partition]
        print(
            f"{s.batch_id:5}  {s.producers_created:7}  {s.producers_replaced:8}  {1000 * s.seconds:7.0f}"
            f"  {init!s:30}  {check}"
        )
    steady = summaries[1:]
    swapped = sum(1 for s in steady if s.producers_replaced == PARTITIONS)
    print(f"{swapped} of {len(steady)} batches after the first had every kept producer replaced")
    spark.stop()


if __name__ == "__main__":
    main()
