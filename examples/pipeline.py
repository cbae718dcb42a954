"""An eos pipeline: Kafka -> Spark Structured Streaming -> Kafka, written exactly once.

    python examples/pipeline.py --bootstrap B --app-id A --input IN --output OUT --checkpoint DIR
                                [--max-offsets N] [--min-partitions N] [--summaries FILE]
                                [--stateful | --stateful-batch] [--remote local|sc://host:port]
                                [--format-eos | --realtime SECONDS] [--trigger-seconds N]
                                [--aggregate count|window|rand [--parts N] | --files DIR
                                 | --delta TABLE --delta-jars JARS]
                                [--dead-letters TOPIC [--poison KEY,...]]

The processing guarantee is not an argument: it comes from EOS_PROCESSING_GUARANTEE (default
exactly_once), so a deployment switches it with no code change. `--stateful`
emits a running count per key with `process` (one row at a time), `--stateful-batch` the same with
`process_batch` (one Arrow batch at a time). `--remote` (or SPARK_REMOTE) runs the query through Spark
Connect. `--aggregate` writes an aggregation in input_mode "any": `count` the running count per key
(update mode), `window` the count per key and 10-second event-time window, the event time being the
input value's sequence number in seconds (append mode, watermark 0 s), `rand` the running count with
a `rand()` appended (not deterministic: a re-run of a batch fails). `--files DIR` reads the text files
of DIR (one per batch) instead of Kafka and writes each line, in input_mode "any"; `--delta TABLE` streams
the Delta Lake table at TABLE (its `key` and `value` columns, a file per batch) the same way, with
Delta's jars (`--delta-jars`, comma-separated) added to the session's. `--format-eos` writes
with `df.writeStream.format("eos")` instead of
`foreachBatch(eos.sink(...))`: the same protocol, its settings as options, its per-batch record the
ledger beside the checkpoint (`eos ledger show`) instead of --summaries. `--realtime S` runs the query in
Spark's real-time mode (4.1+, epochs of S seconds) through `foreach(eos.foreach_writer(...))`, until
killed; `--trigger-seconds N` a micro-batch every N seconds until killed (`make soak`). Each batch's
summary is appended
to --summaries as one JSON line (through `on_batch`, which also works where the sink runs on a Connect
server). `make demo` and the integration tests run this file as their driver process, so they can
SIGKILL it; the tests, `make bench` and the chaos pipeline import its `count_per_key` and
`count_per_key_batch`.

`--dead-letters TOPIC` sets on_error="dead_letter": a bad record goes to TOPIC, in the same transaction
as the outputs and offsets. `--poison KEYS` (with --stateful) makes some keys' records at even input
offsets bad, after their count was stored (the dead letter's transaction drops that write): `raise:K`
raises, `type:K` returns an int, `large:K` returns a value of 1 MB (more than the producer's
message.max.bytes takes by default), `schema:K` returns a str key where the key's schema is Avro bytes
(run with EOS_KEY_SERIALIZER=avro, EOS_KEY_SCHEMA='"bytes"' and EOS_SCHEMA_REGISTRY_URL).
"""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial

import attrs

import eos


def count_per_key(row, state):
    """`process` for --stateful: the running count of the row's key in its input partition, appended to
    the value as `#<count>` (what `eos.testing.expected_running_counts` recomputes from the input)."""
    counts = state.store("counts")
    n = counts.get(row.key, 0) + 1
    counts.put(row.key, n)
    return eos.Output(value=bytes(row.value) + b"#%d" % n, key=row.key)


