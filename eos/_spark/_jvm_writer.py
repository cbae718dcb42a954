"""The JVM data path (eos/_spark/jvm: PassThrough, InputPartition): a pass-through batch's rows written by
the executors' Kafka client, never entering Python. The sink runs its driver checks (D1-D3) as for the
Python path, then hands the batch's plan to the JVM writer through Py4J, as the placement classes are
handed theirs (`_affinity._Jvm`), and collects the same stats rows the Python tasks return.

Which queries take it (`ineligible`, `decide`), and how what the JVM writer refuses becomes the Python
path's own error (`raise_refusal`): the JVM writer sends the refusal's data, and the error is built here
by the function the Python path raises it with, so both paths say the same."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from eos import _names
from eos._core import _arrow, _deadletter, _input
from eos._core._arrow import Layout
from eos._core._incarnation import commit_lost
from eos._core._input import Provenance
from eos._core._spec import Functions
from eos._core._stats import STATS_SCHEMA
from eos._kafka import _cluster, _collector, _java, _offsets, _topics, _translate
from eos._kafka._offsets import Committed
from eos._scope import PartitionScope
from eos._spark import _partitioning, _server
from eos._spark._affinity import _Jvm
from eos.config import Config
from eos.errors import ConfigError, EosError, FatalError, ProduceError, TransactionAbortableError

_CLASS = "eos.spark.JvmWriter"
#: what the JVM writer's refusals carry in their message (eos/_spark/jvm/Refusal.java)
_REFUSAL = re.compile(r"eos-refusal:(\{.*?\})(?:\n|$)", re.MULTILINE)


def available(session: Any) -> bool:
    """Whether `session` can run the JVM writer (eos's jar loaded in a classic session, or eos's plugin
    in the Spark Connect server)."""
    return unavailable(session) is None


def ineligible(config: Config, functions: Functions) -> str | None:
    """Why a query cannot take the JVM data path (None: it can): what the JVM writer does not do."""
    if config.input_mode != "kafka":
        return "input_mode is 'any'"
    if config.on_error != "fail" and not config.exactly_once:
        return "on_error is 'dead_letter' with at_least_once (the JVM writer dead-letters in transactions)"
    why = functions_ineligible(functions)
    if why is not None:
        return why
    for name in ("key_serializer", "value_serializer", "key_deserializer", "value_deserializer"):
        if getattr(config, name, None) is not None:
            return f"{name} is set"
    try:
        _java.java_producer(config.producer)
    except ConfigError as exc:
        return f"{exc.field} {exc.reason}"
    return None


def functions_ineligible(functions: Functions) -> str | None:
    """Why a query with these functions cannot take the JVM data path (None: it can)."""
    for name in ("process", "process_batch", "on_commit"):
        if getattr(functions, name, None) is not None:
            return f"the query has a {name} function"
    if functions.stores:
        return "the query has state stores"
    return None


def unavailable(session: Any) -> str | None:
    """Why the JVM writer cannot run in `session` (None: it can)."""
    if not _Jvm.classic(session):
        return _server.unavailable(session)
    if _Jvm.of(session) is None:
        return "eos's jar (eos/_spark/jvm/eos-placement.jar) did not load"
    return None


def require_eligible(config: Config, functions: Functions) -> None:
    """data_path "jvm" refused, before the query starts, for a query the JVM writer cannot write."""
    why = ineligible(config, functions) if config.data_path == "jvm" else None
    if why is not None:
        raise ConfigError("data_path", f"'jvm' cannot write this query: {why}; set data_path to 'auto'")


def decide(config: Config, functions: Functions, session: Any, log: Any) -> bool:
    """Whether this query's pass-through batches go through the JVM writer (`data_path`), at its first
    batch: "jvm" refuses a session that cannot run it, "auto" says once why it stays on the Python path."""
    if config.data_path == "python":
        return False
    why = ineligible(config, functions) or unavailable(session)
    if why is None:
        log.info("data path", data_path="jvm")
        return True
    if config.data_path == "jvm":
        raise ConfigError("data_path", f"'jvm' cannot write this query: {why}; set data_path to 'auto'")
    log.info("data path", data_path="python", why=why)
    return False


def write(
    frame: Any,
    fields: list[tuple[str, str]],
    config: Config,
    batch_id: int,
    layout: Layout,
    provenance: Provenance,
) -> list[dict]:
    """`frame`'s columns `fields` (name, Spark SQL type), grouped by input partition as the sink groups rows
    for the Python tasks, written by the JVM writer in one Spark job: one Py4J call per batch. The stats
    rows, one per input partition; a refusal raises the Python path's error."""
    spec = plan(config, batch_id, layout, provenance, fields, _record_limit(config))
    try:
        jvm = _Jvm.of(frame.sparkSession)
        if jvm is not None:
            rows = json.loads(jvm.shared(_CLASS).write(frame._jdf, json.dumps(spec)))
        else:  # Spark Connect: the server's plugin runs the same tasks
            rows = _server.write(frame, spec)
    except Exception as exc:
        raise_refusal(exc, config, batch_id, layout, provenance)
        raise
    return _stats(rows)


