"""Pure figures for `make bench`: medians, percentiles, ratios to the baseline row, the printed table and
the PNG. No Kafka, no Spark: `tests/unit/test_bench_report.py` checks it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: (row id, label), in report order, which is the order a round runs them in (reversed every other round):
#: rows a target compares sit side by side (1 and 3j, 3f, 3fc; 1s, 3js and 3s; 3 and 0), so that the
#: machine's drift over a round, minutes long, falls on both alike. Row 1 is the baseline every ratio is
#: computed against.
ROWS: tuple[tuple[str, str], ...] = (
    ("spark_kafka_sink", "1 Spark .format('kafka') sink, at-least-once"),
    ("eos_exactly_once_jvm", "3j eos exactly_once, the JVM data path (data_path='jvm')"),
    (
        "eos_exactly_once_format",
        "3f eos exactly_once, writeStream.format('eos') (classic: the JVM data path)",
    ),
    ("eos_exactly_once_format_connect", "3fc row 3f under Spark Connect (eos's process in the server)"),
    ("eos_at_least_once_jvm", "2j eos at_least_once, the JVM data path"),
    ("eos_exactly_once_jvm_connect", "3jc row 3j under Spark Connect (eos's plugin in the server)"),
    ("eos_exactly_once_jvm_small_batch", "3js row 3j, a tenth of the batch (what 1s compares with)"),
    ("spark_kafka_sink_small_batch", "1s Spark's sink, a tenth of the batch (what 3s compares with)"),
    ("eos_exactly_once_small_batch", "3s eos exactly_once, a tenth of the batch"),
    ("eos_exactly_once", "3 eos exactly_once"),
    ("bare_map_in_arrow", "0 foreachBatch + a mapInArrow that only counts (no Kafka writes)"),
    ("eos_exactly_once_connect", "3c eos exactly_once under Spark Connect"),
    ("bare_map_in_arrow_connect", "0c the same under Spark Connect"),
    ("eos_at_least_once", "2 eos at_least_once"),
    ("eos_exactly_once_loop", "3l eos exactly_once, one produce() per record (arrow_produce=false)"),
    ("eos_exactly_once_stateful", "4 eos exactly_once + count per key (process, per row)"),
    ("eos_exactly_once_stateful_batch", "4b eos exactly_once + count per key (process_batch)"),
    ("eos_at_least_once_stateful_batch", "4a eos at_least_once + count per key (process_batch)"),
    ("eos_exactly_once_stateful_rocksdb", "4r row 4 with state_store='rocksdb'"),
    ("eos_exactly_once_stateful_batch_rocksdb", "4br row 4b with state_store='rocksdb'"),
    ("eos_exactly_once_stateful_snapshots", "4s row 4 with a store snapshot after every batch"),
    ("eos_exactly_once_stateful_batch_snapshots", "4bs row 4b with a store snapshot after every batch"),
    ("eos_exactly_once_arrow50k", "3a row 3 with Arrow batches of 50,000 rows (default 10,000)"),
    ("eos_exactly_once_stateful_batch_arrow50k", "4ba row 4b with Arrow batches of 50,000 rows"),
    ("eos_exactly_once_format_python", "3fp row 3f as a Python data source (eos.data.path=python)"),
    ("python_loop_exactly_once", "5 confluent-kafka loop, transactions, no Spark"),
    ("quixstreams_exactly_once", "6 Quix Streams exactly-once"),
    ("eos_exactly_once_10x_batch", "3' eos exactly_once, 10x batch"),
    ("spark_kafka_sink_10x_batch", "1' Spark's sink, 10x batch (what 3' compares with)"),
    ("eos_exactly_once_regrouped", '3" eos exactly_once, regrouped (shuffle + sort)'),
    ("eos_exactly_once_input_column", "3i eos exactly_once, rows checked against eos_input, not the lineage"),
    ("eos_exactly_once_unchecked", "3u eos exactly_once, input coordinates not checked (before step 0)"),
    ("agg_spark_kafka_sink", "7 groupBy(key).count() (update), Spark .format('kafka'), at-least-once"),
    ("agg_eos_exactly_once", "7e the same aggregation, eos exactly_once, input_mode any, one part per core"),
)
BASELINE = ROWS[0][0]
#: the rows the issue's floors compare (row 1 with 3j, 3j with 3f, 3f with 3fc): each runs twice a round,
#: the block and then its mirror (1 3j 3f 3fc 3fc 3f 3j 1), and a round's rate is both runs' records
#: over both runs' seconds. A round's ratio then rests on two runs of each side, and a drift of the
#: machine's over the block falls on each row alike.
REPEATED: tuple[str, ...] = (
    "spark_kafka_sink",
    "eos_exactly_once_jvm",
    "eos_exactly_once_format",
    "eos_exactly_once_format_connect",
)
#: the restore target is the default state_store's (eos.Config.state_store)
DEFAULT_STORE = "sqlite"


def median(values: Iterable[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) by the nearest-rank method: a value that was actually observed."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def ratio(value: float | None, base: float | None) -> float | None:
    if value is None or not base:
        return None
    return value / base


def round_order(rows: Sequence[str], rnd: int, repeated: Sequence[str] = REPEATED) -> list[str]:
    """The rows of round `rnd` in the order they run: `rows`, reversed every other round, with the
    `repeated` ones among them run side by side where the first of them is, then in mirror order."""
    order = list(rows) if rnd % 2 == 0 else list(reversed(rows))
    block = [row for row in order if row in repeated]
    if not block:
        return order
    first = order.index(block[0])
    rest = [row for row in order if row not in repeated]
    return rest[:first] + block + block[::-1] + rest[first:]


def merge_runs(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A row's runs in one round as one result: its rate is the runs' records over their seconds (None
    where one of them failed), each run kept under `repeats`."""
    if len(results) == 1:
        return results[0]
    ok = all(r.get("records_per_s") for r in results)
    merged: dict[str, Any] = {"round": results[0]["round"], "repeats": list(results)}
    if ok:
        seconds = sum(r["seconds"] for r in results)
        merged["seconds"] = seconds / len(results)
        merged["records_per_s"] = sum(r["input_count"] for r in results) / seconds
    else:
        merged["records_per_s"] = None
        merged["error"] = "; ".join(r["error"] for r in results if "error" in r) or "a run failed"
    peaks = [r["worker_rss_peak_mib"] for r in results if r.get("worker_rss_peak_mib") is not None]
    if peaks:
        merged["worker_rss_peak_mib"] = max(peaks)
    return merged


