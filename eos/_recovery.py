"""Recovery of an input topic-partition's state stores, in one place.

`PartitionState.open()` runs at task start, after init_transactions() and the committed-offset read.
For each store:
    1. Decide. No checkpoint file means unclean (a crash, an abort in wipe mode, a lost or new state
       directory): wipe the local store and restore from the changelog's beginning. A checkpoint file
       means clean: roll forward from the offset the local store reflects (commits made by another
       incarnation, or a commit whose local apply a crash interrupted, F4) — unless the changelog now
       begins after that offset (records deleted): then wipe and restore from its beginning.
    2. Restore: read the store's changelog partition with a read_committed consumer up to the high
       watermark, waiting while an open transaction holds the last stable offset below it (else the
       restore would silently stop short). at_least_once: records whose input offset is at or past the
       group's committed offset are not applied (their input will be processed again).
    3. wipe mode: the first write after a commit removes the checkpoint file, so a crash with writes
       that are not yet committed leaves the store unclean.

After an aborted transaction (`reopen`): transactional stores drop the open transaction's writes;
wipe-mode stores that were written to are wiped and restored (1 with unclean). After a commit
(`on_commit`): each store applies its writes with the changelog offset they reach and writes its
checkpoint file.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import ConfigResource, NewTopic, ResourceType

from eos import _clients, _crash
from eos._producer import OutputProducer
from eos._store import PartitionStore
from eos.config import Config
from eos.errors import ChangelogError, RetriableError
from eos.records import Output
from eos.state import State, Store, StoreSpec

INPUT_OFFSET_HEADER = "eos.input.offset"
_RESTORE_BATCH = 10_000
_PROGRESS_EVERY_S = 2.0


def changelog_topic(config: Config, input_topic: str, store: str) -> str:
    return f"{config.app_id}-{input_topic}-{store}-changelog"


#: changelogs known to be fit for use in this process, with their partition count
_ensured: dict[str, int] = {}
_ensure_lock = threading.Lock()


def ensure_changelog(config: Config, input_topic: str, store: str, partition: int = 0) -> str:
    """The store's changelog for input partition `partition`: created when missing (compacted, one
    partition per input partition); an existing one must be compacted and have that partition."""
    name = changelog_topic(config, input_topic, store)
    with _ensure_lock:
        if partition < _ensured.get(name, 0):
            return name
    admin = _clients.admin(config)
    timeout = config.operation_timeout_ms / 1000
    metadata = admin.list_topics(timeout=timeout)
    inputs = metadata.topics.get(input_topic)
    input_count = len(inputs.partitions) if inputs is not None else None
    md = metadata.topics.get(name)
    if md is None:
        new = NewTopic(
            name,
            len(metadata.topics[input_topic].partitions),
            config.changelog_replication_factor,
            config={**config.changelog_topic_config, "cleanup.policy": "compact"},
        )
        try:
            admin.create_topics([new], request_timeout=timeout)[name].result(timeout)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            md = admin.list_topics(name, timeout=timeout).topics.get(name)
            if md is not None and md.error is None and all(p.leader >= 0 for p in md.partitions.values()):
                break
            time.sleep(0.1)
    count = 0 if md is None or md.error is not None else len(md.partitions)
    _check_changelog(config, name, count, input_topic, input_count, partition, timeout)
    with _ensure_lock:
        _ensured[name] = count
    return name


def _check_changelog(
    config: Config,
    name: str,
    count: int,
    input_topic: str,
    input_count: int | None,
    partition: int,
    timeout: float,
) -> None:
    """The changelog (`count` partitions, as the metadata just read says) must have a partition for
    `partition` and be compacted (a deleting policy loses the state of keys not written for a while)."""
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
    entries = admin.describe_configs([resource], request_timeout=timeout)[resource].result(timeout)
    policy = entries["cleanup.policy"].value if "cleanup.policy" in entries else "delete"
    if "compact" not in policy.split(","):
        raise ChangelogError(
            f"changelog {name!r} has cleanup.policy={policy}: a changelog must be compacted (a deleting"
            " policy drops the state of keys not written lately, and a restore would return less than"
            f" the store held). Set cleanup.policy=compact on {name!r}."
        )


class PartitionState:
    """All stores of one input topic-partition for the length of one task."""

    def __init__(self, config: Config, specs: dict[str, StoreSpec], topic: str, partition: int, log) -> None:
        self.config = config
        self.topic = topic
        self.partition = partition
        self.log = log
        directory = Path(config.state_dir) / config.app_id / f"{topic}-{partition}"
        transactional = config.state_mode == "transactional"
        self.stores = {name: PartitionStore(directory, name, transactional) for name in specs}
        self.changelogs = {name: changelog_topic(config, topic, name) for name in specs}
        self.view = State({name: Store(name, specs[name], self.stores[name]) for name in specs})
        self.restored = 0
        self.committed_input: int | None = None

    # -- task start -----------------------------------------------------------------------------------

    def open(self, committed_input: int | None) -> None:
        lock_timeout = self.config.transaction_timeout_ms / 1000
        self.committed_input = committed_input
        for name, store in self.stores.items():
            ensure_changelog(self.config, self.topic, name, self.partition)
            store.open(lock_timeout)
            self._recover(name, store, clean=store.read_checkpoint() is not None)

    def _recover(self, name: str, store: PartitionStore, clean: bool) -> None:
        # 1. Decide.
        start = store.local_offset() if clean else None
        if start is None:
            if clean or store.local_offset() is not None:
                self.log.info("state unclean: wiping and restoring from the changelog", store=name)
            store.wipe()
            start = 0
        # 2. Restore; the store now reflects its changelog, so it is clean.
        self.restored += self._restore(name, store, start)
        store.write_checkpoint(store.local_offset())
        # 3. wipe mode: the store's first write removes the checkpoint (PartitionStore.put).

    def _restore(self, name: str, store: PartitionStore, start: int) -> int:
        tp = TopicPartition(self.changelogs[name], self.partition)
        consumer = _clients.restore_consumer(self.config)
        try:
            timeout = self.config.operation_timeout_ms / 1000
            # The true high watermark (read_uncommitted): reading up to it waits out open transactions.
            low, high = _clients.watermark_consumer(self.config).get_watermark_offsets(
                tp, timeout=timeout, cached=False
            )
            if start < low:
                # The changelog no longer begins where the store left off (DeleteRecords, a retention
                # set on it): rolling forward from `start` is impossible, and a consumer would jump
                # to the end and leave the store stale. Rebuild from what the changelog still holds.
                self.log.warning(
                    "changelog begins after the store's offset: wiping and restoring from its beginning",
                    store=name,
                    changelog=tp.topic,
                    local=start,
                    changelog_start=low,
                    end=high,
                )
                if start > 0:
                    store.wipe()
                start = low
            if start > high:
                # The changelog lost data (deleted and recreated, unclean election): the store cannot
                # be trusted beyond what the changelog holds.
                self.log.warning(
                    "local store is ahead of its changelog: wiping", store=name, local=start, end=high
                )
                store.wipe()
                start = 0
            if start == high:
                if store.local_offset() != high:
                    store.apply_restored([], high)
                return 0
            total = high - start
            # A roll-forward over a commit marker or two happens at most task starts: not news.
            say = self.log.info if total > 100 else self.log.debug
            say("restoring store", store=name, changelog=tp.topic, start=start, end=high)
            consumer.assign([TopicPartition(tp.topic, tp.partition, start)])
            # at_least_once: outputs of input at or past the committed offset will be produced again.
            skip_from = None if self.config.exactly_once else (self.committed_input or 0)
            applied = skipped = 0
            batch: list[tuple[bytes, bytes | None]] = []
            deadline = (
                time.monotonic()
                + (self.config.transaction_timeout_ms + self.config.operation_timeout_ms) / 1000
            )
            last_progress = time.monotonic()
            position = start
            while position < high:
                if time.monotonic() > deadline:
                    raise RetriableError(
                        f"restoring {tp.topic}/{tp.partition}: stopped at offset {position} of {high};"
                        " a transaction on the changelog stays open"
                    )
                for msg in consumer.consume(_RESTORE_BATCH, timeout=0.5):
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            position = max(position, msg.offset())
                            continue
                        if err.code() == KafkaError._AUTO_OFFSET_RESET:
                            raise RetriableError(
                                f"restoring {tp.topic}/{tp.partition}: offset {position} is no longer in"
                                f" the changelog (its start moved during the restore): {err.str()}"
                            )
                        raise KafkaException(err)
                    position = msg.offset() + 1
                    if skip_from is not None and _input_offset(msg) >= skip_from:
                        skipped += 1
                        continue
                    batch.append((msg.key(), msg.value()))
                if batch:
                    store.apply_restored(batch, position)
                    applied += len(batch)
                    batch = []
                    _crash.point("during_restore")
                if time.monotonic() - last_progress >= _PROGRESS_EVERY_S:
                    last_progress = time.monotonic()
                    self.log.info("restoring store", store=name, restored=position - start, total=total)
            store.apply_restored([], max(position, high))
            say(
                "store restored",
                store=name,
                records=applied,
                skipped_uncommitted_input=skipped,
                changelog_end=high,
            )
            return applied
        finally:
            consumer.unassign()

    # -- while processing -----------------------------------------------------------------------------

    def set_input_offset(self, offset: int) -> None:
        for store in self.stores.values():
            store.input_offset = offset

    def pending_keys(self) -> int:
        return max((len(s.pending) for s in self.stores.values()), default=0)

    def produce_changelog(self, producer: OutputProducer) -> None:
        """Send the open transaction's writes to the changelogs (inside the transaction in exactly_once)."""
        for name, store in self.stores.items():
            topic = self.changelogs[name]
            for key, value, input_offset in store.changes():
                out = Output(
                    value, key, [(INPUT_OFFSET_HEADER, str(input_offset).encode())], partition=self.partition
                )
                producer.produce(out, topic, self.topic, self.partition, input_offset, track=True)

    # -- after commit / abort -------------------------------------------------------------------------

    def on_commit(self, producer: OutputProducer) -> None:
        for name, store in self.stores.items():
            offset = store.local_offset() or 0
            if store.pending:  # this transaction wrote to the changelog: the store now reflects its end
                offset = producer.delivered_offsets[(self.changelogs[name], self.partition)] + 1
            store.commit(offset)

    def reopen(self, committed_input: int | None) -> None:
        """After an abort (or a fenced producer's replacement): drop the open transaction's writes and
        recover again. A wipe-mode store that was written to has lost its checkpoint, so it is wiped
        and restored; a transactional store only rolls forward."""
        self.committed_input = committed_input
        for name, store in self.stores.items():
            store.rollback()
            self._recover(name, store, clean=store.read_checkpoint() is not None)

    def close(self) -> None:
        for store in self.stores.values():
            store.close()


def _input_offset(msg) -> int:
    for key, value in msg.headers() or ():
        if key == INPUT_OFFSET_HEADER:
            return int(value)
    return -1
