"""`df.writeStream.foreach(eos.foreach_writer(config))`: eos' protocol on a Spark ForeachWriter, the one
kind of Python sink Spark's real-time mode (PySpark 4.2+, `trigger(realTime=...)`) accepts (docs/design.md,
"Real-time mode"). It works in micro-batch mode too, one call per row where the sinks above take Arrow.

Spark calls it per task and epoch (real-time mode: one task per input partition; micro-batch: an epoch
is a batch):
    R1. `open(partition_id, epoch_id)`: nothing is written yet;
    R2. `process(row)`: rows gather into Arrow batches of `ROWS`; the first row's values are checked as a
        batch's columns are (D1, from their types) and the output topics as the driver checks them elsewhere
        (D2, `Preflight`, in each task: a ForeachWriter has no driver-side hook with the schema), then it
        names the input partition and starts its `PartitionTask` (steps 1-4, with the checks of
        `eos._core._input`: a ForeachWriter cannot regroup either), each batch is checked against `eos_input`
        and fed to it (steps 5-7, committing whenever due), and a row of another input partition fails the
        task (InputOrderError). Between rows, a thread of the writer feeds rows that have waited half of
        `commit_interval_ms` and commits a transaction open for `commit_interval_ms`: an epoch may be longer
        than `transaction_timeout_ms`, and rows may trickle or stop, so commits cannot wait for the next row
        or the epoch's end;
    R3. `close(None)`: the rest is fed and the open transaction committed: the epoch boundary is a
        commit point. `close(error)`: the producer is thrown away with its open transaction (the next
        incarnation's init_transactions aborts it) and Spark's retry redoes the epoch from the
        committed offset, as a micro-batch task's retry does.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Mapping
from typing import Any

import attrs
import pyarrow as pa

from eos._core._input import INPUT_COLUMN, INPUT_COLUMN_TYPE, Provenance, check_rows
from eos._core._spec import OnCommit, Process, TaskSpec
from eos._core._task import PartitionTask
from eos._spark._preflight import Preflight, functions, input_column, missing_input_column
from eos.config import Config
from eos.errors import BatchSchemaError, ConfigError, InputOrderError
from eos.records import datetime_ms
from eos.state import StoreSpec

#: Rows gathered before they are fed to the task as one Arrow batch.
ROWS = 1_000
_QUERY_ID = "sql.streaming.queryId"
_PROVENANCE = Provenance(column=INPUT_COLUMN)


class ForeachWriter:
    """A Spark ForeachWriter that writes each input partition's rows of an epoch exactly once (see the
    module). `process(row, state)`, `stores` and `on_commit` are `eos.sink`'s. `input_filtered`: the
    query drops input rows on purpose before the writer, so a gap between the committed offset and a
    task's first row is no sign of input another task holds (`format("eos")`'s `eos.input.filtered`).

    Parameters:

    - `config`: the `eos.Config` the writer writes with. Schema Registry serializers (`value_serializer`,
      `key_serializer`) are refused here: encode in `process`. With `metrics_port`, create the writer in
      the driver of a classic Spark session (its figures travel in a Spark accumulator).
    - `process`: a function `process(row, state)` per input row, as `eos.sink`'s (there is no
      `process_batch` here). None (the default): each row is itself the output.
    - `stores`: the state stores `process` may use, as `eos.sink`'s.
    - `on_commit`: called with an `eos.Commit` on the executor after each commit, as `eos.sink`'s.
    - `input_filtered`: True where the query drops input rows on purpose before the writer: a gap in a
      task's offsets (after the committed offset, or between its rows) is then taken for dropped rows,
      not checked for input another task holds. Default False: a gap that holds input records fails the
      task (InputOrderError).
    """

    def __init__(
        self,
        config: Config,
        process: Process | None = None,
        stores: Mapping[str, StoreSpec | str] | None = None,
        on_commit: OnCommit | None = None,
        *,
        input_filtered: bool = False,
    ) -> None:
        if config.value_serializer is not None or config.key_serializer is not None:
            raise ConfigError(
                "value_serializer" if config.value_serializer is not None else "key_serializer",
                "foreach_writer does not take Schema Registry serializers yet: encode in process, or use"
                ' foreachBatch(eos.sink(config)) or format("eos")',
            )
        self.config = config
        self.functions = functions(process, None, stores, on_commit)
        #: D1 and D2 as every way in runs them; here in each task, which sees values, not a schema
        self.preflight = Preflight(config, self.functions)
        self.input_filtered = input_filtered
        #: the accumulator the tasks add their figures to, served by a MetricsListener (`metrics_port`)
        self.figures = None
        if config.metrics_port is not None:
            from eos._spark._listener import figures_of  # pyspark.sql: only where it is used

            self.figures = figures_of(config)

    def open(self, partition_id: int, epoch_id: int) -> bool:  # R1
        self.epoch = epoch_id
        self.task: PartitionTask | None = None
        self.rows: list[dict[str, Any]] = []
        self.gathered_at = 0.0  # when the oldest gathered row arrived (monotonic)
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._flusher: threading.Thread | None = None
        self._failure: BaseException | None = None  # what the flusher met, raised at the next call
        return True

    def process(self, row) -> None:  # R2
        values = row.asDict(recursive=True)
        stamp = self.config.output_timestamp_column
        if stamp is not None and isinstance(values.get(stamp), datetime.datetime):
            # a naive local datetime here; as epoch ms, its Arrow column holds no time zone to guess
            values[stamp] = datetime_ms(values[stamp])
        with self._lock:
            self._raise_failure()
            if self.task is None:
                self._start(values)
                self._flusher = threading.Thread(target=self._flush, name="eos-foreach-commits", daemon=True)
                self._flusher.start()
            elif (values["topic"], values["partition"]) != (self.task.topic, self.task.partition):
                raise InputOrderError(
                    f"a task of epoch {self.epoch} got rows of input partitions {self.task.topic}/"
                    f"{self.task.partition} and {values['topic']}/{values['partition']}: eos.foreach_writer"
                    " writes one input partition per task (as real-time mode gives it). Nothing more of"
                    " this epoch was written.",
                    topic=values["topic"],
                    partition=values["partition"],
                    offset=values["offset"],
                )
            if not self.rows:
                self.gathered_at = time.monotonic()
            self.rows.append(values)
            if len(self.rows) >= ROWS:
                self._feed()

    def close(self, error) -> None:  # R3 (Spark calls it with the error open or process raised)
        self._stopped.set()
        if self._flusher is not None:
            self._flusher.join()
        if self.task is None:
            return
        if error is not None:
            self.task.fail()
            return
        try:
            self._raise_failure()
            self._feed()
            stats = self.task.finish()
        except BaseException:
            self.task.fail()
            raise
        if self.figures is not None:  # to the driver as the task ends (a failed task's are dropped)
            key = (self.task.job.query, self.config.app_id, stats.topic, stats.partition, self.epoch)
            self.figures.add({key: {**attrs.asdict(stats), "guarantee": self.config.processing_guarantee}})

    def _flush(self) -> None:
        """Between rows: feed rows that waited half of commit_interval_ms, commit what is due."""
        interval = self.config.commit_interval_ms / 1000
        while not self._stopped.wait(interval / 4):
            with self._lock:
                if self._failure is not None:
                    return
                try:
                    if self.rows and time.monotonic() - self.gathered_at >= interval / 2:
                        self._feed()
                    self.task.commit_if_due()
                except BaseException as exc:  # noqa: BLE001 - raised in the task's thread at its next call
                    self._failure = exc
                    return

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _start(self, values: dict[str, Any]) -> None:
        from pyspark import TaskContext

        dtypes = [(name, _spark_type(name, value, self.config)) for name, value in values.items()]
        layout, _ = self.preflight.columns(dtypes)  # D1, from the types of the first row's values
        if input_column(dtypes) is None:
            raise BatchSchemaError(missing_input_column("a ForeachWriter sees no lineage to read it from"))
        self.preflight.topics()  # D2
        context = TaskContext.get()
        job = TaskSpec(
            config=self.config,
            batch_id=self.epoch,
            layout=layout,
            functions=self.functions,
            check_input=not self.input_filtered,
            query=context.getLocalProperty(_QUERY_ID) if context is not None else None,
        )
        self.task = PartitionTask(job, values["topic"], values["partition"])
        self.task.start(_batch([values]))  # steps 1-4: nothing is written or skipped before _feed

    def _feed(self) -> None:
        if self.rows:
            batch, self.rows = _batch(self.rows), []
            check_rows(batch, self.task.layout, _PROVENANCE, -1)
            self.task.feed(batch)


def _spark_type(name: str, value: Any, config: Config) -> str:
    """The Spark SQL type a row's value has, as `DataFrame.dtypes` names it, for the checks of
    `batch_layout` (a ForeachWriter sees values, not the schema). A null says nothing: it passes as
    the type the column should have."""
    if value is None:
        expected = {
            config.output_topic_column: "string",
            config.output_partition_column: "int",
            config.output_timestamp_column: "timestamp",
            INPUT_COLUMN: INPUT_COLUMN_TYPE,
        }
        return expected.get(name, "binary")
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "bigint" if name == "offset" else "int"
    if isinstance(value, bytes | bytearray):
        return "binary"
    if isinstance(value, str):
        return "string"
    if isinstance(value, float):
        return "double"
    if isinstance(value, datetime.datetime):
        return "timestamp"
    if isinstance(value, dict):
        return "struct<" + ",".join(f"{k}:{_spark_type(k, v, config)}" for k, v in value.items()) + ">"
    if isinstance(value, list):
        if name == "headers":  # Spark's Kafka headers, empty or not
            return "array<struct<key:string,value:binary>>"
        return f"array<{_spark_type('', value[0], config) if value else 'void'}>"
    return type(value).__name__


def _batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(rows)
