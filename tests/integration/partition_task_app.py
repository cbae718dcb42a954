"""One eos partition task (the executor-side protocol, no Spark) as its own process, so a test can
SIGSTOP it mid-transaction and SIGCONT it after another incarnation took the partition over (F8).

    python partition_task_app.py BOOTSTRAP APP_ID INPUT OUTPUT PARTITION STATE_DIR PAUSE_AT MARKER

Rows are the input partition's records; `process` keeps a running count per key in the store
"counts" and, at offset PAUSE_AT, creates MARKER and sleeps so the test can pause it there.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, TopicPartition

import eos
from eos._task import Layout, run_partition


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
            yield (msg.topic(), msg.partition(), msg.offset(), msg.value(), msg.key())
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
        if row[2] == int(pause_at):
            Path(marker).touch()
            time.sleep(4)  # the test pauses this process here, mid-transaction
        counts = state.store("counts")
        n = counts.get(row[4], 0) + 1
        counts.put(row[4], n)
        return eos.Output(row[3] + b"#%d" % n, row[4])

    layout = Layout(topic=0, partition=1, offset=2, value=3, key=4)
    for stats in run_partition(
        config,
        0,
        layout,
        process,
        rows(bootstrap, source, int(partition)),
        stores={"counts": eos.StoreSpec()},
    ):
        print(json.dumps(stats))


if __name__ == "__main__":
    main()
