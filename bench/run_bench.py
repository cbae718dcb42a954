"""`make bench`: what exactly-once costs, measured side by side in one run on one local broker.

Kafka -> Kafka throughput over the same pre-loaded input, for Spark's own `.format("kafka")` sink
(the baseline), eos at_least_once, eos exactly_once, eos exactly_once with a stateful `process`, a
plain confluent-kafka transactional loop (no Spark) and Quix Streams exactly-once; every row runs
`--runs` times, interleaved, and each eos row's read_committed output count must equal the input
count. Also: end-to-end latency at a 1 s trigger, transaction commit times, the peak RSS of the
Python workers at 1x and 10x batch size, the changelog restore rate of a 1,000,000-key store, and the
executor JVM's peak RSS for Spark's sink and eos on each data path (each in a JVM of its own).

    python -m bench.run_bench [--records 2000000] [--runs 3] [--batch 200000] [--out reports]

Writes `reports/bench.json` and `reports/bench.png` and prints the tables. Environment knobs (as
`make bench` passes them): BENCH_RECORDS, BENCH_RUNS, BENCH_BATCH, BENCH_RESTORE_KEYS,
BENCH_LATENCY_SECONDS, BENCH_LATENCY_RATE, BENCH_PROFILE (py-spy the workers of one eos run).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from bench import bench_report as report
from bench._children import child_loop, child_quix, quix_problem
from bench._common import COMMIT_EVERY, KEYS, PARTITIONS, VALUE_BYTES, log, ms
from bench._kafka import fill_input, wait_for_group_coordinators
from bench._latency import latency
from bench._machine import machine_facts
from bench._memory import MEMORY_ROWS, child_memory, memory
from bench._restore import restore
from bench._rows import Bench
from eos import testing
from eos.session import free_port
from tests.support.localbroker import LocalBroker
from tests.support.processes import Interrupted, descendants, signal_all, stopping


def measured(what: str, fn) -> dict:
    """`fn()`, or its error: a broken measurement after the rounds must not take their results with it
    (a restore that failed once lost a whole run's report)."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - reported in bench.json and the log
        log(f"{what} failed: {type(exc).__name__}: {exc}")
        return {"error": f"{type(exc).__name__}: {exc}"[:2000]}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] in ("--child-loop", "--child-quix"):
        kind, bootstrap, topic_in, topic_out, records = sys.argv[1:6]
        fn = child_loop if kind == "--child-loop" else child_quix
        print(json.dumps(fn(bootstrap, topic_in, topic_out, int(records))))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--child-memory":
        bootstrap, topic, row, records, batch, runs = sys.argv[2:8]
        print(json.dumps(child_memory(bootstrap, topic, row, int(records), int(batch), int(runs))))
        return 0
    os.environ.setdefault("EOS_LOG_LEVEL", "warning")  # driver and workers: no per-batch info lines
    env = os.environ.get
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=int(env("BENCH_RECORDS") or 2_000_000))
    parser.add_argument("--runs", type=int, default=int(env("BENCH_RUNS") or 3))
    parser.add_argument(
        "--batch", type=int, default=int(env("BENCH_BATCH") or 200_000), help="maxOffsetsPerTrigger"
    )
    parser.add_argument("--restore-keys", type=int, default=int(env("BENCH_RESTORE_KEYS") or 1_000_000))
    parser.add_argument(
        "--restore-order",
        choices=("sequential", "random"),
        default=env("BENCH_RESTORE_ORDER") or "sequential",
        help="the order the changelog holds the keys in (sequential: key0, key1, ...)",
    )
    parser.add_argument("--latency-seconds", type=float, default=float(env("BENCH_LATENCY_SECONDS") or 30))
    parser.add_argument("--latency-rate", type=int, default=int(env("BENCH_LATENCY_RATE") or 2000))
    parser.add_argument("--rows", default=env("BENCH_ROWS") or ",".join(r for r, _ in report.ROWS))
    parser.add_argument(
        "--skip", default=env("BENCH_SKIP") or "", help="comma list: split,latency,restore,memory"
    )
    parser.add_argument(
        "--split-batches",
        type=lambda text: [int(n) for n in text.split(",")],
        default=env("BENCH_SPLIT_BATCHES") or "20000,200000,2000000",
        help="records per trigger for the cost split (comma list)",
    )
    parser.add_argument(
        "--profile",
        default=env("BENCH_PROFILE") or "eos_exactly_once",
        help="eos row to run once more under py-spy, uncounted ('none': no profile)",
    )
    parser.add_argument("--out", default=env("BENCH_OUT") or "reports")
    args = parser.parse_args()
    args.quix_unavailable = quix_problem()
    if args.profile == "none":
        args.profile = ""
    rows = [r for r in args.rows.split(",") if r]
    skip = set(args.skip.split(","))
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="eos-bench-", dir=os.environ.get("EOS_CACHE")))
    broker = LocalBroker(home=work / "kafka", port=free_port(), controller_port=free_port())
    started = time.time()
    log(f"broker on {broker.bootstrap_servers}, work dir {work}")
    result: dict = {
        "params": {
            "records": args.records,
            "value_bytes": VALUE_BYTES,
            "partitions": PARTITIONS,
            "keys": KEYS,
            "runs": args.runs,
            "batch_records": args.batch,
            "commit_every": COMMIT_EVERY,
            "restore_keys": args.restore_keys,
            "restore_order": args.restore_order,
            "latency_seconds": args.latency_seconds,
            "latency_rate_per_s": args.latency_rate,
        },
        "machine": machine_facts(),
    }
    bench: Bench | None = None

    def stop() -> None:
        """The Spark sessions, the broker (in a session of its own: it would outlive this process), then
        whatever else still runs below this process: a Spark JVM still starting when a signal came has
        no session to stop yet, and did not end when its stdin closed (docs/design.md, "A Spark JVM left
        behind by `make bench`")."""
        try:
            if bench is not None and bench.connect is not None:
                bench.connect.stop()
            if bench is not None and bench.spark is not None:
                bench.spark.stop()
        finally:
            broker.down()
            shutil.rmtree(work, ignore_errors=True)
            signal_all([p.pid for p in descendants(os.getpid())], signal.SIGKILL)

    try:
        with stopping(stop):
            broker.up()
            bench = Bench(args, broker.bootstrap_servers, work)
            testing.create_topic(broker.bootstrap_servers, bench.input_topic, PARTITIONS)
            wait_for_group_coordinators(broker.bootstrap_servers, bench.input_topic)
            t0 = time.perf_counter()
            fill_input(broker.bootstrap_servers, bench.input_topic, args.records)
            log(f"input: {args.records:,} records of {VALUE_BYTES} B in {time.perf_counter() - t0:.1f}s")
            bench.session()
            result["warm_up"] = bench.warm_up()
            log("warmed up")
            runs: dict[str, list[dict]] = {r: [] for r in rows}
            for rnd in range(args.runs):
                this_round: dict[str, list[dict]] = {}
                for row in report.round_order(rows, rnd):  # interleaved, alternating, floors' rows twice
                    res = bench.run_row(row, rnd)
                    this_round.setdefault(row, []).append(res)
                    rate = res.get("records_per_s")
                    log(
                        f"round {rnd} {row}: {report.fmt_rate(rate)} records/s"
                        + (f" ({res['seconds']:.1f}s)" if "seconds" in res else "")
                        + (
                            f" rss {res.get('worker_rss_peak_mib')} MiB"
                            if res.get("worker_rss_peak_mib")
                            else ""
                        )
                        + (f" ERROR {res['error'][:300]}" if "error" in res else "")
                    )
                for row, results in this_round.items():
                    runs[row].append(report.merge_runs(results))
            result["runs"] = runs
            if args.profile:
                log(f"profile: an extra, uncounted run of {args.profile} under py-spy")
                kept = list(bench.commit_seconds.get(args.profile, []))
                bench.profiling = True
                extra = bench.run_row(args.profile, -1)
                bench.profiling = False
                bench.commit_seconds[args.profile] = kept  # py-spy slowed the extra run's commits
                result["profile"] = {
                    "row": args.profile,
                    **extra.get("profile", {"error": extra.get("error")}),
                }
            result["throughput"] = report.summarize_throughput(runs)
            result["commit_ms"] = {
                row: {
                    "commits": len(s),
                    "p50_ms": ms(report.percentile(s, 50)),
                    "p99_ms": ms(report.percentile(s, 99)),
                }
                for row, s in bench.commit_seconds.items()
            }
            for row in ("python_loop_exactly_once",):
                if row in runs:
                    ok = [r for r in runs[row] if r.get("commit_p50_ms") is not None]
                    if ok:
                        result["commit_ms"][row] = {
                            "p50_ms": report.median(r["commit_p50_ms"] for r in ok),
                            "p99_ms": report.median(r["commit_p99_ms"] for r in ok),
                            "note": "median over runs of each run's percentile",
                        }
            rss1 = report.median(r.get("worker_rss_peak_mib") for r in runs.get("eos_exactly_once", []))
            rss10 = report.median(
                r.get("worker_rss_peak_mib") for r in runs.get("eos_exactly_once_10x_batch", [])
            )
            result["rss"] = {
                "batch_1x_records": args.batch,
                "batch_10x_records": 10 * args.batch,
                "worker_peak_mib_1x": rss1,
                "worker_peak_mib_10x": rss10,
                "ratio_10x_over_1x": report.ratio(rss10, rss1),
                "per_row_median_peak_mib": {
                    row: report.median(r.get("worker_rss_peak_mib") for r in rr) for row, rr in runs.items()
                },
            }
            if "split" not in skip:
                log(f"cost split: records per trigger {args.split_batches}")
                result["split"] = measured("split", bench.split)
            if "latency" not in skip:
                result["latency"] = {}
                for row in (
                    "spark_kafka_sink",
                    "eos_at_least_once",
                    "eos_exactly_once",
                    "eos_exactly_once_jvm",
                ):
                    rate = f"{args.latency_rate}/s for {args.latency_seconds:.0f}s"
                    log(f"latency {row}: {rate} at a 1 s trigger")
                    result["latency"][row] = measured(f"latency {row}", lambda row=row: latency(bench, row))
                    log(f"latency {row}: {result['latency'][row]}")
            if "restore" not in skip:
                result["restore"] = measured("restore", lambda: restore(bench))
            if "memory" not in skip:
                log(f"executor memory: {', '.join(MEMORY_ROWS)}, each in a Spark JVM of its own")
                result["memory"] = measured("memory", lambda: memory(bench, args.runs))
    except Interrupted as exc:
        log(f"{exc}: stopped the Spark session and the broker")
        return exc.exit_code
    result["targets"] = report.targets(result)
    result["elapsed_s"] = round(time.time() - started, 1)
    notes = {
        row: runs[row][0]["error"][:80]
        for row in runs
        if runs[row] and all(r.get("records_per_s") is None for r in runs[row])
    }
    table = report.throughput_table(result["throughput"], notes)
    extra = report.extra_table(result)
    result["table"] = table
    (out_dir / "bench.json").write_text(json.dumps(result, indent=2, default=str))
    report.plot(result, str(out_dir / "bench.png"))
    print()
    print(table)
    print()
    print(extra)
    print()
    print(report.targets_table(result["targets"]))
    steps = report.steps_table(result.get("runs", {}))
    if steps:
        result["steps_table"] = steps
        print()
        print(steps)
    if "split" in result:
        print()
        print(report.split_table(result["split"]))
    if result.get("profile", {}).get("top_self"):
        print()
        print(report.profile_table(result["profile"]))
    print(f"\nwrote {out_dir / 'bench.json'} and {out_dir / 'bench.png'} in {result['elapsed_s']:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
