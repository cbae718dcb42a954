"""The changelog topics that back the state stores: created or checked before a store is used, and read
back by the restore loop. What to restore, and from where, is decided in `eos/state/_recovery.py`; the
restore loop writes into the store it is handed.

One changelog per (input topic, store), named by `eos._names.changelog_topic`, with one partition per
input partition; every record carries the input offset that wrote it (`INPUT_OFFSET_HEADER`) and the
store it belongs to (`OWNER_HEADER`: names of two apps' changelogs can collide, and a restore refuses
another owner's records).
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

import attrs
from confluent_kafka import KafkaError, TopicCollection, TopicPartition
from confluent_kafka.admin import ConfigResource, NewTopic, ResourceType

from eos import _crash, _names
from eos._kafka import _clients, _topics, _translate
from eos.config import Config
from eos.errors import ChangelogError, RetriableError


class RestoreTarget(Protocol):
    """What the restore loop writes into: a store of the layer above (`eos.state._store.PartitionStore`),
    handed in, named in the loop's log lines."""

    name: str

    def apply_restored(self, writes: list[tuple[bytes, bytes | None]], changelog_offset: int) -> None: ...


_RESTORE_BATCH = 10_000
#: How long one consume() of a restore waits. librdkafka's consume returns when it has the messages it
#: was asked for or when this runs out, whichever comes first, even when all it has is the partition-end
#: event the loop is waiting for; so the loop asks for no more than the offsets left to read (records,
#: commit markers and the end event all count): the usual roll-forward over one commit marker then
#: returns with the end event instead of waiting this out (docs/design.md, "The restore's consume()
#: wait"). A backlog fills a batch at once.
_CONSUME_WAIT_S = 0.02
_PROGRESS_EVERY_S = 2.0
#: the broker's default delete.retention.ms, where a changelog's configs do not say
_DEFAULT_DELETE_RETENTION_MS = 86_400_000


@attrs.frozen
class Changelog:
    """A changelog topic fit to back a store, as checked in this process."""

    name: str
    partitions: int
    #: how long the broker keeps a tombstone once compaction reached it: a store that has not read its
    #: changelog for that long may have missed some, and is restored whole (`_partition.py`)
    delete_retention_ms: int


#: changelogs known to be fit for use in this process
_ensured: dict[str, Changelog] = {}
_ensure_lock = threading.Lock()


def ensure_changelog(config: Config, input_topic: str, store: str, partition: int = 0) -> Changelog:
    """The store's changelog for input partition `partition`: created when missing (compacted, one
    partition per input partition); an existing one must be compacted and have that partition."""
    name = _names.changelog_topic(config.app_id, input_topic, store)
    with _ensure_lock:
        known = _ensured.get(name)
        if known is not None and partition < known.partitions:
            return known
    timeout = config.operation_timeout_ms / 1000
    counts = _topics.partitions(config, [input_topic, name])
    input_count = counts.get(input_topic)
    if name not in counts:
        new = NewTopic(
            name,
            counts[input_topic],
            config.changelog_replication_factor,
            config={**config.changelog_topic_config, "cleanup.policy": "compact"},
        )
        _topics.create(config, new, f"creating changelog {name!r}")
        _topics.await_leaders(config, name)
        counts = _topics.partitions(config, [name])
    count = counts.get(name, 0)
    retention = _check_changelog(config, name, count, input_topic, input_count, partition, timeout)
    changelog = Changelog(name, count, retention)
    with _ensure_lock:
        _ensured[name] = changelog
    return changelog


def topic_id(config: Config, changelog: str) -> str:
    """The changelog's topic id: a topic deleted and created again under the same name has another one.
    Asked at every store open (not cached: the topic may have been recreated since this process last
    looked)."""
    admin = _clients.admin(config)
    timeout = config.operation_timeout_ms / 1000
    found = _translate.call(
        lambda: admin.describe_topics(TopicCollection([changelog]), request_timeout=timeout)[
            changelog
        ].result(timeout),
        what=f"reading the topic id of changelog {changelog!r}",
        timeout_s=timeout,
    )
    return str(found.topic_id)


def forget_ensured() -> None:
    """Check every changelog again on next use (`eos._core._worker.reset`)."""
    with _ensure_lock:
        _ensured.clear()


def _check_changelog(
    config: Config,
    name: str,
    count: int,
    input_topic: str,
    input_count: int | None,
    partition: int,
    timeout: float,
) -> int:
    """The changelog (`count` partitions, as the metadata just read says) must have a partition for
    `partition` and be compacted (a deleting policy loses the state of keys not written for a while).
    Returns its delete.retention.ms."""
    if partition >= count:
        raise ChangelogError(
            f"changelog {name!r} has {count} partitions, but input topic {input_topic!r} has"
            f" {'?' if input_count is None else input_count} and a row of its partition {partition} needs"
            f" the state of partition {partition}: partitions were added to the input topic (or the"
            " changelog was made too small). State is kept per input partition, and a key of an old"
            " partition may now land in a new one, so eos stops rather than split a key's state, as Kafka"
            " Streams does. Start the application afresh, or add partitions to the changelog if new input"
            " partitions should start with empty state."
        )
    resource = ConfigResource(ResourceType.TOPIC, name)
    admin = _clients.admin(config)
    entries = _translate.call(
        lambda: admin.describe_configs([resource], request_timeout=timeout)[resource].result(timeout),
        what=f"reading the configs of changelog {name!r}",
        timeout_s=timeout,
    )
    policy = entries["cleanup.policy"].value if "cleanup.policy" in entries else "delete"
    if "compact" not in policy.split(","):
        raise ChangelogError(
            f"changelog {name!r} has cleanup.policy={policy}: a changelog must be compacted (a deleting"
            " policy drops the state of keys not written lately, and a restore would return less than"
            f" the store held). Set cleanup.policy=compact on {name!r}."
        )
    retention = entries.get("delete.retention.ms")
    return int(retention.value) if retention is not None and retention.value else _DEFAULT_DELETE_RETENTION_MS