def summarize_throughput(
    runs: Mapping[str, list[dict[str, Any]]], baseline: str = BASELINE
) -> dict[str, Any]:
    """Per row: the median records/s over its runs, and ratios to the baseline.

    `runs[row]` is a list of run dicts with `records_per_s` (None for a failed run) and `round`.
    `ratio_median` is the median of the per-round ratios (each measured side by side within one
    round); `ratio_of_medians` divides the two medians.
    """
    base_by_round = {r["round"]: r.get("records_per_s") for r in runs.get(baseline, [])}
    base_median = median(base_by_round.values())
    out: dict[str, Any] = {}
    for row, row_runs in runs.items():
        rates = [r.get("records_per_s") for r in row_runs]
        per_round = [ratio(r.get("records_per_s"), base_by_round.get(r["round"])) for r in row_runs]
        row_median = median(rates)
        out[row] = {
            "runs": len(row_runs),
            "ok_runs": sum(1 for r in rates if r is not None),
            "records_per_s": rates,
            "rounds": [r["round"] for r in row_runs],
            "median_records_per_s": row_median,
            "ratio_per_round": per_round,
            "ratio_median": median(per_round),
            "ratio_of_medians": ratio(row_median, base_median),
        }
    return out


def batch_point(progress: Any) -> dict[str, Any]:
    """One micro-batch of a query's progress (a StreamingQueryProgress, or its dict before Spark 4):
    its id, input rows and the durations (ms) Spark measured for it."""
    if not isinstance(progress, Mapping):
        progress = {
            "batchId": progress.batchId,
            "numInputRows": progress.numInputRows,
            "durationMs": progress.durationMs,
        }
    return {"batch": progress["batchId"], "rows": progress["numInputRows"], **progress["durationMs"]}


