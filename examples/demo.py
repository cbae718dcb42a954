"""`make demo`: a real stateful pipeline on the local broker, hit by real faults, checked for exactly-once.

1. Seeds an input topic with 20,000 records (4 partitions, unique sequence ids, 97 keys).
2. Runs examples/pipeline.py --stateful (Kafka -> Spark -> eos.sink with a running count per key in
   a state store -> Kafka) as its own driver process, once per guarantee, with the same faults each
   time: a Python worker SIGKILLs itself after producing a transaction's outputs and before committing
   its offsets, another right after a commit and before the local state is written, and the whole
   driver is SIGKILLed mid-stream and restarted from its checkpoint.
3. Reads each output topic with a read_committed consumer and compares it with the input: every
   record once, and every emitted running total equal to a recomputation from the input.
4. Runs the exactly_once pipeline once more with on_error="dead_letter" and a `process` that raises on
   one key's records at even offsets: those records reach the dead-letter topic, in the same
   transactions as the other records' outputs, each once; `eos dlq show` prints what is there.

The guarantee is switched by EOS_PROCESSING_GUARANTEE alone; the pipeline code is the same.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from eos import testing

PIPELINE = Path(__file__).with_name("pipeline.py")
PARTITIONS = 4
FAULTS = "after_produce,after_commit"
#: step 4: the key whose records `process` raises on
POISON = b"k13"


def start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """The pipeline as a process group of its own, so that one SIGKILL takes it down as a lost machine."""
    with open(log, "ab") as stderr:
        return subprocess.Popen(
            argv, env={**os.environ, **env}, start_new_session=True, stdout=subprocess.DEVNULL, stderr=stderr
        )


def batches_done(summaries: Path) -> int:
    """Batches the pipeline has written: it appends one JSON line per batch to --summaries."""
    return len(summaries.read_text().splitlines()) if summaries.exists() else 0


def run(bootstrap: str, source: str, guarantee: str, run_id: str, workdir: Path) -> str:
    """Run the pipeline under the faults; returns the output topic."""
    output = f"demo-out-{guarantee}-{run_id}"
    testing.create_topic(bootstrap, output, PARTITIONS)
    once = workdir / f"once-{guarantee}"
    once.mkdir()
    summaries = workdir / f"{guarantee}.jsonl"
    argv = [sys.executable, str(PIPELINE), "--stateful", "--max-offsets", "2000"]
    for flag, value in (
        ("--bootstrap", bootstrap),
        ("--app-id", f"demo-{guarantee}-{run_id}"),
        ("--input", source),
        ("--output", output),
        ("--checkpoint", workdir / f"ckpt-{guarantee}"),
        ("--summaries", summaries),
    ):
        argv += [flag, str(value)]
    env = {
        "EOS_PROCESSING_GUARANTEE": guarantee,
        "EOS_STATE_DIR": str(workdir / f"state-{guarantee}"),
        "EOS_CRASH_AT": FAULTS,
        "EOS_CRASH_ONCE_DIR": str(once),
        "EOS_LOG_LEVEL": "WARNING",
    }
    log = workdir / f"{guarantee}.log"

    driver = start(argv, env, log)
    while batches_done(summaries) < 3 and driver.poll() is None:
        time.sleep(0.2)
    batches = batches_done(summaries)
    if driver.poll() is None:
        os.killpg(driver.pid, signal.SIGKILL)  # the driver, its JVM and its Python workers at once
        driver.wait()
        print(f"  [{guarantee}] driver SIGKILLed mid-stream after {batches} batches")
    driver = start(argv, env, log)
    if driver.wait(timeout=600) != 0:
        sys.exit(f"pipeline failed:\n{log.read_text(errors='replace')[-4000:]}")
    kills = sorted(p.name.removeprefix("crashed-") for p in once.iterdir())
    print(f"  [{guarantee}] Python workers SIGKILLed at: {', '.join(kills)}")
    return output


def dead_letters(bootstrap: str, source: str, run_id: str, workdir: Path, sent) -> None:
    """Step 4: bad records to a dead-letter topic, exactly once, and `eos dlq show`."""
    output, dlq = f"demo-out-dlq-{run_id}", f"demo-dlq-{run_id}"
    testing.create_topic(bootstrap, output, PARTITIONS)
    testing.create_topic(bootstrap, dlq, 1)
    argv = [
        sys.executable,
        str(PIPELINE),
        "--stateful",
        "--max-offsets",
        "5000",
        "--poison",
        f"raise:{POISON.decode()}",
    ]
    for flag, value in (
        ("--bootstrap", bootstrap),
        ("--app-id", f"demo-dlq-{run_id}"),
        ("--input", source),
        ("--output", output),
        ("--checkpoint", workdir / "ckpt-dlq"),
        ("--dead-letters", dlq),
    ):
        argv += [flag, str(value)]
    env = {"EOS_PROCESSING_GUARANTEE": "exactly_once", "EOS_STATE_DIR": str(workdir / "state-dlq")}
    log = workdir / "dlq.log"
    if start(argv, {**env, "EOS_LOG_LEVEL": "ERROR"}, log).wait(timeout=600) != 0:
        sys.exit(f"pipeline failed:\n{log.read_text(errors='replace')[-4000:]}")

    def bad(offset: int, value: bytes) -> bool:  # --poison: the key's records at even input offsets
        return _key(value) == POISON and offset % 2 == 0

    poisoned = {p: [v for o, v in enumerate(values) if bad(o, v)] for p, values in sent.items()}
    good = {p: [v for o, v in enumerate(values) if not bad(o, v)] for p, values in sent.items()}
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    result = testing.compare(
        testing.flatten(good), records, hanging, running_counts=testing.expected_running_counts(good)
    )
    letters, hanging = testing.read_topic(bootstrap, dlq, marker=testing.write_markers(bootstrap, dlq))
    dead = testing.compare(testing.flatten(poisoned), letters, hanging)
    print(
        f"  [dead letters] output: {result.received} records, the input without the {dead.expected} of"
        f" key {POISON.decode()} at even offsets (duplicates {result.duplicated}, missing {result.missing},"
        f" wrong totals {result.state_mismatches}); dead letters: {dead.received}"
        f" (duplicates {dead.duplicated}, missing {dead.missing})"
    )
    if not (result.exactly_once and dead.exactly_once):
        sys.exit(f"dead letters are NOT exact: output {result}, dead letters {dead}")
    print(f"  $ eos dlq show --topic {dlq}")
    shown = subprocess.run(
        [sys.executable, "-m", "eos.cli", "--bootstrap-server", bootstrap, "dlq", "show", "--topic", dlq],
        capture_output=True,
        text=True,
        timeout=120,
    )
    print("\n".join("  " + line for line in (shown.stdout or shown.stderr).splitlines()))


def _key(value: bytes) -> bytes:
    return b"k%d" % (testing.parse_value(value)[2] % 97)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--per-partition", type=int, default=5_000)
    args = parser.parse_args()

    run_id = uuid.uuid4().hex[:6]
    source = f"demo-in-{run_id}"
    testing.create_topic(args.bootstrap, source, PARTITIONS)
    sent = testing.produce_sequence(args.bootstrap, source, PARTITIONS, args.per_partition)
    expected_counts = testing.expected_running_counts(sent)
    total = PARTITIONS * args.per_partition
    print(f"input: {total} records with unique ids on {source} ({PARTITIONS} partitions)")

    rows = []
    with tempfile.TemporaryDirectory(prefix="eos-demo-") as tmp:
        for guarantee in ("exactly_once", "at_least_once"):
            output = run(args.bootstrap, source, guarantee, run_id, Path(tmp))
            marker = testing.write_markers(args.bootstrap, output)
            records, hanging = testing.read_topic(args.bootstrap, output, marker=marker)
            result = testing.compare(testing.flatten(sent), records, hanging, running_counts=expected_counts)
            rows.append((guarantee, result))
        print('  [dead letters] exactly_once again, on_error="dead_letter", process raising on one key')
        dead_letters(args.bootstrap, source, run_id, Path(tmp), sent)

    print()
    header = (
        "guarantee",
        "records in",
        "records out",
        "duplicates",
        "missing",
        "out of order",
        "hanging txns",
        "wrong totals",
    )
    print(f"{header[0]:<15}" + "".join(f"{h:>13}" for h in header[1:]))
    for guarantee, r in rows:
        cells = (
            r.expected,
            r.received,
            r.duplicated,
            r.missing,
            r.out_of_order,
            len(r.hanging_partitions),
            r.state_mismatches,
        )
        print(f"{guarantee:<15}" + "".join(f"{c:>13}" for c in cells))
    print()
    exact = rows[0][1]
    if not exact.exactly_once:  # state_mismatches included: wrong running totals fail it too
        sys.exit(f"exactly_once output is NOT exact: {exact}")
    print("exactly_once: the read_committed output equals the input (duplicates 0, missing 0) and every")
    print("running total equals the recomputation from the input.")
    print(f"at_least_once under the same faults: {rows[1][1].duplicated} duplicates (allowed, and counted).")
    print("The broker keeps running: `make broker-down` stops it.")


if __name__ == "__main__":
    main()
