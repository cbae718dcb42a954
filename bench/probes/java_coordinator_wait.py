"""What the Java producer (the JVM data path's) waits after looking up a coordinator: at a fresh
producer's initTransactions (the transaction coordinator, then InitProducerId) and at its first
sendOffsetsToTransaction (the group coordinator, then TxnOffsetCommit) it sleeps retry.backoff.ms before
the request that needed the coordinator, error or none. eos sets 20 ms on the JVM's producers
(`eos/_spark/_jvm_writer.py`'s `_producer`); the Java client's default is 100.

    .venv/bin/python -m bench.probes.java_coordinator_wait [--bootstrap 127.0.0.1:9092] [--rounds 8]
        [--backoff-ms 100,20]

Compiles CoordinatorWait.java (beside this file) with javac against the installed PySpark's jars and
the Kafka client of Spark's connector (`make setup` fetches it), then per round and setting makes a
fresh producer with a new transactional.id and group, as a new query's first batch does. Prints each
round's milliseconds and the medians (round 0 left out).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import uuid
from pathlib import Path

import pyspark

from eos import testing
from eos._spark._cache import spark_jars_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--backoff-ms", default="100,20", help="retry.backoff.ms values (comma list)")
    args = parser.parse_args()
    topic = f"probe-coordinator-{uuid.uuid4().hex[:6]}"
    testing.create_topic(args.bootstrap, topic, 1)
    jars = os.pathsep.join([f"{spark_jars_dir()}/*", f"{Path(pyspark.__file__).parent / 'jars'}/*"])
    with tempfile.TemporaryDirectory() as classes:
        source = Path(__file__).with_name("CoordinatorWait.java")
        subprocess.run(["javac", "-d", classes, "-cp", jars, str(source)], check=True)
        backoffs = [b for b in args.backoff_ms.split(",") if b]
        argv = ["java", "-cp", os.pathsep.join([classes, jars]), "CoordinatorWait"]
        out = subprocess.run(
            [*argv, args.bootstrap, topic, str(args.rounds), *backoffs],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    timings: dict[str, list[tuple[float, float]]] = {b: [] for b in backoffs}
    for line in out.splitlines():
        backoff, init, offsets = line.split()
        timings[backoff].append((float(init), float(offsets)))
    print("retry.backoff.ms  initTransactions ms / first sendOffsetsToTransaction ms, per round")
    for backoff, rows in timings.items():
        # round 0 left out for every setting: the JVM's first producer loads the client's classes, and
        # each median is then over the same rounds
        kept = rows[1:]
        each = "  ".join(f"{i:.0f}/{o:.0f}" for i, o in kept)
        init = statistics.median(i for i, _ in kept)
        offsets = statistics.median(o for _, o in kept)
        print(f"{backoff:>16}  {each}\n{'':>16}  medians: init {init:.0f} ms, first offsets {offsets:.0f} ms")


if __name__ == "__main__":
    main()
