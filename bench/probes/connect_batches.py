"""What Spark Connect costs the JVM data path per batch, the query's first batch apart: the same
pass-through query (exactly_once, `data_path="jvm"`) run through `foreachBatch(eos.sink(...))` on a
classic session and on a local Spark Connect server with eos's plugin in the same JVM, alternating,
each over the same input. Prints, per run, Spark's `addBatch` ms of the first batch and the median of
the others (`StreamingQueryProgress.durationMs`), and each batch's driver split (`BatchSummary.driver`:
the batch's columns, the topics, the lineage, the job).

    .venv/bin/python -m bench.probes.connect_batches [--bootstrap 127.0.0.1:9092] [--records 500000]
        [--batch 200000] [--runs 2]

`--records` per input partition (4 partitions). Needs a running broker (`make broker-up`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import uuid

import eos
from eos import testing


def _driver(summary: eos.BatchSummary) -> None:
    """Where the sink's own time on the driver went (under Connect: the server's foreachBatch worker,
    whose output a local server hands to this process's)."""
    print(f"  batch {summary.batch_id} driver ms {json.dumps(summary.driver)}", flush=True)


def run(session, config: eos.Config, source: str, batch: int) -> list[int]:
    """The `addBatch` ms of each batch of one query over all of `source`."""
    df = eos.read_stream(session, config, [source], maxOffsetsPerTrigger=batch)
    with tempfile.TemporaryDirectory() as checkpoint:
        query = (
            df.writeStream.foreachBatch(eos.sink(config, on_batch=_driver))
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        progress = [json.loads(p.json) for p in query.recentProgress]
    return [p["durationMs"]["addBatch"] for p in progress if "addBatch" in p["durationMs"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--batch", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    connect = eos.spark_session("eos-probe", remote="local")  # first: the classic one hosts its server
    classic = eos.spark_session("eos-probe")
    tag = uuid.uuid4().hex[:8]
    source = f"probe-in-{tag}"
    testing.create_topic(args.bootstrap, source, 4)
    testing.produce_sequence(args.bootstrap, source, 4, args.records)
    for n in range(args.runs):
        for kind, session in (("connect", connect), ("classic", classic)):
            output = f"probe-out-{kind}-{n}-{tag}"
            testing.create_topic(args.bootstrap, output, 4)
            config = eos.Config(
                bootstrap_servers=args.bootstrap,
                app_id=f"probe-{kind}-{n}-{tag}",
                output_topic=output,
                processing_guarantee="exactly_once",
                data_path="jvm",
            )
            ms = run(session, config, source, args.batch)
            others = statistics.median(ms[1:])
            print(f"run {n} {kind}: {len(ms)} batches, first {ms[0]} ms, the others' median {others} ms")
    connect.stop()
    classic.stop()


if __name__ == "__main__":
    main()
