"""Probes behind figures that eos's comments state: each measures one thing in this process, without
Spark, and prints its figures. docs/design.md ("The figures behind the code's comments") says which
comment each one backs and what it printed. Those that need a broker take `--bootstrap` (a running one:
`make broker-up`, 127.0.0.1:9092); every probe makes topics of its own.

    .venv/bin/python -m bench.probes.<name> --help

`init_transactions`  a fresh producer's init_transactions: metadata warm-ups, reconnect.backoff.ms
`delivery_callback`  the produce loop with a per-record, a shared, or no delivery callback
`abort_after_refusal`  an abort right after a refused record, with and without the flush before it
`purge_after_abort`  the first record written after an abort that followed a refused batch
`restore_wait`       a roll-forward over one commit marker at two consume() waits
`sqlite_get`         a store read per key from SQLite, from the task's cache, and in bulk
`import_caches`      importlib.invalidate_caches() with the zipimporters a PySpark worker accumulates
`java_coordinator_wait`  the Java producer's retry.backoff.ms after a coordinator lookup (no Spark)
"""