def bounds(config: Config, changelog: str, partition: int) -> tuple[int, int]:
    """(first offset, high watermark) of a changelog partition. The true high watermark
    (read_uncommitted): reading up to it waits out open transactions, where a read_committed consumer's
    last stable offset would stop short of them."""
    timeout = config.operation_timeout_ms / 1000
    consumer = _clients.watermark_consumer(config)
    return _translate.call(
        lambda: consumer.get_watermark_offsets(
            TopicPartition(changelog, partition), timeout=timeout, cached=False
        ),
        what=f"reading the offsets of changelog {changelog}/{partition}",
        timeout_s=timeout,
    )


def restore(
    config: Config,
    log,
    store: RestoreTarget,
    changelog: str,
    partition: int,
    start: int,
    high: int,
    skip_from: int,
    owner: bytes,
) -> int:
    """Apply changelog records [start, high) to `store` with a read_committed consumer, in batches, each
    with the changelog offset it reaches (so that a restore cut short resumes where it stopped); returns
    how many were applied. `skip_from`: records of input at or past this offset (the committed one) are
    not applied: their input will be processed again. A record of another owner (`OWNER_HEADER`)
    raises ChangelogError. The deadline (transaction_timeout_ms + operation_timeout_ms, how long an open
    transaction on the changelog may hold the read back) counts from the last progress, not from the
    start: a large changelog takes as long as it takes."""
    total = high - start
    # A roll-forward over a commit marker or two happens at most task starts: not news.
    say = log.info if total > 100 else log.debug
    say("restoring store", store=store.name, changelog=changelog, start=start, end=high)
    where = f"restoring {changelog}/{partition}"
    consumer = _clients.restore_consumer(config)
    timeout = config.operation_timeout_ms / 1000
    _translate.call(
        lambda: consumer.assign([TopicPartition(changelog, partition, start)]), what=where, timeout_s=timeout
    )
    try:
        applied = skipped = 0
        batch: list[tuple[bytes, bytes | None]] = []
        append = batch.append
        mine = (_names.OWNER_HEADER, owner)
        stall_s = (config.transaction_timeout_ms + config.operation_timeout_ms) / 1000
        deadline = _translate.Deadline(stall_s)
        last_progress = time.monotonic()
        position = start
        while position < high:
            if deadline.expired():
                raise RetriableError(
                    f"{where}: no progress for {stall_s:g}s at offset {position} of {high};"
                    " a transaction on the changelog stays open"
                )
            before = position
            with _translate.translating(where):
                messages = consumer.consume(min(_RESTORE_BATCH, high - position), timeout=_CONSUME_WAIT_S)
            for msg in messages:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        position = max(position, msg.offset())
                        continue
                    if err.code() == KafkaError._AUTO_OFFSET_RESET:
                        raise RetriableError(
                            f"{where}: offset {position} is no longer in the changelog (its start moved"
                            f" during the restore): {err.str()}"
                        )
                    raise _translate.translate_error(err, where)
                position = msg.offset() + 1
                headers = msg.headers()
                # What eos writes, [input offset, owner]: read by position (~0.75 µs a record less than a
                # dict of both)
                if headers is not None and len(headers) == 2 and headers[1] == mine:
                    if int(headers[0][1]) < skip_from:
                        append((msg.key(), msg.value()))
                    else:
                        skipped += 1
                    continue
                found_offset, found_owner = _headers_of(headers)
                if found_owner is not None and found_owner != owner:
                    raise ChangelogError(
                        f"{where}: the record at offset {msg.offset()} belongs to store"
                        f" {found_owner.decode(errors='replace')!r}, not {owner.decode()!r}: two apps (or an"
                        " app's input topics and stores) got the same changelog name, app-topic-store, and"
                        f" the other one wrote to {changelog!r}. Its state cannot be this store's: give one"
                        " of them another app_id (or store name). Nothing was written."
                    )
                if found_offset >= skip_from:
                    skipped += 1
                    continue
                append((msg.key(), msg.value()))
            if position > before:
                deadline = _translate.Deadline(stall_s)
            if batch:
                store.apply_restored(batch, position)
                applied += len(batch)
                batch = []
                append = batch.append
                _crash.point("during_restore")
            if time.monotonic() - last_progress >= _PROGRESS_EVERY_S:
                last_progress = time.monotonic()
                log.info("restoring store", store=store.name, restored=position - start, total=total)
        store.apply_restored([], max(position, high))
        say(
            "store restored",
            store=store.name,
            records=applied,
            skipped_uncommitted_input=skipped,
            changelog_end=high,
        )
        return applied
    finally:
        with _translate.translating(where):
            consumer.unassign()


def _headers_of(headers: list[tuple[str, bytes]] | None) -> tuple[int, bytes | None]:
    """The input offset a changelog record carries (-1: none) and its owner (None: a record written
    before eos named owners)."""
    headers = dict(headers or ())  # two headers: one dict beats a loop (it is per record)
    offset = headers.get(_names.INPUT_OFFSET_HEADER)
    return (-1 if offset is None else int(offset)), headers.get(_names.OWNER_HEADER)
