"""`make chaos`: the fault list F1–F10 done for real to eos pipelines on a Spark standalone cluster.

    python -m tests.chaos.harness [--records 100000] [--incarnations 8] [--seed 1] [--brokers 1]
                                [--pipelines stateless,stateful,snapshots,format,aggregate,jvm,format-jvm]
                                [--guarantees exactly_once,at_least_once]
                                [--report reports/chaos.json] [--min-kills 20] [--min-broker-restarts 3]

`--brokers 3`: a replicated cluster (three brokers and a controller of its own, replication factor 3 for
every topic, min.insync.replicas 2); broker restarts become coordinator kills, leader kills, two brokers
down at once and rolling restarts.

Per run (a guarantee x a pipeline, same input, same fault schedule — see faults.py):
    1. a fresh app id and output topic; a read_committed consumer follows the output from the start;
    2. each driver incarnation arms its crash points (F1–F4, F6), receives its external faults (worker,
       executor and driver kills, broker restarts, pauses) once it is writing batches, and is ended by a
       SIGKILL of its process group (or F5: it kills itself between the sink and Spark's commit log);
    3. a last incarnation runs to the end of the input;
    4. markers go to every output partition; a fresh read_committed consumer reads until each is visible
       (a transaction left hanging would hide it) and compares the output with the input; the running
       counts and the changelog are compared with a recomputation; the live consumer's figures too. The
       `aggregate` pipeline (groupBy(key).count() in update mode, input_mode "any") is checked per key
       instead: no (key, count) twice (`duplicated`), counts increasing (`out_of_order`), the last
       count the true one (`state_mismatches`), no key without one (`missing`). The `snapshots`
       pipeline is `stateful` with every store snapshotted after every batch: a lost state directory is
       rebuilt from the snapshots, and F6 fires between a snapshot's download and its install. The `jvm`
       pipeline is `stateless` on the JVM data path (exactly_once only): its crash points stop the
       executor JVM that writes, and its Python worker kills become kills of that JVM. The `format-jvm`
       pipeline is the same through `format("eos")`, which eos's JVM provider routes to the JVM data
       path; both fail the run where a batch was written on another path.
Writes reports/chaos.json, prints a table, and exits non-zero when an exactly_once run is not exactly
once or fewer faults than asked for were injected.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from tests.chaos.faults import schedule
from tests.chaos.figures import failures, table
from tests.chaos.runner import TRANSACTION_TIMEOUT_MS, Chaos, log
from tests.support.processes import Interrupted, stopping


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--brokers", type=int, default=1, help="3: a replicated cluster")
    parser.add_argument("--incarnations", type=int, default=8)
    parser.add_argument("--externals", type=int, default=2, help="external faults per incarnation")
    parser.add_argument("--max-offsets", type=int, default=1_500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pipelines", default="stateless,stateful,snapshots,format,aggregate,jvm,format-jvm")
    parser.add_argument("--guarantees", default="exactly_once,at_least_once")
    parser.add_argument("--min-kills", type=int, default=20)
    parser.add_argument("--min-broker-restarts", type=int, default=3)
    parser.add_argument("--finish-timeout", type=float, default=900)
    parser.add_argument("--home", default=os.path.join(os.environ.get("EOS_CACHE", ".cache"), "chaos"))
    parser.add_argument("--report", default="reports/chaos.json")
    parser.add_argument(
        "--transaction-version",
        type=int,
        choices=(1, 2),
        help="finalize the cluster's transaction.version at this level (default: the broker's, 2 on Kafka 4)",
    )
    args = parser.parse_args(argv)

    plan = schedule(args.seed, args.incarnations, args.externals, cluster=args.brokers > 1)
    chaos = Chaos(args)
    started = time.monotonic()
    runs = []
    try:
        with stopping(chaos.down):
            chaos.up()
            log(
                f"broker {chaos.bootstrap}, cluster {chaos.cluster.master_url}, {args.records} records seeded"
            )
            for guarantee in args.guarantees.split(","):
                for pipeline in args.pipelines.split(","):
                    runs.append(chaos.run(guarantee, pipeline, plan))
                    log(json.dumps(runs[-1]))
    except Interrupted as exc:
        log(f"{exc}: stopped the drivers, the Spark cluster and the broker this run started")
        return exc.exit_code
    problems = failures(runs, args.min_kills, args.min_broker_restarts)
    report = {
        "seed": args.seed,
        "records": args.records,
        "partitions": args.partitions,
        "brokers": args.brokers,
        "transaction_version": chaos.transaction_version,
        "transaction_timeout_ms": TRANSACTION_TIMEOUT_MS,
        "schedule": [
            {"crash_points": list(i.crash_points), "external": list(i.external), "end": i.end} for i in plan
        ],
        "runs": runs,
        "problems": problems,
        "wall_seconds": round(time.monotonic() - started, 1),
    }
    Path(args.report).parent.mkdir(parents=True, exist_ok=True)
    Path(args.report).write_text(json.dumps(report, indent=2) + "\n")
    print(table(runs))
    print(f"report: {args.report}")
    for problem in problems:
        print(f"FAILED: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