def write_with_lineage(
    frame: Any, fields: list[tuple[str, str]], config: Config, batch_id: int, layout: Layout
) -> tuple[list[dict] | None, _partitioning.Lineage | None]:
    """`frame` written as `write` writes it, its lineage read by the JVM writer from the plan its tasks
    run, in one call (through Py4J, or one request to eos's plugin under Spark Connect): the batch is
    planned once, and no lineage is asked first. The stats rows, where each Spark partition read one
    input partition that no other read; else (None, the batch's lineage as `_partitioning.lineage` gives
    it), nothing written."""
    spec = plan(config, batch_id, layout, Provenance(), fields, _record_limit(config))
    try:
        jvm = _Jvm.of(frame.sparkSession)
        if jvm is not None:
            answer = json.loads(jvm.shared(_CLASS).writeAsRead(frame._jdf, json.dumps(spec)))
        else:
            answer = _server.write_with_lineage(frame, spec)
    except Exception as exc:
        if refusal(exc) is not None:  # the refusal's words may name the range the source read
            try:
                found = _partitioning.lineage(frame, server=True)
            except Exception:  # noqa: BLE001 - the refusal is raised without the range's words
                found = None
            partitions = found.partitions if found is not None else None
            raise_refusal(exc, config, batch_id, layout, Provenance(partitions=partitions))
        raise
    if isinstance(answer, list):
        return _stats(answer), None
    found = _partitioning.decoded(answer["lineage"])
    return None, found if jvm is not None else _partitioning.server_lineage(found)


def _stats(rows: list[list]) -> list[dict]:
    """The JVM writer's stats rows (eos's STATS_DDL order) as the Python tasks' stats dicts."""
    return [dict(zip(STATS_SCHEMA.names, row, strict=True)) for row in rows]


#: the output topic's record batch limit, by (bootstrap servers, topic): (asked at, bytes or None)
_limits: dict[tuple[str, str], tuple[float, int | None]] = {}
_LIMIT_TTL_S = 300.0


def _record_limit(config: Config) -> int | None:
    """The output topic's max.message.bytes, asked once every few minutes: the Java client splits a record
    batch the broker refuses as too large into batches of its own batch.size, which a topic below that
    refuses again, until delivery.timeout.ms; a producer that never builds a batch above the topic's
    limit refuses a record too large at once instead, naming it (the Python path's client is told so by
    the broker at once)."""
    if config.output_topic is None:
        return None
    key = (config.bootstrap_servers, config.output_topic)
    asked, limit = _limits.get(key, (0.0, None))
    if time.monotonic() - asked > _LIMIT_TTL_S:
        value = _cluster.topic_setting(config, config.output_topic, "max.message.bytes")
        limit = int(value) if value is not None and value.isdigit() else None
        _limits[key] = (time.monotonic(), limit)
    return limit


