"""What Spark Connect costs `format("eos")` on the JVM data path per batch: the same pass-through query
(exactly_once) written with `df.writeStream.format("eos")` on a classic session, or (`--connect`) on a
local Spark Connect server with eos's jar, where each batch's driver checks run in the server's eos
process. Seeds its input topic once (`--seed`), then prints per run the wall seconds and Spark's
per-batch durations (`StreamingQueryProgress.durationMs`) summed over the batches.

    .venv/bin/python -m bench.probes.format_connect_batches --seed
    .venv/bin/python -m bench.probes.format_connect_batches
    .venv/bin/python -m bench.probes.format_connect_batches --connect
    .venv/bin/python -m bench.probes.format_connect_batches --ways format,foreachBatch

Needs a running broker (`make broker-up`). Run each in a process of its own: a process is either a
classic driver or a Connect client.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid

import eos
from eos import testing

TOPIC = "probe-format-connect-in"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--records", type=int, default=2_000_000, help="in all, over 4 partitions")
    parser.add_argument("--batch", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--connect", action="store_true")
    parser.add_argument(
        "--ways", default="format", help="comma list: format, foreachBatch (the same query, run interleaved)"
    )
    parser.add_argument("--seed", action="store_true", help="create and fill the input topic, then stop")
    args = parser.parse_args()
    if args.seed:
        from confluent_kafka import Producer

        testing.create_topic(args.bootstrap, TOPIC, 4)
        producer = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 50})
        value = b"x" * 100
        for i in range(args.records):
            producer.produce(TOPIC, value, str(i % 1000).encode(), partition=i % 4)
            if i % 100_000 == 0:
                producer.flush()
        producer.flush()
        return
    spark = eos.spark_session("probe-format-connect", remote="local" if args.connect else None)
    mode = "connect" if args.connect else "classic"
    ways = args.ways.split(",")
    for run in range(args.runs):
        for way in ways if run % 2 == 0 else reversed(ways):  # interleaved, the order alternating
            out, app = f"probe-out-{uuid.uuid4().hex[:6]}", f"probe-{uuid.uuid4().hex[:6]}"
            testing.create_topic(args.bootstrap, out, 4)
            config = eos.Config(
                bootstrap_servers=args.bootstrap, app_id=app, output_topic=out, commit_every=args.batch
            )
            writer = eos.read_stream(spark, config, [TOPIC], maxOffsetsPerTrigger=args.batch).writeStream
            checkpoint = f"/tmp/probe-format-connect/{app}"
            if way == "foreachBatch":  # the same query through eos.sink: the JVM data path, no provider
                writer = writer.foreachBatch(eos.sink(config)).option("checkpointLocation", checkpoint)
            else:
                options = {
                    "kafka.bootstrap.servers": args.bootstrap,
                    "topic": out,
                    "eos.app.id": app,
                    "eos.processing.guarantee": "exactly_once",
                    "eos.commit.every": str(args.batch),
                    "checkpointLocation": checkpoint,
                }
                writer = writer.format("eos")
                for key, value in options.items():
                    writer = writer.option(key, value)
            started = time.perf_counter()
            query = writer.trigger(availableNow=True).start()
            query.awaitTermination()
            seconds = time.perf_counter() - started
            batches = [p for p in query.recentProgress if p["durationMs"].get("addBatch")]
            keys = sorted({k for p in batches for k in p["durationMs"]})
            summed = {k: sum(p["durationMs"].get(k, 0) for p in batches) for k in keys}
            print(
                f"{mode} {way} run {run}: {seconds:.2f} s, {len(batches)} batches,"
                f" ms summed: {json.dumps(summed)}",
                flush=True,
            )


if __name__ == "__main__":
    main()
