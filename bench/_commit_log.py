"""The eos rows' `on_commit`, in a module of its own that imports nothing but the standard library.

It runs in Spark's Python workers, which import this module when they unpickle the sink (as they import
`examples.pipeline` for the stateful rows), and the bench measures those workers' memory: they must not
load more for it. (It used to be pickled by value, from `run_bench.py` running as `__main__`.)
"""

from __future__ import annotations

import json
import os


class CommitLog:
    """`on_commit`: one JSON line per committed transaction, from whichever worker committed it."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, commit) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps({"s": commit.seconds, "records": commit.records, "pid": os.getpid()}) + "\n")
