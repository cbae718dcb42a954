"""How long the usual restore of a stateful task start takes: a roll-forward over one commit marker
(the changelog's last offset is the marker after the store's local offset), through eos's own restore
loop (`eos._kafka._changelog.restore`), with its consume() wait (`_CONSUME_WAIT_S`) set to each of
`--waits`: librdkafka's consume() returns when it has the whole batch or when the wait runs out, even
when all it has is the partition-end event the loop waits for.

    .venv/bin/python -m bench.probes.restore_wait [--bootstrap 127.0.0.1:9092] [--rounds 5]
        [--waits 0.5,0.02]

The changelog holds one committed record and its commit marker; each round restores from the marker to
the end into a store in a temporary directory, the waits interleaved. Prints the milliseconds of each
restore per wait, and the medians.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer

from eos import testing
from eos._kafka import _changelog
from eos._log import get_logger
from eos.config import Config
from eos.state._sqlite import SqliteStore as PartitionStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--waits", default="0.5,0.02", help="consume() waits in seconds (comma list)")
    args = parser.parse_args()
    app = f"probe-restore-{uuid.uuid4().hex[:6]}"
    changelog = f"{app}-changelog"
    testing.create_topic(args.bootstrap, changelog, 1, config={"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": args.bootstrap, "transactional.id": f"{app}-filler"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(changelog, b"1", b"key", partition=0)
    producer.commit_transaction(30)  # the record at offset 0, its commit marker at 1
    config = Config(bootstrap_servers=args.bootstrap, app_id=app, output_topic=changelog)
    start, high = 1, _changelog.bounds(config, changelog, 0)[1]
    log = get_logger(probe="restore_wait")
    waits = [float(w) for w in args.waits.split(",") if w]
    took: dict[float, list[float]] = {w: [] for w in waits}
    with tempfile.TemporaryDirectory() as tmp:
        store = PartitionStore(Path(tmp), "probe", transactional=True)
        store.open(lock_timeout_s=5)
        try:
            for _ in range(args.rounds):
                for wait in waits:
                    _changelog._CONSUME_WAIT_S = wait
                    t0 = time.perf_counter()
                    _changelog.restore(config, log, store, changelog, 0, start, high, None, b"probe")
                    took[wait].append((time.perf_counter() - t0) * 1000)
        finally:
            store.close()
    print(f"restore of offsets [{start}, {high}) of {changelog} (one commit marker)")
    for wait, ms in took.items():
        each = "  ".join(f"{m:.0f}" for m in ms)
        print(f"consume wait {wait * 1000:>5.0f} ms: {each} ms; median {statistics.median(ms):.0f} ms")


if __name__ == "__main__":
    main()
