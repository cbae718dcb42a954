"""The pre-flight: what the driver checks and decides about a batch before any task runs, the same for
every way in (`eos.sink`, `format("eos")` stream and batch, `eos.write`; `eos.foreach_writer` runs D1
in its tasks, which see values, not a schema): the columns and their types (D1), the output and
dead-letter topics, the Schema Registry subjects and the broker's transaction limit (D2, `Preflight`),
where each row's input coordinates are proven from (D3); and the user's functions, taken once per way
in (`functions`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from eos import _names
from eos._core._arrow import Layout
from eos._core._input import INPUT_COLUMN, INPUT_COLUMN_TYPE, READ_IN_COLUMN, Provenance
from eos._core._spec import Functions, OnCommit, Process, ProcessBatch
from eos._kafka import _cluster, _topics
from eos._registry import _decoders, _serializers
from eos._spark import _partitioning
from eos.config import Config
from eos.errors import BatchSchemaError, ConfigError
from eos.state import StoreSpec

_INPUT = {"topic": ("string",), "partition": ("int",), "offset": ("bigint", "int")}
_BYTES = ("binary", "string")
_HEADERS = "array<struct<key:string,value:binary>>"
#: an output timestamp: an instant, or epoch milliseconds (timestamp_ntz is a wall-clock time in no zone)
_TIMESTAMPS = ("timestamp", "bigint", "int")


def functions(
    process: Process | None = None,
    process_batch: ProcessBatch | None = None,
    stores: Mapping[str, StoreSpec | str] | None = None,
    on_commit: OnCommit | None = None,
) -> Functions:
    """The user's functions as every entry point takes them, checked (`Functions.of`); a struct value
    in a row `process` sees is Spark's own `Row`, as in the rows of `foreachBatch`."""
    from pyspark.sql import Row

    return Functions.of(process, process_batch, stores, on_commit, struct=Row)


class Preflight:
    """D1 and D2 for one way in, with the checks of its functions against the config: built once (a
    sink, a data source's writer, a batch job), asked per batch."""

    def __init__(self, config: Config, functions: Functions, what: str = "input_mode 'any'") -> None:
        self.config = config
        self.functions = functions
        self._cluster_checked = False
        if functions.stores and config.input_mode == "any":
            raise ConfigError(
                "stores",
                f"{what} has no state stores: a store's changelog is kept per input partition, and these"
                " rows have none. Spark's own state (groupBy, flatMapGroupsWithState, transformWithState)"
                " serves such a query; eos writes its result.",
            )

    def columns(self, dtypes: list[tuple[str, str]]) -> tuple[Layout, list[str]]:
        """D1 (`batch_layout`) for this way in's functions."""
        return batch_layout(self.config, dtypes, self.functions.any, self.functions.process_batch is not None)

    def topics(self, log: Any = None) -> None:
        """D2: the output and dead-letter topics and the schemas (`check_output_topic`), and, once, what
        exactly_once needs of the cluster (`_cluster.check_transactions`)."""
        check_output_topic(self.config, log)
        if self.config.exactly_once and not self._cluster_checked:
            _cluster.check_transactions(self.config)
            self._cluster_checked = True


