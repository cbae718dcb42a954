"""The pure figures of `make bench` (bench/bench_report.py): medians, per-round ratios, tables."""

from __future__ import annotations

from bench import bench_report as report


def test_percentile_is_nearest_rank_and_median_skips_failed_runs():
    values = list(range(1, 101))
    assert report.percentile(values, 50) == 50
    assert report.percentile(values, 99) == 99
    assert report.percentile([7.0], 99) == 7.0
    assert report.percentile([], 50) is None
    assert report.median([3, None, 1, 2]) == 2
    assert report.median([None]) is None


def test_ratios_are_taken_within_each_round():
    runs = {
        "spark_kafka_sink": [{"round": 0, "records_per_s": 100.0}, {"round": 1, "records_per_s": 200.0}],
        "eos_exactly_once": [{"round": 0, "records_per_s": 90.0}, {"round": 1, "records_per_s": 160.0}],
        "eos_at_least_once": [{"round": 0, "records_per_s": None}, {"round": 1, "records_per_s": 180.0}],
    }
    summary = report.summarize_throughput(runs)
    eo = summary["eos_exactly_once"]
    assert eo["median_records_per_s"] == 125.0
    assert eo["ratio_per_round"] == [0.9, 0.8]
    assert abs(eo["ratio_median"] - 0.85) < 1e-9
    assert abs(eo["ratio_of_medians"] - 125.0 / 150.0) < 1e-9
    alo = summary["eos_at_least_once"]
    assert alo["ok_runs"] == 1 and alo["ratio_per_round"] == [None, 0.9]
    assert summary["spark_kafka_sink"]["ratio_median"] == 1.0

    checks = report.targets({"throughput": summary})
    assert checks["eos_exactly_once_vs_builtin >= 0.8 (floor)"]["met"] is True
    assert checks["eos_exactly_once_vs_builtin >= 1.0"]["met"] is False
    # only round 1 has both: 180 / 200
    assert abs(checks["eos_at_least_once_vs_builtin >= 1.0"]["value"] - 180 / 200) < 1e-9
    assert checks["p99_latency_1s_trigger_s <= 2"]["met"] is None
    assert checks["eos_connect_vs_classic >= 0.95"]["met"] is None  # not measured, not passed


def test_the_rows_a_floor_compares_run_twice_a_round_mirrored_and_count_as_one_result():
    rows = ["spark_kafka_sink", "eos_exactly_once_jvm", "eos_exactly_once_format", "eos_exactly_once"]
    assert report.round_order(rows, 0, repeated=rows[:3]) == [
        "spark_kafka_sink",
        "eos_exactly_once_jvm",
        "eos_exactly_once_format",
        "eos_exactly_once_format",
        "eos_exactly_once_jvm",
        "spark_kafka_sink",
        "eos_exactly_once",
    ]
    assert report.round_order(rows, 1, repeated=rows[:3])[:4] == [
        "eos_exactly_once",
        "eos_exactly_once_format",
        "eos_exactly_once_jvm",
        "spark_kafka_sink",
    ]
    assert report.round_order(rows, 0, repeated=()) == rows
    apart = report.round_order(rows, 0, repeated=[rows[0], rows[3]])  # brought side by side
    assert apart == [rows[0], rows[3], rows[3], rows[0], rows[1], rows[2]]

    one = {"round": 2, "records_per_s": 100.0, "seconds": 10.0, "input_count": 1000, "worker_rss_peak_mib": 5}
    two = {"round": 2, "records_per_s": 50.0, "seconds": 20.0, "input_count": 1000, "worker_rss_peak_mib": 7}
    merged = report.merge_runs([one, two])
    assert merged["records_per_s"] == 2000 / 30  # both runs' records over both runs' seconds
    assert merged["round"] == 2 and merged["repeats"] == [one, two] and merged["worker_rss_peak_mib"] == 7
    failed = report.merge_runs([one, {"round": 2, "records_per_s": None, "error": "output has 3 records"}])
    assert failed["records_per_s"] is None and failed["error"] == "output has 3 records"
    assert report.merge_runs([one]) is one


