"""Admin calls outside a query: those of the `eos` command (`Admin`: a group's committed offsets read,
checked for open transactions and changed, log offsets, the group's members). Topics are `_topics.py`'s.

Every call of `Admin` is bounded by the command's timeout and fails with an `eos.errors` type whose
message names the call, as the CLI prints it: BrokerUnreachableError where no broker answered in time,
GroupNotEmptyError where the broker refused to change the offsets of a group that has members,
KafkaClientError otherwise (`eos.cli._broker.exit_codes` makes exit codes of them).
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterable, Mapping

from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTP
from confluent_kafka.admin import AdminClient, OffsetSpec

from eos._kafka import _clients
from eos._kafka._translate import kafka_error_of
from eos.config import Config
from eos.errors import BrokerUnreachableError, GroupNotEmptyError, KafkaClientError

TP = tuple[str, int]

_UNREACHABLE_CODES = frozenset({KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN})
# A coordinator that is still loading __consumer_offsets (a just-started broker) or has moved.
_SETTLING_CODES = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
    }
)
# An open transaction holds the offset (require_stable), or no stable answer came in time.
_PENDING_CODES = frozenset({KafkaError.UNSTABLE_OFFSET_COMMIT, KafkaError._TIMED_OUT})
_MISSING_PARTITION_CODES = frozenset(
    {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC}
)
# A member joined since the CLI's checks: the broker refuses to change a non-empty group's offsets.
_GROUP_NOT_EMPTY_CODES = frozenset(
    {KafkaError.UNKNOWN_MEMBER_ID, KafkaError.REBALANCE_IN_PROGRESS, KafkaError.NON_EMPTY_GROUP}
)


class Admin:
    """The admin client eos builds from `Config` (`_clients.admin`), each call bounded by `timeout`."""

    def __init__(self, config: Config, timeout: float) -> None:
        self.config = config
        self.timeout = timeout
        self._ready: set[str] = set()  # groups whose coordinator has answered

    @property
    def client(self) -> AdminClient:
        return _clients.admin(self.config)  # cached per settings by `_clients`; created on first use

    def _wait(self, future: concurrent.futures.Future, what: str, *, absent=frozenset(), refused=frozenset()):
        """The future's result: None for an error code in `absent`, GroupNotEmptyError for one in
        `refused`, BrokerUnreachableError for no answer, else KafkaClientError."""
        try:
            return future.result(timeout=self.timeout + 1)
        except concurrent.futures.TimeoutError:
            raise BrokerUnreachableError(
                f"{what}: no answer from the broker within {self.timeout:g}s"
            ) from None
        except KafkaException as exc:
            err = kafka_error_of(exc)
            code = err.code() if err is not None else None
            detail = err.str() if err is not None else str(exc)
            if code in absent:
                return None
            if code in refused:
                raise GroupNotEmptyError(f"{what}: refused by the broker: {detail}") from None
            if code in _UNREACHABLE_CODES:
                raise BrokerUnreachableError(
                    f"{what}: no answer from the broker within {self.timeout:g}s ({detail})"
                ) from None
            raise KafkaClientError(f"{what}: {detail}", kafka_error=err) from None

    # -- a group's committed offsets ------------------------------------------------------------------

    def _coordinator_ready(self, group: str) -> None:
        """Wait until the group's coordinator answers DescribeGroups. librdkafka's admin
        ListConsumerGroupOffsets crashes the process (SIGSEGV, librdkafka issue 5040) when the broker
        answers it NOT_COORDINATOR, as a just-started broker does while it loads __consumer_offsets;
        eos's runtime reads offsets through a consumer instead (`_offsets`), but listing *every*
        partition of a group needs the admin call, so the coordinator is let settle first."""
        if group in self._ready:
            return
        deadline = time.monotonic() + self.timeout
        while True:
            future = self.client.describe_consumer_groups([group], request_timeout=self.timeout)[group]
            try:
                future.result(timeout=self.timeout + 1)
                break
            except KafkaException as exc:
                err = kafka_error_of(exc)
                if err is None or err.code() not in _SETTLING_CODES or time.monotonic() > deadline:
                    break  # not a settling coordinator: the call that follows reports what is wrong
            except concurrent.futures.TimeoutError:
                break
            time.sleep(0.2)
        self._ready.add(group)

    def committed(self, group: str) -> dict[TP, int]:
        """Every partition the group has a committed offset for (the last committed offset; pending
        transactional offsets are not included)."""
        self._coordinator_ready(group)
        futures = self.client.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout
        )
        result = self._wait(futures[group], f"reading the committed offsets of group {group!r}")
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}

    def committed_metadata(self, group: str, topic: str, partitions: int) -> dict[int, tuple[int, str]]:
        """The group's committed offset and its metadata for each partition of `topic` that has one."""
        self._coordinator_ready(group)
        request = [KafkaTP(topic, p) for p in range(partitions)]
        futures = self.client.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, request)], request_timeout=self.timeout
        )
        result = self._wait(futures[group], f"reading the committed offsets of group {group!r}")
        return {tp.partition: (tp.offset, tp.metadata) for tp in result.topic_partitions if tp.offset >= 0}

    def unstable(self, group: str, tps: Iterable[TP]) -> list[TP]:
        """Partitions for which an open transaction holds offsets for the group (require_stable:
        the broker answers UNSTABLE_OFFSET_COMMIT instead of an offset that may be about to change).
        No stable answer within the timeout counts as held."""
        request = [KafkaTP(t, p) for t, p in sorted(set(tps))]
        if not request:
            return []
        self._coordinator_ready(group)
        futures = self.client.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, request)], require_stable=True, request_timeout=self.timeout
        )
        try:
            result = futures[group].result(timeout=self.timeout + 1)
        except concurrent.futures.TimeoutError:
            return sorted(set(tps))
        except KafkaException as exc:
            err = kafka_error_of(exc)
            if err is not None and err.code() in _PENDING_CODES:
                return sorted(set(tps))
            raise KafkaClientError(
                f"reading stable offsets of group {group!r}: {exc}", kafka_error=err
            ) from None
        out = []
        for tp in result.topic_partitions:
            if tp.error is None:
                continue
            if tp.error.code() in _PENDING_CODES:
                out.append((tp.topic, tp.partition))
            else:
                raise KafkaClientError(
                    f"reading the offset of {tp.topic}/{tp.partition} for group {group!r}: {tp.error.str()}",
                    kafka_error=tp.error,
                )
        return sorted(out)

    def alter(self, group: str, offsets: Mapping[TP, int], metadata: Mapping[TP, str]) -> None:
        """Set the group's offsets, each with its commit metadata."""
        request = [
            ConsumerGroupTopicPartitions(
                group, [KafkaTP(t, p, o, metadata[(t, p)]) for (t, p), o in sorted(offsets.items())]
            )
        ]
        futures = self.client.alter_consumer_group_offsets(request, request_timeout=self.timeout)
        what = f"changing the offsets of group {group!r}"
        result = self._wait(futures[group], what, refused=_GROUP_NOT_EMPTY_CODES)
        failed = [tp for tp in result.topic_partitions if tp.error is not None]
        if any(tp.error.code() in _GROUP_NOT_EMPTY_CODES for tp in failed):
            raise GroupNotEmptyError(f"{what}: refused by the broker: {failed[0].error.str()}")
        if failed:
            detail = "; ".join(f"{tp.topic}/{tp.partition}: {tp.error.str()}" for tp in failed)
            raise KafkaClientError(f"{what} failed for {detail}")

    # -- log offsets ----------------------------------------------------------------------------------

    def log_offsets(
        self, tps: Iterable[TP], which: str, committed_only: bool = False
    ) -> dict[TP, int | None]:
        """Earliest or latest offset per partition (None where the partition does not exist).

        latest with `committed_only`: the last stable offset, where a read_committed reader stops (an
        open transaction on the partition holds it below the log end)."""
        spec = OffsetSpec.earliest() if which == "earliest" else OffsetSpec.latest()
        isolation = IsolationLevel.READ_COMMITTED if committed_only else IsolationLevel.READ_UNCOMMITTED
        return self._list_offsets(tps, spec, isolation, "listing the offsets of")

    def offsets_for_time(self, tps: Iterable[TP], timestamp_ms: int) -> dict[TP, int | None]:
        """Per partition, the first offset whose record timestamp is >= `timestamp_ms` (-1 where no
        record is that late; None where the partition does not exist): ListOffsets by timestamp, read
        committed, as kafka-consumer-groups --to-datetime."""
        return self._list_offsets(
            tps,
            OffsetSpec.for_timestamp(timestamp_ms),
            IsolationLevel.READ_COMMITTED,
            "looking up the offset at a time of",
        )

    def _list_offsets(self, tps: Iterable[TP], spec, isolation, what: str) -> dict[TP, int | None]:
        request = {KafkaTP(t, p): spec for t, p in set(tps)}
        if not request:
            return {}
        futures = self.client.list_offsets(request, isolation_level=isolation, request_timeout=self.timeout)
        out: dict[TP, int | None] = {}
        for tp, future in futures.items():
            info = self._wait(future, f"{what} {tp.topic}/{tp.partition}", absent=_MISSING_PARTITION_CODES)
            out[(tp.topic, tp.partition)] = None if info is None else info.offset
        return out

    # -- the group ------------------------------------------------------------------------------------

    def members(self, group: str) -> list[str]:
        """The group's live members, as "client_id@host"."""
        futures = self.client.describe_consumer_groups([group], request_timeout=self.timeout)
        description = self._wait(
            futures[group], f"describing group {group!r}", absent={KafkaError.GROUP_ID_NOT_FOUND}
        )
        return [] if description is None else [f"{m.client_id}@{m.host}" for m in description.members]
