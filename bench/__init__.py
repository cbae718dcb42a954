"""`make bench` (`python -m bench.run_bench`) and the figures it reports."""
