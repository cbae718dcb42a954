"""`df.writeStream.format("eos")`: the sink as a Spark Python data source (PySpark 4.0+).

Per micro-batch Spark calls, in this order:
    S1. `EosDataSource.streamWriter` on the driver (in a Python worker of the driver, or of the Spark
        Connect server): the options become a Config (`settings_of`), the batch's columns are checked
        (D1) and the output topic (D2). An error here fails the batch before any task starts.
    S2. `_Writer.write` in every task, on its Spark partition's Arrow record batches: the executor side
        of the foreachBatch sink (`eos._core._task.run_partition`, steps 1-8), each input partition first
        checked for input that reached another task (`eos._core._input`): a data source cannot regroup rows.
        Returns each written input partition's figures as the task's commit message.
    S3. `_Writer.commit(messages, batch_id)` on the driver, once every task succeeded: refuses a batch
        in which two tasks wrote one input partition, logs the batch, and appends it to the ledger
        beside the Spark checkpoint (`eos._spark._ledger`). `abort` records what the tasks that did succeed
        committed.

Spark's Kafka options are taken as Spark's Kafka sink takes them (`kafka.bootstrap.servers`, `topic`,
`kafka.*` for every client eos creates, the Java client's names translated for librdkafka: a PLAIN or
SCRAM `kafka.sasl.jaas.config`, PEM trust stores, PKCS12 key stores); eos' own settings by their dotted
keys under `eos.`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import attrs
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamWriter,
    WriterCommitMessage,
)

from eos._core import _parts
from eos._core._arrow import Layout
from eos._core._input import INPUT_COLUMN, Provenance
from eos._core._spec import Functions, TaskSpec
from eos._core._stats import totals
from eos._core._task import run_partition
from eos._kafka import _java, _topics
from eos._log import get_logger
from eos._spark import _jvm_writer, _ledger
from eos._spark._preflight import (
    JOB_BATCH_ID,
    Preflight,
    input_column,
    job_config,
    missing_input_column,
)
from eos._spark._rows_to_parts import placement_of
from eos.config import Config, did_you_mean, dotted_field, dotted_keys
from eos.errors import BatchSchemaError, ConfigError, InputOrderError, NondeterministicBatchError

try:  # PySpark 4.1+: the streaming writer that takes Arrow record batches
    from pyspark.sql.datasource import DataSourceStreamArrowWriter

    _WRITER_BASES: tuple[type, ...] = (DataSourceStreamArrowWriter,)
except ImportError:  # PySpark 4.0 hands Arrow batches to any writer that is a DataSourceArrowWriter
    from pyspark.sql.datasource import DataSourceArrowWriter

    _WRITER_BASES = (DataSourceStreamWriter, DataSourceArrowWriter)

#: Options of the data source itself (not Config fields), with their defaults.
_OWN_OPTIONS = {
    # the query drops input rows before the sink: no look for input another task holds (`eos._core._input`)
    "eos.input.filtered": "false",
    # where the ledger is kept (default: <checkpointLocation>/eos-ledger), and how many batches
    "eos.ledger.dir": None,
    "eos.ledger.retain": str(_ledger.RETAIN),
}
#: where a query's store snapshots go by default, under its checkpoint location
SNAPSHOT_DIR = "eos-snapshots"
_GROUPS = ("producer.", "consumer.", "admin.", "schema.registry.")
#: Spark's batch id of the micro-batch a task belongs to (a local property Spark sets per batch).
_BATCH_ID = "streaming.sql.batchId"
#: `df.write.format("eos")`: the batch job's id (`eos.write`'s job_id)
JOB_ID_OPTION = "eos.job.id"

_QUERY_ID = "sql.streaming.queryId"


@attrs.frozen
class Settings:
    config: Config
    check_input: bool
    ledger: str | None
    retain: int


def _option_name(field: str) -> str:
    """The option that sets Config field `field` (for errors)."""
    named = {"bootstrap_servers": "kafka.bootstrap.servers", "output_topic": "topic"}
    if field in named:
        return named[field]
    head, _, rest = field.partition(".")
    if head == "kafka":
        return field
    if head in ("producer", "consumer", "admin"):
        return f"eos.{head}.{rest}"
    return "eos." + field.replace("_", ".")


def _boolean(key: str, value: str) -> bool:
    word = str(value).strip().lower()
    if word not in ("true", "false"):
        raise ConfigError(key, f"{value!r} is not true or false")
    return word == "true"


def settings_of(options: Mapping[str, str]) -> Settings:
    """The Config and the data source's own settings from its options; an unknown `eos.*` key, a bad
    value or a missing setting raises ConfigError naming the option."""
    properties: dict[str, str] = {}
    clients: dict[str, str] = {}
    own = dict(_OWN_OPTIONS)
    checkpoint = None
    for key, value in options.items():
        key = key.lower()
        if key == "kafka.bootstrap.servers":
            properties["bootstrap.servers"] = value
        elif key == "topic":
            properties["output.topic"] = value
        elif key.startswith("kafka."):
            clients[key[len("kafka.") :]] = value
        elif key in own:
            own[key] = value
        elif key.startswith("eos."):
            name = key[len("eos.") :]
            if dotted_field(name) is None and not name.startswith(_GROUPS):
                raise ConfigError(
                    key,
                    "is not an eos option (eos.app.id, eos.processing.guarantee, eos.commit.every, ...,"
                    " eos.producer.*, eos.consumer.*, eos.admin.*, eos.schema.registry.*, eos.input.filtered,"
                    " eos.ledger.dir, eos.ledger.retain; Kafka client settings go under kafka.*)"
                    + did_you_mean(key, [f"eos.{k}" for k in dotted_keys()] + list(own)),
                )
            properties[name] = value
        elif key == "checkpointlocation":
            checkpoint = value
        # any other option is Spark's (path, queryName, ...), as Spark's Kafka sink ignores them
    if "bootstrap.servers" not in properties:
        raise ConfigError("kafka.bootstrap.servers", "must be set (the brokers eos writes to)")
    if "app.id" not in properties and "application.id" not in properties:
        raise ConfigError("eos.app.id", "must be set (the consumer group and transactional.id prefix)")
    try:
        clients = _java.from_java(clients)  # Spark users give the Java client's names (sasl.jaas.config)
    except ConfigError as exc:
        raise ConfigError(f"kafka.{exc.field}", exc.reason) from None
    try:
        config = Config.from_properties(properties, kafka=clients)
    except ConfigError as exc:
        raise ConfigError(_option_name(exc.field), exc.reason) from None
    if config.metrics_port is not None:
        raise ConfigError(
            "eos.metrics.port",
            'format("eos") serves its Prometheus figures from the driver\'s process:'
            " eos.register(spark, metrics_port=9108) or spark.streams.addListener(eos.MetricsListener(9108))"
            " (each batch commits in a short-lived Python worker, where no endpoint would stay up)",
        )
    try:
        retain = int(own["eos.ledger.retain"])
    except ValueError:
        retain = 0
    if retain < 1:
        raise ConfigError("eos.ledger.retain", f"{own['eos.ledger.retain']!r} is not a positive integer")
    ledger = own["eos.ledger.dir"] or (_ledger.location_of(checkpoint) if checkpoint else None)
    if checkpoint and config.state_snapshot_location is None:  # beside Spark's own state
        snapshots = checkpoint.rstrip("/") + "/" + SNAPSHOT_DIR
        config = attrs.evolve(config, state_snapshot_location=snapshots)
    return Settings(
        config=config,
        check_input=not _boolean("eos.input.filtered", own["eos.input.filtered"]),
        ledger=ledger,
        retain=retain,
    )


class EosCommit(WriterCommitMessage):
    """A task's commit message: the figures of each input partition it wrote (`PartitionStats`)."""

    def __init__(
        self, task: int, attempt: int, partitions: list[dict[str, Any]], query: str | None = None
    ) -> None:
        self.task = task
        self.attempt = attempt
        self.partitions = partitions
        self.query = query  # Spark's query id, for `eos.MetricsListener` (`_ledger.announce`)


