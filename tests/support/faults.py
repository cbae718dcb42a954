"""`process_batch` functions that fail on purpose, for tests of a batch that fails after some of its
parts committed."""

from __future__ import annotations

import os


def fail_part_0_while(marker: str):
    """`process_batch` that passes rows through, and fails every attempt at part 0 while `marker` exists:
    the batch fails after the other parts committed, as when its driver dies mid-batch."""

    def process_batch(batch, state):
        from pyspark import TaskContext

        if TaskContext.get().partitionId() == 0 and os.path.exists(marker):
            raise RuntimeError("part 0 fails (test)")
        return batch.select(["key", "value"])

    return process_batch