def batch_layout(
    config: Config, dtypes: list[tuple[str, str]], has_process: bool, process_batch: bool = False
) -> tuple[Layout, list[str]]:
    """D1: check a batch's columns (`DataFrame.dtypes`); return the names the tasks read and the columns
    they receive. Shared by `Sink` and the `format("eos")` data source."""
    if process_batch and config.output_timestamp_column is not None:
        raise ConfigError(
            "output_timestamp_column",
            "process_batch's outputs are not the batch's rows, so they cannot take a column of them:"
            " return a 'timestamp' column from process_batch instead (e.g. the input batch's own)",
        )
    types = dict(dtypes)
    names = [name for name, _ in dtypes]

    def check(name: str, allowed: tuple[str, ...] | None, why: str) -> str:
        if name not in types:
            raise BatchSchemaError(
                f"batch has no {name!r} column ({why}); columns are {names}. Nothing was written."
            )
        if allowed is not None and types[name] not in allowed:
            raise BatchSchemaError(
                f"column {name!r} has type {types[name]}, expected {' or '.join(allowed)}."
                " Nothing was written."
            )
        return name

    if config.input_mode == "any":
        if all(types.get(name) in allowed for name, allowed in _INPUT.items()):
            raise BatchSchemaError(
                "batch has the Kafka source's topic, partition and offset columns, and input_mode is 'any':"
                " rows straight from Kafka are written with their input offsets in the transaction under"
                " input_mode='kafka' (the default); under 'any', drop or rename those columns (Spark's"
                " Kafka sink would read 'topic' and 'partition' as the output's). Nothing was written."
            )
    else:
        why = (
            "the input coordinate from the Kafka source; keep it in the batch, or set input_mode='any' for"
            " a DataFrame without them (an aggregation, a join, another source)"
        )
        for name, allowed in _INPUT.items():
            check(name, allowed, why)
    out_topic, out_partition = config.output_topic_column, config.output_partition_column
    out_timestamp = config.output_timestamp_column
    if out_topic is not None:
        check(out_topic, ("string",), "named by output_topic_column")
    if out_partition is not None:
        check(out_partition, ("int",), "named by output_partition_column")
    if out_timestamp is not None:
        check(out_timestamp, _TIMESTAMPS, "named by output_timestamp_column")
    for field in ("value", "key"):
        if getattr(config, f"{field}_deserializer") is None:
            continue
        check(field, ("binary",), f"read by {field}_deserializer: the Kafka source's bytes")
        if not has_process and getattr(config, f"{field}_serializer") is None:
            raise ConfigError(
                f"{field}_deserializer",
                f"the {field} is read into a struct, which is written only through a {field}_serializer:"
                " set one, or give the sink a process or process_batch function",
            )
    _decoders.Deserializers.of(config)  # a reader schema that cannot work, refused here, not in every task
    if has_process:
        # `process` / `process_batch` see whole rows; eos reads only the input coordinates from them.
        return Layout(out_topic=out_topic, out_partition=out_partition, out_timestamp=out_timestamp), names

    # A field with a Schema Registry serializer may be a struct or any type its schema describes.
    serialized = _serializers.serialized_fields(config)
    value_types = None if "value" in serialized else _BYTES
    key_types = None if "key" in serialized else _BYTES
    check("value", value_types, "the output record's value, as in Spark's Kafka sink")
    columns = [*_INPUT, "value"] if config.input_mode == "kafka" else ["value"]
    for name, allowed in (("key", key_types), ("headers", (_HEADERS,))):
        if name in types:
            columns.append(check(name, allowed, ""))
    for name in (out_topic, out_partition, out_timestamp):
        if name is not None and name not in columns:
            columns.append(name)
    layout = Layout(
        value="value",
        key="key" if "key" in columns else None,
        headers="headers" if "headers" in columns else None,
        out_topic=out_topic,
        out_partition=out_partition,
        out_timestamp=out_timestamp,
    )
    return layout, columns


def input_provenance(
    lineage: _partitioning.Lineage | None, dtypes: list[tuple[str, str]]
) -> tuple[Provenance, bool]:
    """D3: what the tasks check each row's input coordinates against, and whether the batch needs
    regrouping. Classic Spark's lineage names the Kafka range each Spark partition read; where it cannot
    be read (Spark Connect), each row must carry `eos_input` (`eos.read_stream` adds it)."""
    if lineage is not None and lineage.partitions is not None:
        if lineage.one_run_per_task:
            return Provenance(partitions=lineage.partitions), False
        return Provenance(partitions=lineage.partitions, read_in=READ_IN_COLUMN), True
    if input_column(dtypes) is not None:
        return Provenance(column=INPUT_COLUMN), True
    if lineage is not None:
        return Provenance(ranges=lineage.ranges), True
    raise BatchSchemaError(
        missing_input_column("Spark Connect hands foreachBatch no lineage to read it from")
    )


