"""`make bench` (`python -m bench.run_bench`) and the figures it reports.

`run_bench.py` is the entry point: its arguments, the rounds, and the report it writes (with
`bench_report.py`, the figures, tables and plot). The rest is split by role: `_rows.py` the rows measured
(the `Bench` class: a `row_<name>` method each, the warm-up, the cost split), `_latency.py` and
`_restore.py` the two measurements after the rounds, `_children.py` the rows without Spark (run as child
processes of `python -m bench.run_bench --child-...`), `_measure.py` worker RSS and py-spy profiles,
`_commit_log.py` the eos rows' on_commit (which Spark's Python workers import), `_kafka.py` the topic
chores, `_machine.py` what the report says of the machine, `_common.py` what they all share.
`part_cost.py`, `dead_letter_cost.py` and `store_compare.py` are probes of their own, and `probes/` holds
one per figure the code's comments state (docs/design.md, "The figures behind the code's comments").
"""