def test_connect_is_compared_with_the_classic_row_of_the_same_round():
    runs = {
        "spark_kafka_sink": [{"round": 0, "records_per_s": 100.0}, {"round": 1, "records_per_s": 100.0}],
        "eos_exactly_once": [{"round": 0, "records_per_s": 100.0}, {"round": 1, "records_per_s": 200.0}],
        "eos_exactly_once_connect": [
            {"round": 0, "records_per_s": 80.0},
            {"round": 1, "records_per_s": 190.0},
        ],
    }
    checks = report.targets({"throughput": report.summarize_throughput(runs)})
    assert abs(checks["eos_connect_vs_classic >= 0.95"]["value"] - (0.8 + 0.95) / 2) < 1e-9
    assert checks["eos_connect_vs_classic >= 0.95"]["met"] is False


def test_tables_list_rows_in_report_order_with_ratios():
    runs = {
        "eos_exactly_once": [{"round": 0, "records_per_s": 50_000.0}],
        "spark_kafka_sink": [{"round": 0, "records_per_s": 100_000.0}],
        "quixstreams_exactly_once": [{"round": 0, "records_per_s": None, "error": "boom"}],
    }
    table = report.throughput_table(report.summarize_throughput(runs), {"quixstreams_exactly_once": "boom"})
    lines = table.splitlines()
    assert lines[2].startswith("| 1 Spark") and "100,000" in lines[2] and "1.00x" in lines[2]
    assert lines[3].startswith("| 3 eos exactly_once") and "0.50x" in lines[3]
    assert "| - | - | 0/1 | boom |" in lines[4]
    result = {
        "latency": {"eos_exactly_once": {**report.latency_summary([1000.0, 2000.0]), "rate_per_s": 10}},
        "rss": {
            "batch_1x_records": 10,
            "batch_10x_records": 100,
            "worker_peak_mib_1x": 100.0,
            "worker_peak_mib_10x": 110.0,
            "ratio_10x_over_1x": 1.1,
        },
        "memory": {
            "batch_records": 10,
            "spark_kafka_sink": {
                "runs": [
                    {"jvm_rss_before_mib": 500.0, "jvm_rss_peak_mib": 900.0, "worker_rss_peak_mib": 0.0},
                    {"jvm_rss_before_mib": 800.0, "jvm_rss_peak_mib": 950.0, "worker_rss_peak_mib": 0.0},
                ]
            },
            "eos_exactly_once": {"error": "exited 1: boom"},
        },
        "restore": {
            "keys": 5,
            "modes": {
                "sqlite wipe": {"median_records_per_s": 250_000.0},
                "rocksdb wipe": {"median_records_per_s": 1.0},
            },
        },
    }
    extra = report.extra_table(result)
    assert "p50 1,000 ms, p99 2,000 ms" in extra and "1.10x" in extra and "250,000" in extra
    assert "spark_kafka_sink (10 per trigger, a JVM of its own, 2 runs) | peak 925.0 MiB" in extra
    assert "before the first run 500.0 MiB, before the last 800.0 MiB" in extra
    assert "| executor JVM RSS, eos_exactly_once | failed: exited 1: boom |" in extra
    checks = report.targets(result)
    assert checks["p99_latency_1s_trigger_s <= 2"] == {"value": 2.0, "bound": 2.0, "met": True}
    assert checks["worker_rss_10x_over_1x <= 1.2"]["met"] is True
    assert checks["restore_records_per_s >= 200000"]["met"] is True
    assert "| restore_records_per_s >= 200000 | 250,000.00 | yes |" in report.targets_table(checks)


def test_profile_summary_ranks_self_and_inclusive_samples():
    stacks = [
        (["process 1:python", "main (worker.py:1)", "produce (eos/_kafka/_producer.py:55)"], 60),
        (["process 1:python", "main (worker.py:1)", "loads (serializers.py:472)"], 40),
    ]
    summary = report.profile_summary(stacks, seconds=2.0, rate=100)
    assert summary["samples"] == 100 and summary["busy_workers"] == 0.5
    assert summary["top_self"][0] == ("produce (eos/_kafka/_producer.py:55)", 60.0)
    assert summary["top_inclusive"][0] == ("main (worker.py:1)", 100.0)
    assert all(not name.startswith("process ") for name, _ in summary["top_inclusive"])
    assert "| 60.0 | produce (eos/_kafka/_producer.py:55) |" in report.profile_table({"row": "r", **summary})