def task_slots(batch_df, provenance: Provenance) -> int | None:
    """D3: the number of tasks to run a batch in where it has more Spark partitions (one per input
    partition, unshuffled) than the cluster has cores, else None. Every Python task costs Spark a
    worker hand-off and a result round trip, a gap between one task's end and the next one's start on
    the same worker, so a batch of 4 input partitions on 2 cores ran in two waves; coalesced, each task
    writes its partitions one after another (each still one run, in offset order) in one wave, and the
    batch takes less time (docs/design.md, "One wave of tasks per batch"). The rows are then checked
    against the range of the Spark partition they were read in (`spark_partition_id()` below the
    coalesce)."""
    if provenance.partitions is None or provenance.read_in is not None:
        return None
    try:
        cores = batch_df.sparkSession.sparkContext.defaultParallelism
    except Exception:  # noqa: BLE001 - no SparkContext to ask (Spark Connect has none)
        return None
    return cores if 0 < cores < len(provenance.partitions) else None


def input_column(dtypes: list[tuple[str, str]]) -> str | None:
    """`eos_input` if the batch has it (with its type checked), else None."""
    types = dict(dtypes)
    if INPUT_COLUMN not in types:
        return None
    if types[INPUT_COLUMN].replace(" ", "") != INPUT_COLUMN_TYPE:
        raise BatchSchemaError(
            f"column {INPUT_COLUMN!r} has type {types[INPUT_COLUMN]}, expected {INPUT_COLUMN_TYPE}: it"
            " holds each row's input coordinates as the Kafka source read them (eos.read_stream adds it)."
            " Nothing was written."
        )
    return INPUT_COLUMN


def missing_input_column(why: str) -> str:
    """The message for a batch without `eos_input` where eos needs it (`why`)."""
    return (
        f"batch has no {INPUT_COLUMN!r} column: eos checks that each row's topic, partition and offset are"
        " the Kafka record's own before it writes or skips anything, and here it can only check them"
        f" against {INPUT_COLUMN!r} ({why}). eos.read_stream adds it; for a DataFrame from"
        ' spark.readStream.format("kafka"), add it right after load() with eos.with_input_column(df), and'
        " keep it in the DataFrame you write. Nothing was written."
    )


def check_output_topic(config: Config, log: Any = None) -> None:
    """D2: a broker answers and the configured output topic exists (and the dead-letter topic); the
    configured schemas are registered (or found) in the Schema Registry."""
    _topics.require(config, [config.output_topic] if config.output_topic else [], "output")
    if config.on_error == "dead_letter":
        _topics.require(config, [config.dead_letter_topic], "dead-letter")
    _serializers.resolve(config, log)


#: a batch job's one batch id (`eos.write`, `df.write.format("eos")`)
JOB_BATCH_ID = 0


def job_config(config: Config, job_id: Any) -> Config:
    """The config batch job `job_id` of `config`'s app runs under (`eos.write`, `df.write.format("eos")`):
    its own app id (`job_app_id`), its rows written in parts."""
    return attrs.evolve(config, app_id=job_app_id(config, job_id), input_mode="any")


def job_app_id(config: Config, job_id: Any) -> str:
    """The app id batch job `job_id` of `config`'s app runs under (ConfigError naming `job_id` where it
    cannot be one)."""
    if not isinstance(job_id, str) or not re.fullmatch(r"[A-Za-z0-9._-]+", job_id):
        raise ConfigError("job_id", f"{job_id!r} must be letters, digits, '.', '_' or '-'")
    for name, value in (("job_id", job_id), ("app_id", config.app_id)):
        if ".job." in f".{value}.":  # app a.job.x's job y and app a's job x.job.y would be one name
            raise ConfigError(name, f"{value!r} names a batch job's app id ('.job.' in it): pick another")
    app = _names.job_app_id(config.app_id, job_id)
    if len(app) > 200:
        raise ConfigError(
            "job_id", f"{job_id!r} is too long: '<app_id>.job.<job_id>' must be <= 200 characters"
        )
    return app
