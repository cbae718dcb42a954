"""The input offsets of the group `app_id`: read (require-stable), committed (at_least_once), and
the group metadata that `send_offsets_to_transaction` needs (exactly_once).

Every offset eos commits carries a stamp in its commit metadata: `eos/1;app=<app_id>;out=<output>`, or
`eos/1;app=<app_id>;by=cli;was=<the offset it replaced>` when an operator moved it with `eos offsets
reset` (`eos._core._input.require_reset_honoured` reads it). The `format("eos")` data source adds
`;query=<query id>;batch=<batch id>;from=<task's first row>` (`eos._core._input` reads them). eos skips
every input row below the committed offset, so an offset committed by anything else (a consumer that
reuses the group id with auto-commit, `kafka-consumer-groups --reset-offsets`, a second query with the
same app_id writing elsewhere) would silently drop rows: `committed()` refuses it with
ForeignOffsetError unless `accept_foreign_offsets` is set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs
from confluent_kafka import KafkaException, TopicPartition

from eos import _names
from eos._kafka import _clients, _translate, _witness
from eos.config import Config
from eos.errors import EosError, ForeignOffsetError, OffsetsUnstableError, RetriableError

STAMP_VERSION = "eos/1"
CLI_STAMP_SOURCE = "cli"


def stamp(
    config: Config,
    query: str | None = None,
    batch_id: int | None = None,
    first: int | None = None,
    witnesses: Mapping[tuple[str, int], int] | None = None,
    since: int | None = None,
    log=None,
    reserve: int = 0,
) -> str:
    """The commit metadata of every offset this app commits (with the query, the batch and the offset of
    the committing task's first row of the partition, where `first` is given; with the transaction's
    witnesses and the offset its input began at, where given: `eos._kafka._witness`). `reserve`: the
    characters the caller appends after it."""
    out = config.output_topic if config.output_topic is not None else f"column:{config.output_topic_column}"
    own = f"{STAMP_VERSION};app={config.app_id};out={out}"
    if first is not None:
        own = f"{own};query={query};batch={batch_id};from={first}"
    if since is not None:
        own = f"{own};since={since}"
    if witnesses:
        room = _witness.METADATA_LIMIT - len(own) - reserve - len(";w=;unwitnessed=000000")
        text, left_out = _witness.encode(witnesses, max(0, min(_witness.BUDGET, room)))
        own = f"{own};{_witness.FIELD}={text}"
        if left_out:
            own = f"{own};unwitnessed={left_out}"
            if log is not None:
                log.warning("too many partitions to witness in one offset stamp", left_out=left_out)
    return own


def rewitnessed(metadata: str, witnesses: Mapping[tuple[str, int], int], repaired: int) -> str:
    """A stamp as `metadata`, its witnesses replaced by `witnesses` (`eos repair`'s copies of the records
    a transaction lost), noting how many partitions were repaired."""
    keep = [p for p in metadata.split(";") if not p.startswith((f"{_witness.FIELD}=", "repaired="))]
    text, _ = _witness.encode(witnesses, _witness.BUDGET)
    return ";".join([*keep, f"{_witness.FIELD}={text}", f"repaired={repaired}"])


def cli_stamp(app_id: str, was: int | None = None) -> str:
    """The commit metadata of an offset an operator set with `eos offsets reset`; `was`: the offset it
    replaced (the next run must resume below it, or it skips what the reset asked to write again)."""
    own = f"{STAMP_VERSION};app={app_id};by={CLI_STAMP_SOURCE}"
    return own if was is None else f"{own};was={was}"


def operator_reset(metadata: str | None) -> tuple[bool, int | None]:
    """Whether `eos offsets reset` set this offset, and the offset it replaced (None: not known)."""
    found = fields(metadata)
    if found is None or found.get("by") != CLI_STAMP_SOURCE:
        return False, None
    was = found.get("was")
    return True, int(was) if was is not None and was.lstrip("-").isdigit() else None


def fields(metadata: str | None) -> dict[str, str] | None:
    """The fields of an eos stamp, or None where the metadata is not one."""
    if not metadata or not metadata.startswith(STAMP_VERSION + ";"):
        return None
    return dict(part.partition("=")[::2] for part in metadata.split(";")[1:] if "=" in part)


def is_own(config: Config, metadata: str | None) -> bool:
    """Whether offset metadata says this app (same app_id and output, or its operator) committed it."""
    found = fields(metadata)
    if found is None or found.get("app") != config.app_id:
        return False
    own = fields(stamp(config))
    return found.get("by") == CLI_STAMP_SOURCE or found.get("out") == own.get("out")


@attrs.frozen
class Committed:
    offset: int
    metadata: str | None


def check_stamps(
    config: Config, committed: Mapping[tuple[str, int], Committed | None]
) -> dict[tuple[str, int], int | None]:
    """The committed offsets, refusing any this app did not commit (unless `accept_foreign_offsets`)."""
    out: dict[tuple[str, int], int | None] = {}
    for (topic, partition), entry in sorted(committed.items()):
        if entry is None:
            out[(topic, partition)] = None
            continue
        if not config.accept_foreign_offsets and not is_own(config, entry.metadata):
            raise ForeignOffsetError(
                _foreign_message(config, topic, partition, entry),
                group=config.app_id,
                topic=topic,
                partition=partition,
                offset=entry.offset,
            )
        out[(topic, partition)] = entry.offset
    return out


def _foreign_message(config: Config, topic: str, partition: int, entry: Committed) -> str:
    found = fields(entry.metadata)
    if found is None:
        who = f"without an eos stamp (metadata {entry.metadata!r}): not committed by eos"
    elif found.get("app") != config.app_id:
        who = f"by eos app {found.get('app')!r} (metadata {entry.metadata!r})"
    else:
        who = f"by eos for another output (metadata {entry.metadata!r}; this query's is {stamp(config)!r})"
    if topic == _names.parts_topic(config.app_id):
        return (
            f"group {config.app_id!r} has offset {entry.offset} committed for part {partition} of the"
            f" progress topic {topic} {who}: the part's record of the batch it wrote is gone, so eos cannot"
            " tell whether the batch it runs now is written. Nothing of the part was written. To write it"
            f" again (what it may have written already is then written twice): `eos offsets reset --app"
            f' {config.app_id} --to \'{{"{topic}": {{"{partition}": -2}}}}\' --drop-progress --execute`.'
        )
    return (
        f"group {config.app_id!r} has offset {entry.offset} committed for input partition {topic}/{partition}"
        f" {who}. eos skips every input row below the committed offset, so it refuses an offset it did"
        " not commit: nothing of this partition was written or skipped. If the offset is right, stamp"
        f" it with `eos offsets reset --app {config.app_id} --topic {topic} --shift 0 --execute`; to"
        " trust such offsets anyway, set accept_foreign_offsets."
    )


def committed(
    config: Config, tps: Iterable[tuple[str, int]], log=None, stable: bool = True
) -> dict[tuple[str, int], int | None]:
    """Committed offset per (topic, partition), or None where the group has none; an offset this app
    did not commit raises ForeignOffsetError (see `check_stamps`).

    stable (require_stable): while a transaction that carries offsets for a partition is still open, the
    broker answers UNSTABLE_OFFSET_COMMIT (retriable) instead of an offset that may be about to change.
    A task needs that (it skips the rows below the offset). Where a lower offset is merely safe, as for
    where Spark starts reading, stable=False returns the last committed offset at once: after a crash
    between send_offsets and commit, the open transaction would otherwise hold the answer back until a
    task fences it or transaction.timeout.ms aborts it.
    """
    return check_stamps(config, committed_entries(config, tps, log, stable))


#: How long `committed_entries(wait=False)` waits for a stable answer (one takes milliseconds).
PROBE_S = 1.0


def committed_entries(
    config: Config, tps: Iterable[tuple[str, int]], log=None, stable: bool = True, wait: bool = True
) -> dict[tuple[str, int], Committed | None]:
    """Committed offset and its metadata per (topic, partition), or None where the group has none.

    `wait=False`: a stable answer must come within PROBE_S, else OffsetsUnstableError. librdkafka asks
    again by itself while the broker answers UNSTABLE_OFFSET_COMMIT (an open transaction carries
    offsets for the partition), so an offset held that way shows as that wait running out; a broker
    slower than that for another reason makes the caller take the costlier path it would take for an
    open transaction, nothing worse.

    Asked through a consumer of the group, not the admin client: librdkafka's admin
    ListConsumerGroupOffsets dereferences the (absent) consumer group of an admin client when the
    broker answers NOT_COORDINATOR, as a fresh broker does while its group coordinator loads, and the
    process dies of SIGSEGV (librdkafka issue 5040; docs/design.md, "Committed offsets on a fresh
    broker"). A consumer's group waits for its coordinator instead.
    """
    group = _names.input_group(config.app_id)
    request = [TopicPartition(t, p) for t, p in tps]
    timeout_s = config.operation_timeout_ms / 1000
    consumer = _clients.offsets_consumer(config, stable)

    def fetch(timeout: float) -> dict[tuple[str, int], Committed | None]:
        out: dict[tuple[str, int], Committed | None] = {}
        for tp in consumer.committed(request, timeout=timeout):
            if tp.error is not None:
                if _translate.classify(tp.error) is _translate.Kind.RETRIABLE:
                    raise KafkaException(tp.error)  # e.g. UNSTABLE_OFFSET_COMMIT: `call` asks again
                raise _translate.translate_error(tp.error, f"offset of {tp.topic}/{tp.partition}")
            out[(tp.topic, tp.partition)] = Committed(tp.offset, tp.metadata) if tp.offset >= 0 else None
        return out

    what = f"reading committed offsets of group {group!r}"
    if not wait and stable:
        try:
            with _translate.translating(what):
                return fetch(min(PROBE_S, timeout_s))
        except RetriableError as exc:  # librdkafka's own retries of UNSTABLE_OFFSET_COMMIT timed out
            raise OffsetsUnstableError(
                f"{what}: no stable answer within {min(PROBE_S, timeout_s):g}s; an open transaction"
                f" may hold it ({exc})",
                kafka_error=exc.kafka_error,
            ) from exc
    return _translate.call(lambda: fetch(timeout_s), what=what, timeout_s=timeout_s, log=log)


def commit(
    config: Config, topic: str, partition: int, next_offset: int, log=None, metadata: str | None = None
) -> None:
    """Synchronously commit `next_offset` for the group (the at_least_once path), stamped `metadata`
    (default: `stamp(config)`)."""
    consumer = _clients.group_consumer(config)
    _translate.call(
        lambda: consumer.commit(
            offsets=[TopicPartition(topic, partition, next_offset, metadata or stamp(config))],
            asynchronous=False,
        ),
        what=f"committing offset {topic}/{partition}@{next_offset} for group {config.app_id!r}",
        timeout_s=config.operation_timeout_ms / 1000,
        log=log,
    )


def commit_many(config: Config, offsets: Mapping[tuple[str, int], int], log=None) -> None:
    """Synchronously commit `offsets` for the group, stamped as this app's (where input partitions start)."""
    consumer = _clients.group_consumer(config)
    request = [TopicPartition(t, p, o, stamp(config)) for (t, p), o in sorted(offsets.items())]
    _translate.call(
        lambda: consumer.commit(offsets=request, asynchronous=False),
        what=f"committing the starting offsets of group {config.app_id!r}",
        timeout_s=config.operation_timeout_ms / 1000,
        log=log,
    )


def log_offsets(
    config: Config, tps: Iterable[tuple[str, int]], latest: bool, log=None
) -> dict[tuple[str, int], int]:
    """Each partition's earliest offset (the log start), or its latest (the end of its committed records:
    where a read_committed consumer starting at "latest" begins). A partition that cannot be read (one
    added a moment ago, not yet in the client's metadata) is left out."""
    consumer = _clients.offsets_consumer(config, stable=True)  # read_committed: latest is the stable end
    timeout = config.operation_timeout_ms / 1000
    out = {}
    for topic, partition in tps:
        try:
            with _translate.translating(f"reading the offsets of {topic}/{partition}"):
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
        except EosError as exc:
            if log is not None:
                log.info(
                    "offsets of an input partition not read", topic=topic, partition=partition, error=str(exc)
                )
            continue
        out[(topic, partition)] = high if latest else low
    return out


def group_metadata(config: Config):
    with _translate.translating(f"group metadata of {config.app_id!r}"):
        return _clients.group_consumer(config).consumer_group_metadata()
