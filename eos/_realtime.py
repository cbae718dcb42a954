"""`df.writeStream.foreach(eos.foreach_writer(config))`: eos' protocol on a Spark ForeachWriter, the one
kind of Python sink Spark's real-time mode (4.1+, `trigger(realTime=...)`) accepts (docs/design.md,
"Real-time mode"). It works in micro-batch mode too, one call per row where the sinks above take Arrow.

Spark calls it per task and epoch (real-time mode: one task per input partition; micro-batch: an epoch
is a batch):
    R1. `open(partition_id, epoch_id)`: nothing is written yet;
    R2. `process(row)`: rows gather into Arrow batches of `ROWS`; the first row names the input
        partition and starts its `PartitionTask` (steps 1-4, with the checks of `eos._input`: a
        ForeachWriter cannot regroup either), each batch is fed to it (steps 5-7, committing whenever
        due), and a row of another input partition fails the task (InputOrderError);
    R3. `close(None)`: the rest is fed and the open transaction committed: the epoch boundary is a
        commit point. `close(error)`: the producer is thrown away with its open transaction (the next
        incarnation's init_transactions aborts it) and Spark's retry redoes the epoch from the
        committed offset, as a micro-batch task's retry does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from eos._input import INPUT_COLUMN, INPUT_COLUMN_TYPE, Provenance, check_rows
from eos._task import Job, OnCommit, PartitionTask, Process
from eos.config import Config
from eos.errors import BatchSchemaError, InputOrderError
from eos.sink import batch_layout, input_column, missing_input_column, store_specs
from eos.state import StoreSpec

#: Rows gathered before they are fed to the task as one Arrow batch.
ROWS = 1_000
_KAFKA_TYPES = {
    "topic": "string",
    "partition": "int",
    "offset": "bigint",
    "value": "binary",
    "key": "binary",
    INPUT_COLUMN: INPUT_COLUMN_TYPE,
}
_QUERY_ID = "sql.streaming.queryId"


class ForeachWriter:
    """A Spark ForeachWriter that writes each input partition's rows of an epoch exactly once (see the
    module). `process(row, state)`, `stores` and `on_commit` are `eos.sink`'s."""

    def __init__(
        self,
        config: Config,
        process: Process | None = None,
        stores: Mapping[str, StoreSpec | str] | None = None,
        on_commit: OnCommit | None = None,
    ) -> None:
        self.config = config
        self.process_row = process
        self.stores = store_specs(process, None, stores)
        self.on_commit = on_commit

    def open(self, partition_id: int, epoch_id: int) -> bool:  # R1
        self.epoch = epoch_id
        self.task: PartitionTask | None = None
        self.rows: list[dict[str, Any]] = []
        return True

    def process(self, row) -> None:  # R2
        values = row.asDict(recursive=True)
        if self.task is None:
            self._start(values)
        elif (values["topic"], values["partition"]) != (self.task.topic, self.task.partition):
            raise InputOrderError(
                f"a task of epoch {self.epoch} got rows of input partitions {self.task.topic}/"
                f"{self.task.partition} and {values['topic']}/{values['partition']}: eos.foreach_writer"
                " writes one input partition per task (as real-time mode gives it). Nothing more of this"
                " epoch was written.",
                topic=values["topic"],
                partition=values["partition"],
                offset=values["offset"],
            )
        self.rows.append(values)
        if len(self.rows) >= ROWS:
            self._feed()

    def close(self, error) -> None:  # R3 (Spark calls it with the error open or process raised)
        if self.task is None:
            return
        if error is not None:
            self.task.fail()
            return
        try:
            self._feed()
            self.task.finish()
        except BaseException:
            self.task.fail()
            raise

    def _start(self, values: dict[str, Any]) -> None:
        from pyspark import TaskContext

        dtypes = [(name, _KAFKA_TYPES.get(name, "unknown")) for name in values]
        layout, _ = batch_layout(self.config, dtypes, self.process_row is not None)
        if input_column(dtypes) is None:
            raise BatchSchemaError(missing_input_column("a ForeachWriter sees no lineage to read it from"))
        context = TaskContext.get()
        job = Job(
            config=self.config,
            batch_id=self.epoch,
            layout=layout,
            process=self.process_row,
            stores=self.stores,
            on_commit=self.on_commit,
            check_input=True,
            query=context.getLocalProperty(_QUERY_ID) if context is not None else None,
        )
        self.task = PartitionTask(job, values["topic"], values["partition"])
        self.task.start(_batch([values]))  # steps 1-4: nothing is written or skipped before _feed

    def _feed(self) -> None:
        if self.rows:
            batch, self.rows = _batch(self.rows), []
            check_rows(batch, self.task.layout, _PROVENANCE, -1)
            self.task.feed(batch)


_PROVENANCE = Provenance(column=INPUT_COLUMN)


def _batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(rows)