class EosDataSource(DataSource):
    """`format("eos")`. `eos.register` registers a subclass that carries its name and functions."""

    short_name: ClassVar[str] = "eos"
    functions: ClassVar[Functions] = Functions()

    @classmethod
    def name(cls) -> str:
        return cls.short_name

    def streamWriter(self, schema, overwrite: bool) -> _Writer:  # noqa: N802 - Spark's name
        return self._writer(settings_of(self.options), schema, self.options)  # S1

    def writer(self, schema, overwrite: bool) -> _JobWriter:
        """`df.write.format("eos")`: a batch job (`eos.write`), named by the option `eos.job.id`."""
        if overwrite:
            raise ConfigError(
                "mode",
                'format("eos") appends to Kafka topics: use .mode("append") (a topic is not overwritten)',
            )
        job_id = next((v for k, v in self.options.items() if k.lower() == JOB_ID_OPTION), None)
        if job_id is None:
            raise ConfigError(
                JOB_ID_OPTION,
                'a batch write (df.write.format("eos")) is a batch job: name it with .option("eos.job.id",'
                " ...); a re-run with the same id writes only what its earlier runs did not commit",
            )
        options = {k: v for k, v in self.options.items() if k.lower() != JOB_ID_OPTION}
        settings = settings_of(options)
        settings = attrs.evolve(settings, config=job_config(settings.config, job_id), ledger=None)
        return _JobWriter(self._writer(settings, schema, options, batch_id=JOB_BATCH_ID))

    def _writer(
        self, settings: Settings, schema, options: Mapping[str, str], batch_id: int | None = None
    ) -> _Writer:
        """The checks before any task (D1, D2; P0's placement under input_mode "any"), and the writer
        the tasks run: of a stream's micro-batches, or of batch job's one batch (`batch_id`)."""
        if settings.config.data_path == "jvm":  # eos.DefaultSource would have taken it, had it been able
            why = _jvm_writer.ineligible(settings.config, self.functions) or (
                "it reached eos's Python data source (a sink registered under another name, eos's JVM"
                " provider not on the driver's class path, or on a Spark Connect server eos's Python"
                " process could not start: the server's log says why)"
            )
            raise ConfigError("eos.data.path", f"'jvm' cannot write this query: {why}; set it to 'auto'")
        placement = None
        if settings.config.input_mode == "any":
            placement = _placed(schema, options, settings.config)
            settings = attrs.evolve(settings, config=attrs.evolve(settings.config, parts=placement.parts))
        preflight = Preflight(
            settings.config, self.functions, "input_mode 'any'" if batch_id is None else "a batch job"
        )
        own = (_parts.PART_COLUMN, _parts.HASH_COLUMN) if placement is not None else ()
        dtypes = [
            (field.name, field.dataType.simpleString()) for field in schema.fields if field.name not in own
        ]
        layout, _ = preflight.columns(dtypes)  # D1
        if placement is not None:
            _topics.ensure_parts_topic(settings.config)
        elif input_column(dtypes) is None:
            raise BatchSchemaError(missing_input_column("a data source sees no lineage to read it from"))
        preflight.topics()  # D2
        return _Writer(settings, layout, self.functions, placement, batch_id=batch_id)