def plan(
    config: Config,
    batch_id: int,
    layout: Layout,
    provenance: Provenance,
    written: list[tuple[str, str]],
    limit: int | None = None,
) -> dict:
    """The batch's plan as the JVM writer reads it (eos/_spark/jvm/Spec.java, JvmWriter.java): `written`,
    the columns it selects (name, Spark SQL type) in order; `limit`: the output topic's max.message.bytes,
    which no record batch the JVM's producers build may exceed."""
    fields = {name: (i, sql) for i, (name, sql) in enumerate(written)}
    roles = {
        "key": layout.key,
        "value": layout.value,
        "headers": layout.headers,
        "topic": layout.topic,
        "partition": layout.partition,
        "offset": layout.offset,
        "read_in": provenance.read_in,
        "out_topic": layout.out_topic,
        "out_partition": layout.out_partition,
        "out_timestamp": layout.out_timestamp,
    }
    columns = {role: fields[name][0] for role, name in roles.items() if name is not None}
    client = {k.removeprefix("kafka."): v for k, v in _java.spark_source_options(config).items()}
    sources = None
    if provenance.partitions is not None:
        sources = [[s.topic, s.partition, s.start, s.end] for s in provenance.partitions]
    # the stamp's `out` as the Python path writes it (_offsets.stamp): everything before `;out=`'s end
    own = _offsets.stamp(config)
    return {
        "select": [name for name, _ in written],
        "app_id": config.app_id,
        "group": _names.input_group(config.app_id),
        "exactly_once": config.exactly_once,
        "out": own.split(";out=", 1)[1],
        "output_topic": config.output_topic,
        "restore_group": _names.restore_group(config.app_id),
        "batch_id": batch_id,
        "commit_every": config.commit_every,
        "commit_interval_ms": config.commit_interval_ms,
        "operation_timeout_ms": config.operation_timeout_ms,
        "transaction_timeout_ms": config.transaction_timeout_ms,
        "accept_foreign_offsets": config.accept_foreign_offsets,
        "max_producers": config.max_producers_per_worker,
        "columns": columns,
        "key_is_string": layout.key is not None and fields[layout.key][1] == "string",
        "value_is_string": fields[layout.value][1] == "string",
        "timestamp_kind": fields[layout.out_timestamp][1] if layout.out_timestamp else None,
        "sources": sources,
        "client": client,
        "producer": _producer(config, limit),
        "dead_letters": _dead_letters(config) if config.on_error == "dead_letter" else None,
    }


def _dead_letters(config: Config) -> dict:
    """on_error "dead_letter": the topic, the bound, and the Python path's header names and words for the
    JVM writer's dead letters (its messages rendered here with @@-marked places the JVM fills)."""
    error = ProduceError("", topic="", partition=0, offset=0)
    names = (
        "exception",
        "kind",
        "message",
        "topic",
        "partition",
        "offset",
        "app_id",
        "batch_id",
        "value_bytes",
    )
    return {
        "topic": config.dead_letter_topic,
        "max": config.max_dead_letters_per_batch,
        "exception": _deadletter.class_name(error),
        "kind": type(error).__name__,
        "headers": {name: getattr(_deadletter, name.upper()) for name in names},
        "refused": _collector.refused("@@out@@", "@@reason@@", "", 0, 0, True).reason,
        "before_1970": _collector.before_1970("@@out@@", "@@timestamp@@", "", 0, 0).reason,  # type: ignore[arg-type]
        "words": _JAVA_REFUSALS,
    }


def _producer(config: Config, limit: int | None) -> dict[str, str]:
    """The JVM's producer settings: eos's defaults, the user's (`Config.kafka`'s that a producer takes,
    then `Config.producer`, in the Java client's names, as the Python path's producers take both), then
    what eos decides whatever they say, as for the Python path's producers
    (`eos._kafka._clients.producer_settings`): idempotence, the transaction timeout, a delivery timeout
    within it; and no record batch above the output topic's `limit`."""
    # retry.backoff.ms: the Java producer waits it out before the request that needed a coordinator
    # it had to look up (InitProducerId at a fresh producer's initTransactions, TxnOffsetCommit at its
    # first sendOffsetsToTransaction): at the default 100 ms a new query's first batch paid ~200 ms per
    # input partition (docs/design.md, "The Java producer's wait after a coordinator lookup").
    settings = {"client.id": _names.client_id(config.app_id), "linger.ms": "5", "retry.backoff.ms": "20"}
    settings.update(_java.java_producer(config.kafka, shared=True))
    settings.update(_java.java_producer(config.producer))
    transaction = config.transaction_timeout_ms
    delivery = min(int(settings.get("delivery.timeout.ms", transaction)), transaction)
    # the Java client refuses a delivery timeout below linger.ms + request.timeout.ms
    request = min(int(settings.get("request.timeout.ms", 30_000)), delivery - int(settings["linger.ms"]))
    settings.update(
        {
            "enable.idempotence": "true",
            "transaction.timeout.ms": str(transaction),
            "delivery.timeout.ms": str(delivery),
            "request.timeout.ms": str(request),
        }
    )
    if limit is not None:
        settings["max.request.size"] = str(min(limit, int(settings.get("max.request.size", 1 << 20))))
        settings["batch.size"] = str(min(limit, int(settings.get("batch.size", 16_384))))
    return settings