def first_marked(points: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`points` of one query, its earliest batch marked `first`."""
    first = min((p["batch"] for p in points), default=None)
    return [{**p, "first": p["batch"] == first} for p in points]


def fit_line(points: Sequence[tuple[float, ...]]) -> dict[str, Any] | None:
    """Least squares y = intercept + slope x (+ extra z): points are (x, y) or (x, y, z), z a 0/1 flag
    such as "the first batch of a query"; with r². None where the columns do not determine a fit."""
    rows = [(1.0, p[0], *p[2:]) for p in points]
    ys = [p[1] for p in points]
    k = len(rows[0]) if rows else 0
    if len(rows) <= k or len({p[0] for p in points}) < 2:
        return None
    # the normal equations (XᵀX) β = Xᵀy, by Gauss-Jordan elimination with partial pivoting
    m = [[sum(r[i] * r[j] for r in rows) for j in range(k)] for i in range(k)]
    for i in range(k):
        m[i].append(sum(r[i] * y for r, y in zip(rows, ys, strict=True)))
    for col in range(k):
        pivot = max(range(col, k), key=lambda i: abs(m[i][col]))
        if abs(m[pivot][col]) < 1e-12:
            return None
        m[col], m[pivot] = m[pivot], m[col]
        for i in range(k):
            if i != col:
                f = m[i][col] / m[col][col]
                m[i] = [a - f * b for a, b in zip(m[i], m[col], strict=True)]
    beta = [m[i][k] / m[i][i] for i in range(k)]
    mean = sum(ys) / len(ys)
    ss_tot = sum((y - mean) ** 2 for y in ys)
    fitted = [sum(b * v for b, v in zip(beta, r, strict=True)) for r in rows]
    ss_res = sum((y - f) ** 2 for y, f in zip(ys, fitted, strict=True))
    out = {"intercept": beta[0], "slope": beta[1], "r2": 1 - ss_res / ss_tot if ss_tot else 1.0}
    if k > 2:
        out["extra"] = beta[2]
    return out


#: the durations a micro-batch is split into: all of it, the sink's part (foreachBatch included), and
#: the rest of Spark's `durationMs` keys (what a batch spends outside addBatch)
SPLIT_DURATIONS = (
    "triggerExecution",
    "addBatch",
    "latestOffset",
    "getBatch",
    "queryPlanning",
    "walCommit",
    "commitOffsets",
    "commitBatch",
)


def cost_split(points: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per duration of SPLIT_DURATIONS, a fit through every batch's (rows, ms): ms per batch, µs per
    record, and the ms a query's first batch costs more (connections, producers, JIT: `first` marks
    it), with the per-batch share of a 200,000-record batch."""
    out: dict[str, Any] = {"batches": len(points)}
    for name in SPLIT_DURATIONS:
        usable = [p for p in points if p.get(name) is not None]
        firsts = any(p.get("first") for p in usable) and not all(p.get("first") for p in usable)
        fit = fit_line([(p["rows"], p[name], *((1.0 if p.get("first") else 0.0,) if firsts else ()))
                        for p in usable])  # fmt: skip
        if fit is None:
            out[name] = None
            continue
        per_batch, per_record_ms = fit["intercept"], fit["slope"]
        at_200k = per_batch + per_record_ms * 200_000
        out[name] = {
            "per_batch_ms": round(per_batch, 1),
            "per_record_us": round(per_record_ms * 1000, 3),
            "first_batch_extra_ms": round(fit["extra"], 1) if "extra" in fit else None,
            "r2": round(fit["r2"], 4),
            "per_batch_share_at_200k": round(per_batch / at_200k, 3) if at_200k else None,
        }
    return out


def split_table(split: Mapping[str, Any]) -> str:
    """The cost split: per sink, ms per batch and µs per record, for the whole batch and for addBatch."""
    sizes = ", ".join(f"{n:,}" for n in split.get("batch_records", []))
    lines = [
        f"cost split: each sink's batches at {sizes} records per trigger, a line through (rows, ms)",
        "",
        "| sink | duration | ms per batch | µs per record | first batch, ms more | per-batch share at 200k"
        " | r² | batches |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row, fit in split.get("fits", {}).items():
        for name in SPLIT_DURATIONS:
            f = fit.get(name)
            if f is None:
                lines.append(f"| {row} | {name} | - | - | - | - | - | {fit.get('batches')} |")
                continue
            lines.append(
                f"| {row} | {name} | {fmt_num(f['per_batch_ms'])} | {fmt_num(f['per_record_us'], 3)} | "
                f"{fmt_num(f['first_batch_extra_ms'])} | "
                f"{fmt_num(100 * f['per_batch_share_at_200k'], 0)} % | {f['r2']:.3f} | {fit.get('batches')} |"
            )
    return "\n".join(lines)


def fmt_rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def fmt_num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def throughput_table(summary: Mapping[str, Any], notes: Mapping[str, str] | None = None) -> str:
    """Markdown table: one line per row in ROWS order (rows absent from `summary` are left out)."""
    notes = notes or {}
    lines = [
        "| row | records/s (median) | vs row 1 | runs ok | note |",
        "|---|---:|---:|---:|---|",
    ]
    for row, label in ROWS:
        if row not in summary:
            continue
        s = summary[row]
        lines.append(
            f"| {label} | {fmt_rate(s['median_records_per_s'])} | {fmt_ratio(s['ratio_median'])} | "
            f"{s['ok_runs']}/{s['runs']} | {notes.get(row, '')} |"
        )
    return "\n".join(lines)


def latency_summary(samples_ms: Sequence[float]) -> dict[str, Any]:
    return {
        "samples": len(samples_ms),
        "p50_ms": percentile(samples_ms, 50),
        "p99_ms": percentile(samples_ms, 99),
        "max_ms": max(samples_ms) if samples_ms else None,
    }


def targets(result: Mapping[str, Any]) -> dict[str, Any]:
    """The issue's targets, each with its measured value and whether it is met (None: not measured)."""
    tp = result.get("throughput", {})

    def tp_ratio(row: str, base: str) -> float | None:
        """Median over rounds of row/base, both measured in the same round."""
        if row not in tp or base not in tp:
            return None
        base_by_round = dict(zip(tp[base]["rounds"], tp[base]["records_per_s"], strict=True))
        per_round = [
            ratio(rate, base_by_round.get(rnd))
            for rnd, rate in zip(tp[row]["rounds"], tp[row]["records_per_s"], strict=True)
        ]
        return median(per_round)

    rss = result.get("rss", {})
    latencies = result.get("latency", {})
    lat = latencies.get("eos_exactly_once", {})

    def p99_ratio(row: str, base: str) -> float | None:
        a, b = latencies.get(row, {}).get("p99_ms"), latencies.get(base, {}).get("p99_ms")
        return None if a is None or not b else a / b

    restore = result.get("restore", {})
    checks = {
        "eos_exactly_once_vs_builtin >= 1.0": (tp_ratio("eos_exactly_once", BASELINE), 1.0),
        "eos_exactly_once_vs_builtin >= 0.8 (floor)": (tp_ratio("eos_exactly_once", BASELINE), 0.8),
        "eos_at_least_once_vs_builtin >= 1.0": (tp_ratio("eos_at_least_once", BASELINE), 1.0),
        # the JVM data path (a query eos only writes), and the Python path's own cost over the control row
        "eos_exactly_once_jvm_vs_builtin >= 1.0": (tp_ratio("eos_exactly_once_jvm", BASELINE), 1.0),
        "eos_exactly_once_jvm_vs_builtin >= 0.95 (floor)": (tp_ratio("eos_exactly_once_jvm", BASELINE), 0.95),
        "eos_at_least_once_jvm_vs_builtin >= 1.0": (tp_ratio("eos_at_least_once_jvm", BASELINE), 1.0),
        "eos_exactly_once_jvm_small_batch_vs_builtin_small_batch >= 0.9": (
            tp_ratio("eos_exactly_once_jvm_small_batch", "spark_kafka_sink_small_batch"),
            0.9,
        ),
        "eos_exactly_once_vs_bare_map_in_arrow >= 0.9": (
            tp_ratio("eos_exactly_once", "bare_map_in_arrow"),
            0.9,
        ),
        "p99_latency_jvm_over_builtin <= 1.1": (p99_ratio("eos_exactly_once_jvm", BASELINE), 1.1),
        "eos_stateful_per_row_vs_builtin >= 0.5": (tp_ratio("eos_exactly_once_stateful", BASELINE), 0.5),
        "eos_stateful_process_batch_vs_builtin >= 0.8": (
            tp_ratio("eos_exactly_once_stateful_batch", BASELINE),
            0.8,
        ),
        "eos_exactly_once_small_batch_vs_builtin_small_batch >= 0.7": (
            tp_ratio("eos_exactly_once_small_batch", "spark_kafka_sink_small_batch"),
            0.7,
        ),
        "eos_exactly_once_10x_vs_builtin_10x >= 1.0": (
            tp_ratio("eos_exactly_once_10x_batch", "spark_kafka_sink_10x_batch"),
            1.0,
        ),
        "eos_connect_vs_classic >= 0.95": (tp_ratio("eos_exactly_once_connect", "eos_exactly_once"), 0.95),
        "eos_format_connect_vs_classic >= 0.95": (
            tp_ratio("eos_exactly_once_format_connect", "eos_exactly_once_format"),
            0.95,
        ),
        "eos_format_connect_vs_classic >= 0.9 (floor)": (
            tp_ratio("eos_exactly_once_format_connect", "eos_exactly_once_format"),
            0.9,
        ),
        "eos_jvm_connect_vs_classic >= 0.95": (
            tp_ratio("eos_exactly_once_jvm_connect", "eos_exactly_once_jvm"),
            0.95,
        ),
        "eos_jvm_connect_vs_classic >= 0.9 (floor)": (
            tp_ratio("eos_exactly_once_jvm_connect", "eos_exactly_once_jvm"),
            0.9,
        ),
        "eos_format_vs_foreach_batch >= 0.95": (
            tp_ratio("eos_exactly_once_format", "eos_exactly_once_jvm"),
            0.95,
        ),
        "eos_format_vs_foreach_batch >= 0.9 (floor)": (
            tp_ratio("eos_exactly_once_format", "eos_exactly_once_jvm"),
            0.9,
        ),
        "aggregation_eos_any_vs_builtin >= 0.9": (
            tp_ratio("agg_eos_exactly_once", "agg_spark_kafka_sink"),
            0.9,
        ),
        "stateful_with_a_snapshot_every_batch_vs_without >= 0.95": (
            tp_ratio("eos_exactly_once_stateful_batch_snapshots", "eos_exactly_once_stateful_batch"),
            0.95,
        ),
        "restore_from_snapshot_seconds <= 30": (
            max(
                (s.get("median_rebuild_seconds") or 0 for s in restore.get("snapshots", {}).values()),
                default=None,
            ),
            30.0,
        ),
        "worker_rss_10x_over_1x <= 1.2": (rss.get("ratio_10x_over_1x"), 1.2),
        "p99_latency_1s_trigger_s <= 2": (
            None if lat.get("p99_ms") is None else lat["p99_ms"] / 1000,
            2.0,
        ),
        "restore_records_per_s >= 200000": (
            median(  # the default state_store's (keys "<store> <mode>")
                m.get("median_records_per_s")
                for k, m in restore.get("modes", {}).items()
                if k.split()[0] == DEFAULT_STORE
            ),
            200_000,
        ),
    }
    out = {}
    for name, (value, bound) in checks.items():
        upper = "<=" in name
        met = None if value is None else (value <= bound if upper else value >= bound)
        out[name] = {"value": value, "bound": bound, "met": met}
    return out


def targets_table(checks: Mapping[str, Any]) -> str:
    lines = ["| target | measured | met |", "|---|---:|---|"]
    for name, c in checks.items():
        met = "-" if c["met"] is None else ("yes" if c["met"] else "NO")
        value = "-" if c["value"] is None else f"{c['value']:,.2f}"
        lines.append(f"| {name} | {value} | {met} |")
    return "\n".join(lines)


def plot(result: Mapping[str, Any], path: str) -> None:
    """Throughput bars with their ratio to row 1, and latency percentiles, into one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tp = result.get("throughput", {})
    rows = [(row, label) for row, label in ROWS if row in tp]
    lat = result.get("latency", {})
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 6), gridspec_kw={"width_ratios": [2, 1]})
    values = [tp[r]["median_records_per_s"] or 0 for r, _ in rows]
    bars = ax1.barh([label for _, label in rows], values, color="#4c72b0")
    for bar, (row, _) in zip(bars, rows, strict=True):
        text = f" {fmt_rate(tp[row]['median_records_per_s'])}/s  {fmt_ratio(tp[row]['ratio_median'])}"
        ax1.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, text, va="center", fontsize=8)
    ax1.invert_yaxis()
    ax1.set_xlabel("records/s (median of interleaved runs); ratio to row 1 within each round")
    machine = result.get("machine", {})
    params = result.get("params", {})
    ax1.set_title(
        f"Kafka -> Kafka throughput, {params.get('records', '?'):,} records, "
        f"{machine.get('cores', '?')} cores",
        fontsize=10,
    )
    ax1.set_xlim(0, max(values or [1]) * 1.45)
    names = list(lat)
    x = range(len(names))
    p50 = [(lat[n].get("p50_ms") or 0) / 1000 for n in names]
    p99 = [(lat[n].get("p99_ms") or 0) / 1000 for n in names]
    ax2.bar([i - 0.2 for i in x], p50, width=0.4, label="p50")
    ax2.bar([i + 0.2 for i in x], p99, width=0.4, label="p99")
    ax2.set_xticks(list(x))
    ax2.set_xticklabels(names, rotation=20, ha="right", fontsize=8)
    ax2.set_ylabel("seconds (input produce -> visible to read_committed)")
    ax2.set_title("end-to-end latency at a 1 s trigger", fontsize=10)
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def batch_steps(history: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """From a run's batch summaries (the sink's `on_batch`): per batch, the median of the sink's own time
    on the driver (`sink_ms`: foreachBatch's call, the tasks included), the producers replaced, and the
    tasks' time per protocol step (`BatchSummary.steps`, ms summed over the batch's partitions). The first
    batch (connections, fresh producers) is left out where there are others."""
    batches = list(history[1:] if len(history) > 1 else history)
    steps: dict[str, list[float]] = {}
    driver: dict[str, list[float]] = {}
    for summary in batches:
        for name, value in (summary.get("steps") or {}).items():
            steps.setdefault(name, []).append(value)
        for name, value in (summary.get("driver") or {}).items():
            driver.setdefault(name, []).append(value)
    return {
        "sink_ms_per_batch": median(1000 * b["seconds"] for b in batches),
        "producers_replaced_per_batch": median(b.get("producers_replaced", 0) for b in batches),
        "producers_replaced": sum(b.get("producers_replaced", 0) for b in history),
        "producers_created_per_batch": median(b.get("producers_created", 0) for b in batches),
        "steps_ms_per_batch": {name: median(values) for name, values in steps.items()},
        "driver_ms_per_batch": {name: median(values) for name, values in driver.items()},
    }


#: the protocol steps of `batch_steps`, in the order of a partition's run, with what each is
STEP_LABELS = (
    ("seconds", "a partition, all of it"),
    ("start_seconds", "steps 1-4"),
    ("init_seconds", "init_transactions"),
    ("offsets_seconds", "committed offset read"),
    ("check_seconds", "kept producer's currency check"),
    ("commit_seconds_total", "7a-7e commit"),
    ("flush_seconds", "7b flush"),
    ("send_offsets_seconds", "7c send_offsets"),
    ("end_seconds", "7d EndTxn"),
)


#: the driver's parts of the sink's time (BatchSummary.driver)
DRIVER_LABELS = (
    ("layout_ms", "D1 columns"),
    ("topics_ms", "D2 topics"),
    ("lineage_ms", "D3 lineage"),
    ("job_ms", "D4 Spark job"),
)


def steps_table(runs: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """Per eos row, medians over its runs of `batch_steps`' per-batch figures: where a batch's time goes."""
    each = {row: [run for r in rr for run in r.get("repeats", [r])] for row, rr in runs.items()}
    rows = {row: rr for row, rr in each.items() if any(r.get("steps_ms_per_batch") for r in rr)}
    if not rows:
        return ""
    names = [name for name, _ in STEP_LABELS]
    lines = [
        "where an eos batch's time goes: per batch, medians over runs (each column its own median); the"
        " driver's parts of the sink's time, then the tasks' steps in ms summed over the batch's partitions"
        " (tasks run side by side, so those add up to more than the sink's time)",
        "",
        "| row | sink ms | "
        + " | ".join(f"driver {label}" for _, label in DRIVER_LABELS)
        + " | producers created | producers replaced | "
        + " | ".join(label for _, label in STEP_LABELS)
        + " |",
        "|---|" + "---:|" * (3 + len(DRIVER_LABELS) + len(names)),
    ]
    for row, rr in rows.items():
        sink = median(r.get("sink_ms_per_batch") for r in rr)
        created = median(r.get("producers_created_per_batch") for r in rr)
        replaced = median(r.get("producers_replaced_per_batch") for r in rr)
        driver = [median((r.get("driver_ms_per_batch") or {}).get(n) for r in rr) for n, _ in DRIVER_LABELS]
        cells = (
            driver
            + [created, replaced]
            + [median((r.get("steps_ms_per_batch") or {}).get(n) for r in rr) for n in names]
        )
        lines.append(f"| {row} | {fmt_num(sink)} | " + " | ".join(fmt_num(c) for c in cells) + " |")
    return "\n".join(lines)


def extra_table(result: Mapping[str, Any]) -> str:
    """Latency, commit times, worker memory and restore rate, one line each."""
    lines = ["| figure | value |", "|---|---|"]
    for row, lat in result.get("latency", {}).items():
        lines.append(
            f"| e2e latency {row} (1 s trigger, {lat.get('rate_per_s')}/s) | "
            f"p50 {fmt_num(lat.get('p50_ms'), 0)} ms, p99 {fmt_num(lat.get('p99_ms'), 0)} ms "
            f"({lat.get('samples')}/{lat.get('expected')} samples) |"
        )
    for row, c in result.get("commit_ms", {}).items():
        count = "" if c.get("commits") is None else f" ({c['commits']} commits)"
        p50, p99 = fmt_num(c.get("p50_ms")), fmt_num(c.get("p99_ms"))
        lines.append(f"| commit time {row} | p50 {p50} ms, p99 {p99} ms{count} |")
    rss = result.get("rss", {})
    if rss:
        one, ten = fmt_num(rss.get("worker_peak_mib_1x")), fmt_num(rss.get("worker_peak_mib_10x"))
        lines.append(
            f"| worker peak RSS, eos exactly_once | {one} MiB at {rss.get('batch_1x_records'):,} rec/batch, "
            f"{ten} MiB at {rss.get('batch_10x_records'):,} ({fmt_ratio(rss.get('ratio_10x_over_1x'))}) |"
        )
    lines.extend(memory_lines(result.get("memory") or {}))
    for mode, m in result.get("restore", {}).get("modes", {}).items():
        lines.append(
            f"| restore {result['restore']['keys']:,}-key store, {mode} | "
            f"{fmt_rate(m.get('median_records_per_s'))} records/s |"
        )
    for store, m in result.get("restore", {}).get("snapshots", {}).items():
        lines.append(
            f"| the same store lost, {store}: whole changelog {m['full_seconds']:.1f} s; snapshot"
            f" ({m['snapshot_bytes'] / 2**20:.0f} MiB, taken in {m['snapshot_seconds']:.1f} s) + a"
            f" {m['tail']:,}-record tail {m['median_rebuild_seconds']:.2f} s |"
        )
    return "\n".join(lines)


def memory_lines(memory: Mapping[str, Any]) -> list[str]:
    """The executor memory figures (bench/_memory.py): per row, the JVM's peak RSS over its runs (their
    median), its RSS before the first and the last run, and its Python workers' peak."""
    lines = []
    for row, m in memory.items():
        if not isinstance(m, Mapping):
            continue
        if "error" in m:
            lines.append(f"| executor JVM RSS, {row} | failed: {m['error'][:120]} |")
            continue
        runs = m.get("runs") or []
        peak = median(r.get("jvm_rss_peak_mib") for r in runs)
        workers = median(r.get("worker_rss_peak_mib") for r in runs)
        first, last = runs[0].get("jvm_rss_before_mib"), runs[-1].get("jvm_rss_before_mib")
        lines.append(
            f"| executor JVM RSS, {row} ({memory.get('batch_records', 0):,} per trigger, a JVM of its own,"
            f" {len(runs)} runs) | peak {fmt_num(peak)} MiB (median over runs); before the first run"
            f" {fmt_num(first)} MiB, before the last {fmt_num(last)} MiB; Python workers' peak"
            f" {fmt_num(workers)} MiB |"
        )
    return lines