def source_class(name: str, functions: Functions) -> type[EosDataSource]:
    """A data source class named `name` whose sink runs `functions` (pickled with it to Spark)."""
    return type(f"EosDataSource_{name}", (EosDataSource,), {"short_name": name, "functions": functions})


def _placed(schema, options: Mapping[str, str], config: Config) -> _parts.RowPlacement:
    """How `eos.place` placed the batch's rows; refused where it did not (input_mode "any")."""
    placement = placement_of(schema)
    if placement is None:
        raise BatchSchemaError(
            'format("eos") with eos.input.mode "any" writes rows eos.place placed: write'
            ' `eos.place(df, parts=8).writeStream.format("eos")...` (place last, just before'
            " writeStream). A data source is told neither how many partitions a batch has nor how its rows"
            " were split, so unplaced, a re-run split otherwise (a file source restarted on more cores)"
            " would write rows its first run committed. Nothing was written."
        )
    given = any(key.lower() == "eos.parts" for key in options)  # settings_of parsed it into config.parts
    if given and config.parts != placement.parts:
        raise ConfigError(
            "eos.parts",
            f"is {config.parts}, but eos.place placed the rows in {placement.parts} parts: the placement"
            " decides (drop the option, or place in as many parts)",
        )
    return placement


class _Writer(*_WRITER_BASES):
    def __init__(
        self,
        settings: Settings,
        layout: Layout,
        functions: Functions,
        placement: _parts.RowPlacement | None = None,
        batch_id: int | None = None,
    ) -> None:
        self.settings = settings
        self.layout = layout
        self.functions = functions
        self.placement = placement
        #: a batch job's one batch id; None: Spark's, per micro-batch
        self.batch_id = batch_id

    def write(self, iterator: Iterator[Any]) -> EosCommit:  # S2, on an executor
        from pyspark import TaskContext

        context = TaskContext.get()
        batch_id = (
            self.batch_id if self.batch_id is not None else int(context.getLocalProperty(_BATCH_ID) or -1)
        )
        if self.placement is not None:
            # eos.place made Spark's partition p part p (docs/design.md); P0 as the sink does it, per task.
            self._check_placement(batch_id, context.partitionId())
            part_job = _parts.PartSpec(
                config=self.settings.config,
                batch_id=batch_id,
                layout=self.layout,
                parts=self.placement.parts,
                functions=self.functions,
                placement=self.placement,
            )
            stats = [
                row
                for batch in _parts.run_parts(part_job, iterator, context.partitionId())
                for row in batch.to_pylist()
            ]
            return EosCommit(
                context.partitionId(), context.attemptNumber(), stats, context.getLocalProperty(_QUERY_ID)
            )
        job = TaskSpec(
            config=self.settings.config,
            batch_id=batch_id,
            layout=self.layout,
            functions=self.functions,
            check_input=self.settings.check_input,
            query=context.getLocalProperty(_QUERY_ID),
            provenance=Provenance(column=INPUT_COLUMN),
        )
        partitions = [
            row for stats in run_partition(job, iterator, context.partitionId()) for row in stats.to_pylist()
        ]
        return EosCommit(context.partitionId(), context.attemptNumber(), partitions, job.query)

    def _check_placement(self, batch_id: int, spark_partition: int) -> None:
        """P0 in a task: the batch is placed as eos.place said, and as its first run placed it."""
        placement = self.placement
        if spark_partition >= placement.parts:
            raise NondeterministicBatchError(
                f"batch {batch_id}: Spark partition {spark_partition} of rows eos.place placed in"
                f" {placement.parts} parts: the DataFrame was repartitioned or unioned after eos.place;"
                " call it last, just before writeStream. Nothing of this partition was written.",
                batch_id=batch_id,
                part=spark_partition,
            )
        first = _parts.batch_placement(self.settings.config, batch_id)
        if first is not None and not _parts.same_placement(first, placement):
            raise NondeterministicBatchError(
                f"batch {batch_id} was first run placed {first.describe()}, and some of its parts are"
                f" committed; this run places it {placement.describe()}. Place it as its first run did"
                " (eos.place's parts and part_columns) until the batch is written, then change it (a new"
                " placement applies from the next batch). Nothing of this part was written.",
                batch_id=batch_id,
                part=spark_partition,
            )

    def commit(self, messages: list[EosCommit | None], batch_id: int) -> None:  # S3, on the driver
        self._record(messages, batch_id, "committed")
        seen: dict[tuple[str, int], int] = {}
        for message in messages:
            for stats in message.partitions if message else ():
                tp = (stats["topic"], stats["partition"])
                if tp in seen and seen[tp] != message.task:
                    raise InputOrderError(
                        f"batch {batch_id}: tasks {seen[tp]} and {message.task} both wrote input partition"
                        f" {tp[0]}/{tp[1]}: the Kafka source split it (minPartitions, maxRecordsPerPartition)"
                        " or the query moved its rows (repartition, union, ...); with eos.input.filtered"
                        " set, nothing checked that before they wrote. Drop what splits it. The ledger"
                        " (`eos ledger show`) has what each task committed: rows below a task's first one"
                        " that no task wrote are written again after `eos offsets reset` of the partition"
                        " to the lowest such offset (what follows is then written twice, nothing lost).",
                        topic=tp[0],
                        partition=tp[1],
                        offset=stats["first_offset"] if stats["first_offset"] is not None else -1,
                    )
                seen[tp] = message.task

    def abort(self, messages: list[EosCommit | None], batch_id: int) -> None:
        self._record(messages, batch_id, "failed")

    def _record(self, messages: list[EosCommit | None], batch_id: int, outcome: str) -> None:
        config = self.settings.config
        partitions = [
            {"task": m.task, "attempt": m.attempt, **stats} for m in messages if m for stats in m.partitions
        ]
        log = get_logger(
            "eos.sink", app_id=config.app_id, guarantee=config.processing_guarantee, batch_id=batch_id
        )
        log.info(
            f"batch {outcome}",
            partitions=len(partitions),
            tasks_failed=sum(1 for m in messages if m is None),
            **totals(partitions),
        )
        query = next((m.query for m in messages if m and getattr(m, "query", None)), None)
        _ledger.record(
            self.settings.ledger,
            self.settings.retain,
            batch_id,
            config,
            outcome,
            query,
            partitions,
            tasks_failed=sum(1 for m in messages if m is None),
            data_path="python",
        )


class _JobWriter(DataSourceArrowWriter):
    """`df.write.format("eos")`: each Spark partition of the placed rows is a part of the job's one batch."""

    def __init__(self, writer: _Writer) -> None:
        self.writer = writer

    def write(self, iterator: Iterator[Any]) -> EosCommit:  # on an executor
        return self.writer.write(iterator)

    def commit(self, messages: list[EosCommit | None]) -> None:  # on the driver
        self.writer._record(messages, JOB_BATCH_ID, "committed")

    def abort(self, messages: list[EosCommit | None]) -> None:
        self.writer._record(messages, JOB_BATCH_ID, "failed")
