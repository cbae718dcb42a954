"""Does a stateful partition's task stay on the executor that holds its store? A per-row stateful count
(`process` with one store) on a Spark standalone cluster of 3 workers (one core and one executor each,
each executor with a state directory of its own, as on separate hosts), 8 input partitions, records
over `--keys` keys. Per batch and input partition: the executor its task ran on, and the state records
it restored. Phases: `seed` (every key written once, in large batches), `steady` (`--batches` small
batches), `lost` (one worker SIGKILLed: its executor and its stores gone), `back` (a new worker started
in its place). On a running broker (`make broker-up`).

    .venv/bin/python -m bench.probes.store_affinity [--bootstrap 127.0.0.1:9092] [--keys 1000000]
        [--batches 50] [--snapshots] [--no-affinity]

`--snapshots`: stores snapshotted after every batch into a directory the executors share, so a
partition that moves is rebuilt from its snapshot rather than its whole changelog. `--no-affinity`:
`task_affinity=False`, Spark's Kafka source places the tasks (as eos did before task affinity).
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

from confluent_kafka import Producer

import eos
from eos import testing
from tests.chaos.cluster import StandaloneCluster

PARTITIONS = 8


def _produce(bootstrap: str, topic: str, keys: Sequence[int], per_key: int = 1) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "enable.idempotence": True})
    for _ in range(per_key):
        for k in keys:
            key = b"k%d" % k
            while True:
                try:
                    producer.produce(topic, b"v", key, partition=k % PARTITIONS)
                    break
                except BufferError:
                    producer.poll(0.05)
    assert producer.flush(60) == 0


def count(row, state):
    counts = state.store("counts")
    n = counts.get(row.key, 0) + 1
    counts.put(row.key, n)
    return eos.Output(value=b"%d" % n, key=row.key)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--per-batch", type=int, default=8_000, help="records per steady batch")
    parser.add_argument("--snapshots", action="store_true")
    parser.add_argument("--no-affinity", action="store_true")
    args = parser.parse_args()
    from pyspark import cloudpickle

    import bench.probes.store_affinity as me

    cloudpickle.register_pickle_by_value(me)  # the executors cannot import bench/
    work = Path(tempfile.mkdtemp(prefix="eos-affinity-"))
    run = uuid.uuid4().hex[:6]
    source, output, app = f"aff-in-{run}", f"aff-out-{run}", f"aff-{run}"
    testing.create_topic(args.bootstrap, source, PARTITIONS)
    testing.create_topic(args.bootstrap, output, PARTITIONS)
    cluster = StandaloneCluster(work / "cluster", workers=3, cores_per_worker=1, memory_per_worker="2g")
    cluster.up()
    where, batches = work / "where.jsonl", work / "batches.jsonl"
    phase = {"name": "seed"}

    def on_commit(commit: eos.Commit) -> None:  # on the executor: its work directory names it
        with open(where, "a") as f:
            f.write(
                json.dumps(
                    {"batch": commit.batch_id, "partition": commit.partition, "executor": Path.cwd().name}
                )
                + "\n"
            )

    def on_batch(summary: eos.BatchSummary) -> None:
        with open(batches, "a") as f:
            for p in summary.per_partition:
                row = {"phase": phase["name"], "batch": summary.batch_id, "partition": p["partition"]}
                row |= {
                    "restored": p["restored"],
                    "from_snapshot": p["snapshots_restored"],
                    "in": p["records_in"],
                }
                f.write(json.dumps(row) + "\n")

    spark = eos.spark_session(
        "store-affinity", master=cluster.master_url, conf={"spark.executor.memory": "1g"}
    )
    config = eos.Config(
        bootstrap_servers=args.bootstrap,
        app_id=app,
        output_topic=output,
        processing_guarantee="exactly_once",
        state_dir="eos-state",  # relative: each executor's own work directory, as a host's own disk
        state_snapshot_location=str(work / "snapshots") if args.snapshots else None,
        state_snapshot_interval_ms=1,
        task_affinity=not args.no_affinity,
    )
    sink = eos.sink(config, process=count, stores={"counts": "json"}, on_commit=on_commit, on_batch=on_batch)
    checkpoint = str(work / "ckpt")

    def run_until_caught_up(max_offsets: int) -> None:
        df = eos.read_stream(spark, config, [source], maxOffsetsPerTrigger=max_offsets)
        q = (
            df.writeStream.foreachBatch(sink)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()

    t = time.time()
    _produce(args.bootstrap, source, range(args.keys))
    phase["name"] = "seed"
    run_until_caught_up(200_000)
    print(f"seed: {args.keys:,} keys in {time.time() - t:.0f}s", flush=True)
    steady = args.batches * args.per_batch
    for name, n in (("steady", steady), ("lost", steady // 2), ("back", steady // 2)):
        if name == "lost":
            cluster.kill_worker(cluster._procs[2])  # worker-1 (the master is _procs[0])
        if name == "back":
            cluster.start_worker(1)
            time.sleep(15)  # registered, and an executor launched on it
        _produce(args.bootstrap, source, random.Random(name).sample(range(args.keys), n))
        phase["name"] = name
        run_until_caught_up(args.per_batch)
    spark.stop()
    cluster.down()
    # What a read_committed consumer sees: every input record's count once, each key's counts 1, 2, ...
    sent = args.keys + 2 * steady
    records, hanging = testing.read_topic(
        args.bootstrap, output, marker=testing.write_markers(args.bootstrap, output)
    )
    counts: dict[bytes, list[int]] = defaultdict(list)
    for r in records:
        counts[r.key].append(int(r.value))
    wrong = sum(1 for seq in counts.values() if seq != list(range(1, len(seq) + 1)))
    verdict = {"sent": sent, "read": len(records), "hanging": hanging, "keys_with_wrong_counts": wrong}

    placed = {
        (r["batch"], r["partition"]): r["executor"] for r in map(json.loads, where.read_text().splitlines())
    }
    rows = [json.loads(line) for line in batches.read_text().splitlines()]
    report: dict[str, dict] = {}
    previous: dict[int, str] = {}
    for name in ("seed", "steady", "lost", "back"):
        mine = [r for r in rows if r["phase"] == name]
        moves, restored_by_batch = 0, defaultdict(int)
        for r in sorted(mine, key=lambda r: (r["batch"], r["partition"])):
            executor = placed.get((r["batch"], r["partition"]))
            if executor is not None:
                if previous.get(r["partition"]) not in (None, executor):
                    moves += 1
                previous[r["partition"]] = executor
            restored_by_batch[r["batch"]] += r["restored"]
        report[name] = {
            "batches": len(restored_by_batch),
            "partition_moves": moves,
            "restored_records": sum(restored_by_batch.values()),
            "batches_with_a_restore": sum(1 for v in restored_by_batch.values() if v),
            "from_snapshot": sum(r["from_snapshot"] for r in mine),
            "executors": dict(Counter(placed.get((r["batch"], r["partition"])) for r in mine)),
        }
    print(
        json.dumps(
            {"keys": args.keys, "snapshots": args.snapshots, "phases": report, "output": verdict}, indent=2
        )
    )


if __name__ == "__main__":
    main()