def profile_summary(stacks: Sequence[tuple[Sequence[str], int]], seconds: float, rate: int, top: int = 15):
    """From collapsed stacks (frames root first, sample count): the busiest functions by self samples
    and by inclusive samples, as percentages of all samples; `busy_workers` is samples / (seconds x rate),
    the average number of Python workers running (idle samples are not recorded)."""
    total = sum(count for _, count in stacks)
    boilerplate = (
        "process ",
        "<module> (daemon.py",
        "_run_module_as_main",
        "_run_code",
        "manager (daemon.py",
    )
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    for frames, count in stacks:
        if not frames:
            continue
        own[frames[-1]] = own.get(frames[-1], 0) + count
        for frame in set(frames):
            if not frame.startswith(boilerplate):
                inclusive[frame] = inclusive.get(frame, 0) + count

    def ranked(counts: Mapping[str, int]) -> list[tuple[str, float]]:
        best = sorted(counts.items(), key=lambda kv: -kv[1])[:top]
        return [(name, round(100 * n / total, 1)) for name, n in best]

    return {
        "samples": total,
        "busy_workers": round(total / (seconds * rate), 2) if seconds else None,
        "top_self": ranked(own) if total else [],
        "top_inclusive": ranked(inclusive) if total else [],
    }


def profile_table(profile: Mapping[str, Any], top: int = 12) -> str:
    """The profiled row's busiest functions, self and inclusive, as % of the workers' samples."""
    lines = [
        f"py-spy over the Python workers of one extra {profile.get('row')} run: "
        f"{profile.get('samples')} samples, {profile.get('busy_workers')} workers busy on average",
        "",
        "| % self | function | | % inclusive | function |",
        "|---:|---|---|---:|---|",
    ]
    own, incl = profile.get("top_self", [])[:top], profile.get("top_inclusive", [])[:top]
    for i in range(max(len(own), len(incl))):
        a = own[i] if i < len(own) else ("", None)
        b = incl[i] if i < len(incl) else ("", None)
        lines.append(f"| {fmt_num(a[1])} | {a[0]} | | {fmt_num(b[1])} | {b[0]} |")
    return "\n".join(lines)