def count_per_key_or_fail(poison: dict[bytes, str], row, state):
    """`count_per_key`, failing as `--poison` says on some keys' records at even input offsets, once
    their count is stored: the key's other records show in their counts whether a bad one was counted."""
    out = count_per_key(row, state)
    kind = poison.get(bytes(row.key)) if row.offset % 2 == 0 else None
    if kind == "raise":
        raise ValueError(f"no customer {bytes(row.key).decode()}")
    if kind == "type":
        return len(out.value)  # an int: not a value Kafka can carry
    if kind == "large":
        return eos.Output(value=out.value * (2**20 // len(out.value) + 1), key=row.key)
    if kind == "schema":
        return eos.Output(value=out.value, key=bytes(row.key).decode())  # a str: not Avro bytes
    return out


def poison_keys(spec: str) -> dict[bytes, str]:
    """`--poison raise:k13,type:k42`: key -> how its records fail."""
    kinds = {}
    for item in filter(None, spec.split(",")):
        kind, _, key = item.partition(":")
        if kind not in ("raise", "type", "large", "schema") or not key:
            raise SystemExit(f"--poison: {item!r} is not raise:KEY, type:KEY, large:KEY or schema:KEY")
        kinds[key.encode()] = kind
    return kinds


def count_per_key_batch(batch, state):
    """`count_per_key` for `process_batch` (--stateful-batch): the same outputs for a whole Arrow batch,
    written as a user of Arrow would, with no loop over rows in Python: each row's count is the key's
    stored count plus how many times the key came so far in the batch (a stable sort of the keys'
    dictionary codes), and the store is read and written once per distinct key."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    counts = state.store("counts")
    keys = batch.column("key")
    encoded = pc.dictionary_encode(keys)
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    distinct = encoded.dictionary.to_pylist()
    stored = np.array(counts.get_many(distinct, default=0), dtype=np.int64)
    order = np.argsort(codes, kind="stable")
    rows = np.arange(len(codes))
    starts = np.ones(len(codes), dtype=bool)
    starts[1:] = codes[order][1:] != codes[order][:-1]
    seen = np.empty(len(codes), dtype=np.int64)
    seen[order] = rows - np.maximum.accumulate(np.where(starts, rows, 0)) + 1  # 1, 2, ... per key
    running = pa.array(stored[codes] + seen)
    value = pc.binary_join_element_wise(
        batch.column("value"), pc.cast(pc.cast(running, pa.string()), pa.binary()), b"#"
    )
    totals = stored + np.bincount(codes, minlength=len(distinct))
    counts.put_many(dict(zip(distinct, totals.tolist(), strict=True)))
    return pa.RecordBatch.from_arrays([value, keys], ["value", "key"])


def aggregate(df, kind: str):
    """`--aggregate`: the query and its output mode."""
    from pyspark.sql import functions as F

    if kind == "window":
        # produce_sequence values are topic|partition|seq: the event time is seq seconds after the epoch.
        events = df.selectExpr(
            "CAST(split(CAST(value AS STRING), '[|]')[1] AS STRING) AS k",
            "timestamp_seconds(CAST(split(CAST(value AS STRING), '[|]')[2] AS BIGINT)) AS t",
        )
        windows = F.window("t", "10 seconds")
        counts = events.withWatermark("t", "0 seconds").groupBy("k", windows).count()
        out = counts.selectExpr(
            "CAST(k AS BINARY) AS key",
            "CAST(concat_ws('|', CAST(unix_seconds(window.start) AS STRING), CAST(count AS STRING))"
            " AS BINARY) AS value",
        )
        return out, "append"
    counts = df.groupBy("key").count()
    value = "CAST(count AS STRING)"
    if kind == "rand":
        value = f"concat({value}, '|', CAST(rand() AS STRING))"
    return counts.selectExpr("key", f"CAST({value} AS BINARY) AS value"), "update"


def append_summary(path: str, summary: eos.BatchSummary) -> None:
    """`on_batch`: a sink's `BatchSummary` (its figures, not the per-partition rows) as one JSON line."""
    with open(path, "a") as f:
        f.write(json.dumps(summary.as_dict()) + "\n")


def append_commit(path: str, commit: eos.Commit) -> None:
    """`on_commit`, on the executors: one JSON line per committed transaction of an input partition."""
    with open(path, "a") as f:
        f.write(json.dumps(attrs.asdict(commit)) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--app-id", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--max-offsets", type=int, default=0)
    parser.add_argument("--min-partitions", type=int, default=0)
    parser.add_argument("--commit-every", type=int, default=10_000)
    parser.add_argument("--summaries")
    parser.add_argument("--commits", help="append every committed transaction (eos.Commit) as a JSON line")
    parser.add_argument("--stateful", action="store_true", help="emit a running count per key")
    parser.add_argument("--stateful-batch", action="store_true", help="the same count with process_batch")
    parser.add_argument("--remote", help="Spark Connect: 'local' starts a server here, or sc://host:port")
    parser.add_argument("--format-eos", action="store_true", help='write with writeStream.format("eos")')
    parser.add_argument("--realtime", type=int, help="real-time mode, epochs of this many seconds")
    parser.add_argument(
        "--trigger-seconds",
        type=int,
        help="run until killed, a micro-batch every N seconds (not availableNow)",
    )
    parser.add_argument("--ledger-retain", type=int, help='format("eos"): batches its ledger keeps')
    parser.add_argument("--aggregate", choices=["count", "window", "rand"], help="input_mode any")
    parser.add_argument("--files", help="a directory of text files as the source, input_mode any")
    parser.add_argument("--delta", help="a Delta Lake table (key, value) as the source, input_mode any")
    parser.add_argument("--delta-jars", help="--delta: Delta Lake's jars, comma-separated")
    parser.add_argument("--parts", type=int, default=4, help="input_mode any: parts per batch")
    parser.add_argument("--dead-letters", help="on_error='dead_letter': bad records go to this topic")
    parser.add_argument(
        "--poison", default="", help="with --stateful: raise:KEY,type:KEY,large:KEY,schema:KEY"
    )
    parser.add_argument(
        "--restarts", type=int, default=0, help="start a failed query again in this session, N times at most"
    )
    args = parser.parse_args()

    config = eos.Config.from_env(
        bootstrap_servers=args.bootstrap,
        app_id=args.app_id,
        output_topic=args.output,
        commit_every=args.commit_every,
    )
    if args.dead_letters:
        config = attrs.evolve(config, on_error="dead_letter", dead_letter_topic=args.dead_letters)
    conf = {}
    if args.delta:  # Delta's jars beside the Kafka connector's, its SQL extension and catalog
        conf = {
            "spark.jars": args.delta_jars,
            "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        }
    spark = eos.spark_session(f"pipeline-{args.app_id}", remote=args.remote, conf=conf)
    options = {}
    if args.max_offsets:
        options["maxOffsetsPerTrigger"] = args.max_offsets
    if args.min_partitions:
        options["minPartitions"] = args.min_partitions
    output_mode = None
    if args.files:
        df = spark.readStream.format("text").option("maxFilesPerTrigger", 1).load(args.files)
        df = df.selectExpr("CAST(split(value, '[|]')[1] AS BINARY) AS key", "CAST(value AS BINARY) value")
    elif args.delta:
        df = spark.readStream.format("delta").option("maxFilesPerTrigger", 1).load(args.delta)
        df = df.selectExpr("CAST(key AS BINARY) AS key", "CAST(value AS BINARY) AS value")
    else:
        df = eos.read_stream(spark, config, [args.input], **options)
    if args.aggregate:
        df, output_mode = aggregate(df, args.aggregate)
    if args.aggregate or args.files or args.delta:
        config = attrs.evolve(config, input_mode="any", parts=args.parts)
    stores = {"counts": "json"}
    process = count_per_key if args.stateful else None
    if args.stateful and args.poison:
        process = partial(count_per_key_or_fail, poison_keys(args.poison))
    process_batch = count_per_key_batch if args.stateful_batch else None
    if args.stateful or args.stateful_batch:
        kwargs = {"process": process, "process_batch": process_batch, "stores": stores}
    else:
        kwargs = {}
    on_commit = partial(append_commit, args.commits) if args.commits else None
    trigger = {"availableNow": True}
    if args.trigger_seconds:
        trigger = {"processingTime": f"{args.trigger_seconds} seconds"}
    if args.realtime:
        writer = df.writeStream.foreach(eos.foreach_writer(config, process, kwargs.get("stores"), on_commit))
        writer = writer.outputMode("update")
        trigger = {"realTime": f"{args.realtime} seconds"}
    elif args.format_eos:
        if config.input_mode == "any":  # the data source writes rows eos.place placed
            df = eos.place(df, parts=config.parts)
        name = "eos"
        if kwargs or on_commit:  # functions travel with a data source name of their own
            name = eos.register(spark, f"eos-{args.app_id}", on_commit=on_commit, **kwargs)
        writer = df.writeStream.format(name)
        options = {
            "kafka.bootstrap.servers": config.bootstrap_servers,
            "topic": config.output_topic,
            "eos.app.id": config.app_id,
            "eos.processing.guarantee": config.processing_guarantee,
            "eos.commit.every": config.commit_every,
            "eos.state.dir": config.state_dir,
            "eos.input.mode": config.input_mode,
            "eos.parts": config.parts,
            "eos.on.error": config.on_error,
            "eos.data.path": config.data_path,
            **({"eos.dead.letter.topic": config.dead_letter_topic} if config.dead_letter_topic else {}),
            **({"eos.ledger.retain": args.ledger_retain} if args.ledger_retain else {}),
            **{f"kafka.{key}": value for key, value in config.kafka.items()},
        }
        for key, value in options.items():
            writer = writer.option(key, str(value))
    else:
        on_batch = partial(append_summary, args.summaries) if args.summaries else None
        sink = eos.sink(config, on_commit=on_commit, on_batch=on_batch, **kwargs)
        writer = df.writeStream.foreachBatch(sink)

    if output_mode is not None:
        writer = writer.outputMode(output_mode)
    for restart in range(args.restarts + 1):
        query = writer.option("checkpointLocation", args.checkpoint).trigger(**trigger).start()
        try:
            query.awaitTermination()
            break
        except Exception:
            if restart == args.restarts:
                raise
            print(f"the query failed: starting it again ({restart + 1} of {args.restarts})", file=sys.stderr)
    spark.stop()


if __name__ == "__main__":
    main()
