"""Bad rows that the broker refuses, or whose function raises, spread through long transactions: the
functions and query of test_refused_outputs.py, and its driver process (which the test SIGKILLs).

    python refusals_app.py BOOTSTRAP APP_ID INPUT OUTPUT DEAD_LETTERS CHECKPOINT COMMITS SUMMARIES API

Input is `eos.testing.produce_sequence`'s; a row is bad by its sequence number (`bad_kind`): "refused"
rows get an output of `BIG` bytes, more than the output topic's max.message.bytes (`SMALL_TOPIC`), so
the broker refuses the record batch it travels in with the good outputs around it; "raise" rows make
the function raise (not with pass-through, which has none). `process` and `process_batch` keep a
running count per key (appended to the value as `#<count>`) and store it before they fail, so a bad
row's count shows in its key's later outputs if the aborted transaction's state survived.
"""

from __future__ import annotations

import sys
from functools import partial

import pyarrow as pa

import eos
from eos import testing
from examples.pipeline import append_commit, append_summary

#: the output topic's config: the broker refuses a record batch larger than this
SMALL_TOPIC = {"max.message.bytes": "65536"}
BIG = 100_000
APIS = ("passthrough", "process", "process_batch")


def bad_kind(seq: int, api: str) -> str | None:
    """Whether the row of input sequence number `seq` is bad, and how: "refused" or "raise"."""
    if seq % 41 == 5:
        return "refused"
    if api != "passthrough" and seq % 67 == 9:
        return "raise"
    return None


def _seq(value: bytes) -> int:
    return testing.parse_value(value)[2]


def process(row, state):
    """A running count per key; a bad row fails after its count is stored."""
    counts = state.store("counts")
    n = counts.get(row.key, 0) + 1
    counts.put(row.key, n)
    kind = bad_kind(_seq(row.value), "process")
    if kind == "raise":
        raise ValueError(f"no customer for {bytes(row.value).decode()}")
    value = b"x" * BIG if kind == "refused" else bytes(row.value) + b"#%d" % n
    return eos.Output(value=value, key=row.key)


def process_batch(batch, state):
    """`process` over a whole batch: every count stored, then the call raises if any row is to."""
    counts = state.store("counts")
    keys, values = batch.column("key").to_pylist(), batch.column("value").to_pylist()
    out, kinds = [], []
    for key, value in zip(keys, values, strict=True):
        n = counts.get(key, 0) + 1
        counts.put(key, n)
        kinds.append(bad_kind(_seq(value), "process_batch"))
        out.append(b"x" * BIG if kinds[-1] == "refused" else value + b"#%d" % n)
    if "raise" in kinds:
        raise ValueError(f"no customer for row {kinds.index('raise')} of {len(kinds)}")
    return pa.RecordBatch.from_pydict({"value": pa.array(out, pa.binary()), "key": batch.column("key")})


def query(spark, config: eos.Config, source: str, api: str, on_commit=None, on_batch=None, **options):
    """The input DataFrame and the sink for `api` (pass-through makes refused rows' values in SQL)."""
    from pyspark.sql import functions as F

    df = eos.read_stream(spark, config, [source], **options)
    hooks = {"on_commit": on_commit, "on_batch": on_batch}
    if api == "passthrough":
        seq = F.split(F.col("value").cast("string"), "[|]")[2].cast("long")
        big = F.lit(b"x" * BIG)
        df = df.withColumn("value", F.when(seq % 41 == 5, big).otherwise(F.col("value")))
        return df, eos.sink(config, **hooks)
    functions = {"process": process} if api == "process" else {"process_batch": process_batch}
    return df, eos.sink(config, stores={"counts": "json"}, **functions, **hooks)


def config_of(bootstrap: str, app_id: str, output: str, dead_letters: str, **settings) -> eos.Config:
    return eos.Config(
        bootstrap_servers=bootstrap,
        app_id=app_id,
        output_topic=output,
        processing_guarantee="exactly_once",
        on_error="dead_letter",
        dead_letter_topic=dead_letters,
        max_dead_letters_per_batch=1_000,
        **settings,
    )


def main() -> None:
    bootstrap, app_id, source, output, dead_letters, checkpoint, commits, summaries, api = sys.argv[1:]
    config = config_of(bootstrap, app_id, output, dead_letters, commit_every=400)
    spark = eos.spark_session(f"refusals-{app_id}")
    df, sink = query(
        spark,
        config,
        source,
        api,
        # pass-through: no on_commit, so that it takes the JVM data path (whose tasks run no Python)
        on_commit=None if api == "passthrough" else partial(append_commit, commits),
        on_batch=partial(append_summary, summaries),
        maxOffsetsPerTrigger=2_400,
    )
    writer = df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
    writer.trigger(availableNow=True).start().awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
