"""One eos partition task (the executor-side protocol, no Spark) as its own process, so a test can
SIGSTOP it mid-transaction and SIGCONT it after another incarnation took the partition over (F8).

    python partition_task_app.py BOOTSTRAP APP_ID INPUT OUTPUT PARTITION STATE_DIR PAUSE_AT MARKER

Rows are the input partition's records, handed over as Arrow batches of up to 100 rows as `mapInArrow`
would; `process` keeps a running count per key in the store "counts" and, at offset PAUSE_AT, creates
MARKER and sleeps so the test can pause it there.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, TopicPartition

import eos
from eos._core._arrow import Layout
from eos._core._spec import Functions, TaskSpec
from eos._core._task import run_partition

SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("value", pa.binary()),
        ("key", pa.binary()),
    ]
)


def batches(records, size: int = 100):
    chunk = []
    for record in records:
        chunk.append(record)
        if len(chunk) == size:
            yield pa.RecordBatch.from_pylist(chunk, schema=SCHEMA)
            chunk = []
    if chunk:
        yield pa.RecordBatch.from_pylist(chunk, schema=SCHEMA)


def rows(bootstrap: str, topic: str, partition: int):
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "task-app",
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    try:
        while True:
            msg = consumer.poll(5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return
                raise RuntimeError(msg.error())
            yield {
                "topic": msg.topic(),
                "partition": msg.partition(),
                "offset": msg.offset(),
                "value": msg.value(),
                "key": msg.key(),
            }
    finally:
        consumer.close()


def main() -> None:
    bootstrap, app_id, source, output, partition, state_dir, pause_at, marker = sys.argv[1:9]
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=app_id,
        output_topic=output,
        processing_guarantee="exactly_once",
        state_dir=state_dir,
        commit_every=100_000,
    )

    def process(row, state):
        if row.offset == int(pause_at):
            Path(marker).touch()
            time.sleep(4)  # the test pauses this process here, mid-transaction
        counts = state.store("counts")
        n = counts.get(row.key, 0) + 1
        counts.put(row.key, n)
        return eos.Output(row.value + b"#%d" % n, row.key)

    job = TaskSpec(config, 0, Layout(), Functions(process=process, stores={"counts": eos.StoreSpec()}))
    for stats in run_partition(job, batches(rows(bootstrap, source, int(partition)))):
        print(json.dumps(stats.to_pylist()[0]))


if __name__ == "__main__":
    main()