def test_cost_split_fits_a_cost_per_batch_and_per_record():
    # 300 ms per batch and 2 µs per record, the whole batch; addBatch 100 ms + 1.5 µs
    points = [
        {"batch": i, "rows": rows, "triggerExecution": 300 + rows * 0.002, "addBatch": 100 + rows * 0.0015}
        for i, rows in enumerate([20_000, 20_000, 200_000, 2_000_000])
    ]
    split = report.cost_split(points)
    whole = split["triggerExecution"]
    assert whole["per_batch_ms"] == 300.0 and whole["per_record_us"] == 2.0 and whole["r2"] == 1.0
    assert whole["per_batch_share_at_200k"] == round(300 / 700, 3)
    assert split["addBatch"]["per_batch_ms"] == 100.0 and split["addBatch"]["per_record_us"] == 1.5
    assert whole["first_batch_extra_ms"] is None  # no batch marked first
    table = report.split_table({"batch_records": [20_000], "fits": {"eos_exactly_once": split}})
    assert "| eos_exactly_once | triggerExecution | 300.0 | 2.000 | - | 43 % | 1.000 | 4 |" in table


def test_cost_split_sets_a_query_s_first_batch_apart():
    # each query's first batch costs 900 ms more (connections, producers); 2M records is one batch
    points = []
    for rows, batches in ((20_000, 4), (200_000, 3), (2_000_000, 1)):
        run = [
            {"batch": i, "rows": rows, "triggerExecution": 300 + rows * 0.002 + 900 * (i == 0)}
            for i in range(batches)
        ]
        points += report.first_marked(run)
    whole = report.cost_split(points)["triggerExecution"]
    assert whole["per_batch_ms"] == 300.0 and whole["per_record_us"] == 2.0
    assert whole["first_batch_extra_ms"] == 900.0 and whole["r2"] == 1.0


def test_cost_split_needs_two_batch_sizes():
    same = [{"batch": 0, "rows": 10, "triggerExecution": 5, "addBatch": 1}] * 3
    assert report.cost_split(same)["triggerExecution"] is None
    assert report.fit_line([(1.0, 2.0)]) is None


def test_batch_point_reads_a_progress_object_or_its_dict():
    class Progress:
        batchId, numInputRows, durationMs = 3, 20, {"addBatch": 7, "triggerExecution": 9}

    as_dict = {"batchId": 3, "numInputRows": 20, "durationMs": {"addBatch": 7, "triggerExecution": 9}}
    expected = {"batch": 3, "rows": 20, "addBatch": 7, "triggerExecution": 9}
    assert report.batch_point(Progress()) == expected == report.batch_point(as_dict)


def test_batch_steps_leave_out_the_first_batch_and_take_medians_per_step():
    history = [
        {"seconds": 2.0, "producers_replaced": 4, "steps": {"seconds": 900.0, "init_seconds": 400.0}},
        {"seconds": 0.2, "producers_replaced": 0, "steps": {"seconds": 100.0, "init_seconds": 0.0}},
        {"seconds": 0.4, "producers_replaced": 2, "steps": {"seconds": 300.0, "init_seconds": 40.0}},
        {"seconds": 0.3, "producers_replaced": 1, "steps": {"seconds": 200.0, "init_seconds": 20.0}},
    ]
    for i, summary in enumerate(history):
        summary["driver"] = {"job_ms": 100.0 * (i + 1), "lineage_ms": 10.0}
    steps = report.batch_steps(history)
    assert steps["sink_ms_per_batch"] == 300.0
    assert steps["producers_replaced_per_batch"] == 1
    assert steps["producers_replaced"] == 7  # the first batch's count included
    assert steps["steps_ms_per_batch"] == {"seconds": 200.0, "init_seconds": 20.0}
    assert steps["driver_ms_per_batch"] == {"job_ms": 300.0, "lineage_ms": 10.0}
    table = report.steps_table({"eos_exactly_once": [steps], "spark_kafka_sink": [{"records_per_s": 1.0}]})
    assert "| eos_exactly_once | 300.0 | - | - | 10.0 | 300.0 | 0.0 | 1.0 | 200.0 | - | 20.0 |" in table
    assert "spark_kafka_sink" not in table


def test_every_step_of_the_report_is_a_partition_figure_the_tasks_return():
    from eos._core._stats import STATS_SCHEMA, STEPS

    assert [name for name, _ in report.STEP_LABELS] == list(STEPS)
    assert set(STEPS) <= set(STATS_SCHEMA.names)
