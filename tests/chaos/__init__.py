"""`make chaos`: the fault harness (`python -m tests.chaos.harness`).

`harness.py` is the entry point: its arguments (its docstring is its --help), the runs, the report.
`runner.py` the `Chaos` class (what a run starts, the faults it injects from outside, one run and its
verification), `live.py` the consumer that checks the output while the faults happen, `figures.py` a
run's figures from its logs, the table and the failures that fail the harness, `faults.py` the seeded
fault schedule, `cluster.py` the Spark standalone cluster, `chaos_pipeline.py` the driver program the
harness starts, kills and restarts.
"""