#: the Java client's exceptions for a record refused for good, in librdkafka's words
_JAVA_REFUSALS = {
    "RecordTooLargeException": "Broker: Message size too large",
    "RecordBatchTooLargeException": "Broker: Message size too large",
    "InvalidTimestampException": "Broker: Invalid timestamp",
    "InvalidRecordException": "Broker: Invalid record",
    "CorruptRecordException": "Broker: Corrupt message",
}


def refusal(exc: BaseException) -> dict | None:
    """The data of the JVM writer's refusal that failed the job `exc` reports (the last one), else None."""
    found = _REFUSAL.findall(str(exc))
    return json.loads(found[-1]) if found else None


def raise_refusal(
    exc: BaseException, config: Config, batch_id: int, layout: Layout, provenance: Provenance
) -> None:
    """Raise the Python path's error for the JVM writer's refusal in `exc`; nothing where there is none."""
    found = refusal(exc)
    if found is None:
        return
    error = _error(found, config, batch_id, layout, provenance)
    raise error from exc


def _error(r: dict, config: Config, batch_id: int, layout: Layout, provenance: Provenance) -> EosError:
    name, topic, partition = r["error"], r.get("topic"), r.get("partition")
    if name == "ForeignOffsetError":
        try:
            _offsets.check_stamps(config, {(topic, partition): Committed(r["offset"], r["metadata"])})
        except EosError as error:
            return error
    scope = PartitionScope.of(config, topic, partition, batch_id)
    if name == "CommitLostError":
        entry = Committed(r["offset"], r["metadata"])
        lost = [tuple(item) for item in r["lost"]]
        return commit_lost(scope, entry, _offsets.fields(r["metadata"]), r["written"], lost)
    if name == "InputGapError":
        return _input.gap_error(scope, r["committed"], r["reset_from"], r["resumes_at"], r["unseen"])
    if name == "InputOrderError":
        build = _arrow.two_runs if r["kind"] == "two_runs" else _arrow.not_increasing
        return build((topic, partition), r["offset"])
    if name == "InputCoordinateError":
        source = r.get("source")
        truth = (
            _input.read_from(provenance.partitions[source])
            if source is not None and provenance.partitions is not None
            else "the Kafka source gives every record a topic, partition and offset"
        )
        return _input.coordinate_error(topic, partition, r["offset"], r["column"], truth, layout)
    if name == "TooManyDeadLettersError":
        where = {"topic": topic, "partition": partition, "offset": r["offset"]}
        return _deadletter.too_many(config, batch_id, r["count"], r["last"], **where)
    if name == "ProduceError":
        kind, offset = r["kind"], r.get("offset")
        if kind == "letter_refused":
            return _deadletter.letter_refused(
                r["reason"], r["first"], topic=topic, partition=partition, offset=offset
            )
        if kind == "no_topic":
            return ProduceError(_collector.NO_TOPIC, topic=topic, partition=partition, offset=offset)
        if kind == "unwritable":
            reason = _topics.unwritable_reason(r["output_topic"], r["why"], r["detail"])
            return ProduceError(reason, topic=topic, partition=partition, offset=offset)
        if kind == "timestamp":
            return _collector.before_1970(r["output_topic"], r["timestamp"], topic, partition, offset)
        reason = r["reason"]
        if r.get("exception") in _JAVA_REFUSALS:  # in the words the Python path's client uses
            reason = f"{_JAVA_REFUSALS[r['exception']]} ({reason})"
        if r.get("poison"):
            return _collector.refused(r["output_topic"], reason, topic, partition, offset, True)
        return TransactionAbortableError(f"delivery to {r['output_topic']!r} failed: {reason}")
    if name == "FatalError" and r.get("kind") == "acl":
        tid = r["transactional_id"]
        return FatalError(f"init_transactions ({tid}): {_translate.missing_acl(r['code'], tid)}")
    return EosError(f"the JVM writer refused: {r}")
