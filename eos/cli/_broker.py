"""The broker side of the `eos` command: the group's offsets, log offsets, the checks that refuse an
offset reset while the query runs, and Kafka's own `TransactionsCommand` run from the fetched jars.

Every call is bounded by `--timeout`; a broker that does not answer is exit code 4, never a hang.
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTP
from confluent_kafka.admin import OffsetSpec

from eos._kafka import _clients, _offsets, _topics
from eos._kafka._translate import kafka_error_of
from eos.cli._base import EXIT_ERROR, EXIT_REFUSED, EXIT_UNREACHABLE, CliError
from eos.cli._tools import tools_classpath
from eos.config import Config
from eos.errors import AuthenticationError, BrokerUnreachableError

TP = tuple[str, int]

_UNREACHABLE_CODES = frozenset({KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN})
# Transaction states in which a transaction is open (its offsets may still be committed).
OPEN_TRANSACTION_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})
TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"


class Broker:
    """The CLI's view of the cluster, through the admin client eos builds from `Config`."""

    def __init__(self, config: Config, timeout: float, java_settings: dict[str, str] | None = None) -> None:
        self.config = config
        self.timeout = timeout
        #: --command-config as written (Java names), for Kafka's own tools
        self.java_settings = dict(java_settings or {})
        self._ready: set[str] = set()  # groups whose coordinator has answered

    def transactions(self, args: list[str]) -> str:
        """Kafka's `TransactionsCommand <args>` against this cluster (see `transactions_command`)."""
        return transactions_command(self.config, args, self.timeout, self.java_settings)

    @property
    def admin(self):
        return _clients.admin(self.config)  # cached per settings by eos._kafka._clients; created on first use

    def _wait(self, future: concurrent.futures.Future, what: str, *, absent=(), refused=()):
        """The future's result, its failure mapped to an exit code: `absent` error codes give None,
        `refused` ones exit code 5, a timeout exit code 4, anything else exit code 1."""
        try:
            return future.result(timeout=self.timeout + 1)
        except concurrent.futures.TimeoutError:
            raise CliError(
                EXIT_UNREACHABLE, f"{what}: no answer from the broker within {self.timeout:g}s"
            ) from None
        except KafkaException as exc:
            err = kafka_error_of(exc)
            code = err.code() if err is not None else None
            detail = err.str() if err is not None else str(exc)
            if code in absent:
                return None
            if code in refused:
                raise CliError(EXIT_REFUSED, f"{what}: refused by the broker: {detail}") from None
            if code in _UNREACHABLE_CODES:
                raise CliError(
                    EXIT_UNREACHABLE, f"{what}: no answer from the broker within {self.timeout:g}s ({detail})"
                ) from None
            raise CliError(EXIT_ERROR, f"{what}: {detail}") from None

    # -- metadata -------------------------------------------------------------------------------------

    def partitions(self, topics: Iterable[str] = ()) -> dict[str, int]:
        """Partition count of each existing topic among `topics`. Also the reachability check: raises
        exit code 4 if no broker answers within the timeout."""
        try:
            return _topics.partitions(self.config, list(topics))
        except BrokerUnreachableError as exc:
            raise CliError(EXIT_UNREACHABLE, str(exc)) from None
        except AuthenticationError as exc:
            raise CliError(EXIT_ERROR, str(exc)) from None

    def require_topics(self, topics: Iterable[str]) -> dict[str, int]:
        topics = list(dict.fromkeys(topics))
        found = self.partitions(topics)
        missing = [t for t in topics if t not in found]
        if missing:
            raise CliError(EXIT_ERROR, f"topic {', '.join(repr(t) for t in missing)} does not exist")
        return found

    # -- offsets --------------------------------------------------------------------------------------

    def _coordinator_ready(self, group: str) -> None:
        """Wait until the group's coordinator answers DescribeGroups. librdkafka's admin
        ListConsumerGroupOffsets crashes the process (SIGSEGV, librdkafka issue 5040) when the broker
        answers it NOT_COORDINATOR, as a just-started broker does while it loads __consumer_offsets;
        eos's runtime reads offsets through a consumer instead (`eos._kafka._offsets`), but listing *every*
        partition of a group needs the admin call, so the CLI first lets the coordinator settle."""
        if group in self._ready:
            return
        settling = {
            KafkaError.NOT_COORDINATOR,
            KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
            KafkaError.COORDINATOR_NOT_AVAILABLE,
        }
        deadline = time.monotonic() + self.timeout
        while True:
            future = self.admin.describe_consumer_groups([group], request_timeout=self.timeout)[group]
            try:
                future.result(timeout=self.timeout + 1)
                break
            except KafkaException as exc:
                err = kafka_error_of(exc)
                if err is None or err.code() not in settling or time.monotonic() > deadline:
                    break  # not a settling coordinator: the call that follows reports what is wrong
            except concurrent.futures.TimeoutError:
                break
            time.sleep(0.2)
        self._ready.add(group)

    def committed(self, group: str) -> dict[TP, int]:
        """Every partition the group has a committed offset for (the last committed offset; pending
        transactional offsets are not included)."""
        self._coordinator_ready(group)
        futures = self.admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout
        )
        result = self._wait(futures[group], f"reading the committed offsets of group {group!r}")
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}

    def committed_metadata(self, group: str, topic: str, partitions: int) -> dict[int, tuple[int, str]]:
        """The group's committed offset and its metadata for each partition of `topic` that has one."""
        self._coordinator_ready(group)
        request = [KafkaTP(topic, p) for p in range(partitions)]
        futures = self.admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, request)], request_timeout=self.timeout
        )
        result = self._wait(futures[group], f"reading the committed offsets of group {group!r}")
        return {tp.partition: (tp.offset, tp.metadata) for tp in result.topic_partitions if tp.offset >= 0}

    def unstable(self, group: str, tps: Iterable[TP]) -> list[TP]:
        """Partitions for which an open transaction holds offsets for the group (require_stable:
        the broker answers UNSTABLE_OFFSET_COMMIT instead of an offset that may be about to change)."""
        request = [KafkaTP(t, p) for t, p in sorted(set(tps))]
        if not request:
            return []
        self._coordinator_ready(group)
        futures = self.admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, request)], require_stable=True, request_timeout=self.timeout
        )
        try:
            result = futures[group].result(timeout=self.timeout + 1)
        except concurrent.futures.TimeoutError:
            return sorted(set(tps))  # no stable answer within the timeout: treat as pending
        except KafkaException as exc:
            err = kafka_error_of(exc)
            if err is not None and err.code() in (KafkaError.UNSTABLE_OFFSET_COMMIT, KafkaError._TIMED_OUT):
                return sorted(set(tps))
            raise CliError(EXIT_ERROR, f"reading stable offsets of group {group!r}: {exc}") from None
        out = []
        for tp in result.topic_partitions:
            if tp.error is None:
                continue
            if tp.error.code() in (KafkaError.UNSTABLE_OFFSET_COMMIT, KafkaError._TIMED_OUT):
                out.append((tp.topic, tp.partition))
            else:
                raise CliError(
                    EXIT_ERROR,
                    f"reading the offset of {tp.topic}/{tp.partition} for group {group!r}: {tp.error.str()}",
                )
        return sorted(out)

    def log_offsets(
        self, tps: Iterable[TP], which: str, committed_only: bool = False
    ) -> dict[TP, int | None]:
        """Earliest or latest offset per partition (None where the partition does not exist).

        latest with `committed_only`: the last stable offset, where a read_committed reader stops (an
        open transaction on the partition holds it below the log end)."""
        spec = OffsetSpec.earliest() if which == "earliest" else OffsetSpec.latest()
        request = {KafkaTP(t, p): spec for t, p in set(tps)}
        if not request:
            return {}
        isolation = IsolationLevel.READ_COMMITTED if committed_only else IsolationLevel.READ_UNCOMMITTED
        futures = self.admin.list_offsets(request, isolation_level=isolation, request_timeout=self.timeout)
        out: dict[TP, int | None] = {}
        missing = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC}
        for tp, future in futures.items():
            info = self._wait(future, f"listing the offsets of {tp.topic}/{tp.partition}", absent=missing)
            out[(tp.topic, tp.partition)] = None if info is None else info.offset
        return out

    def offsets_for_time(self, tps: Iterable[TP], timestamp_ms: int) -> dict[TP, int | None]:
        """Per partition, the first offset whose record timestamp is >= `timestamp_ms` (-1 where no
        record is that late; None where the partition does not exist): ListOffsets by timestamp, read
        committed, as kafka-consumer-groups --to-datetime."""
        request = {KafkaTP(t, p): OffsetSpec.for_timestamp(timestamp_ms) for t, p in set(tps)}
        if not request:
            return {}
        futures = self.admin.list_offsets(
            request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=self.timeout
        )
        out: dict[TP, int | None] = {}
        missing = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC}
        for tp, future in futures.items():
            info = self._wait(
                future, f"looking up the offset at a time of {tp.topic}/{tp.partition}", absent=missing
            )
            out[(tp.topic, tp.partition)] = None if info is None else info.offset
        return out

    # -- the group ------------------------------------------------------------------------------------

    def members(self, group: str) -> list[str]:
        """The group's live members, as "client_id@host"."""
        futures = self.admin.describe_consumer_groups([group], request_timeout=self.timeout)
        description = self._wait(
            futures[group], f"describing group {group!r}", absent={KafkaError.GROUP_ID_NOT_FOUND}
        )
        return [] if description is None else [f"{m.client_id}@{m.host}" for m in description.members]

    def alter(self, group: str, offsets: dict[TP, int]) -> None:
        """Set the group's offsets, stamped as set by an operator (`eos._kafka._offsets.cli_stamp`), which the
        app accepts as its own."""
        metadata = _offsets.cli_stamp(group)
        request = [
            ConsumerGroupTopicPartitions(
                group, [KafkaTP(t, p, o, metadata) for (t, p), o in sorted(offsets.items())]
            )
        ]
        futures = self.admin.alter_consumer_group_offsets(request, request_timeout=self.timeout)
        what = f"changing the offsets of group {group!r}"
        # A member that joined since the checks: the broker refuses to change a non-empty group's offsets.
        refused = {KafkaError.UNKNOWN_MEMBER_ID, KafkaError.REBALANCE_IN_PROGRESS, KafkaError.NON_EMPTY_GROUP}
        result = self._wait(futures[group], what, refused=refused)
        failed = [tp for tp in result.topic_partitions if tp.error is not None]
        if any(tp.error.code() in refused for tp in failed):
            raise CliError(EXIT_REFUSED, f"{what}: refused by the broker: {failed[0].error.str()}")
        if failed:
            detail = "; ".join(f"{tp.topic}/{tp.partition}: {tp.error.str()}" for tp in failed)
            raise CliError(EXIT_ERROR, f"{what} failed for {detail}")


# -- Kafka's TransactionsCommand ----------------------------------------------------------------------


def _java_properties(settings: dict[str, str]) -> str:
    """A Java .properties file body (keys and values escaped)."""

    def escape(text: str, key: bool) -> str:
        out = []
        for i, ch in enumerate(text):
            if ch == "\\":
                out.append("\\\\")
            elif ch == "\n":
                out.append("\\n")
            elif ch == "\r":
                out.append("\\r")
            elif ch == "\t":
                out.append("\\t")
            elif ch in "=:#!" or (ch == " " and (key or i == 0)):
                out.append("\\" + ch)
            elif ord(ch) > 0x7E:
                out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else ch)
            else:
                out.append(ch)
        return "".join(out)

    return "".join(f"{escape(k, True)}={escape(str(v), False)}\n" for k, v in settings.items())


def admin_properties(config: Config, timeout: float) -> dict[str, str]:
    """The Java admin client's settings: the shared client settings of `config` (security settings
    from EOS_KAFKA_*, translated to the Java client's names as for Spark's source; a CA file becomes a
    PEM trust store) and the timeout. Client certificates (mutual TLS) are not translated."""
    props = {}
    for key, value in _clients.spark_source_options(config).items():
        name = key.removeprefix("kafka.")
        if name != "bootstrap.servers":
            props[name] = value
    # librdkafka's CA file, as the Java client reads it (KIP-651: PEM trust stores).
    ca = config.kafka.get("ssl.ca.location", config.admin.get("ssl.ca.location"))
    if ca is not None and "ssl.truststore.location" not in props:
        props["ssl.truststore.type"] = "PEM"
        props["ssl.truststore.location"] = str(ca)
    ms = str(max(int(timeout * 1000), 1000))
    props["request.timeout.ms"] = ms
    props["default.api.timeout.ms"] = ms
    return props


def _noise(line: str) -> bool:
    """Lines of the JVM's logging set-up, not of the command."""
    stripped = line.strip()
    return not stripped or stripped.startswith(("SLF4J:", "WARNING:", "StatusLogger", "log4j:"))


def transactions_command(
    config: Config, args: list[str], timeout: float, java_settings: dict[str, str] | None = None
) -> str:
    """Run `TransactionsCommand <args>`; returns its standard output. Failure: CliError with the
    command's own message on one line. `java_settings` (--command-config) win over those derived
    from `config`, as the file would for Kafka's own kafka-transactions.sh."""
    java = os.environ.get("JAVA", "java")
    if shutil.which(java) is None:
        raise CliError(
            EXIT_ERROR,
            f"{java!r} not found on PATH: `eos transactions` runs Kafka's own TransactionsCommand, which"
            " needs Java 17 or later (install a JRE, or set JAVA to its java binary)",
        )
    libs = tools_classpath()
    with tempfile.TemporaryDirectory(prefix="eos-cli-") as tmp:
        props = Path(tmp) / "admin.properties"
        fd = os.open(props, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # may hold a password
        with os.fdopen(fd, "w", encoding="latin-1") as f:
            f.write(_java_properties({**admin_properties(config, timeout), **(java_settings or {})}))
        argv = [
            java,
            "-XX:TieredStopAtLevel=1",  # a short-lived tool: start fast
            "-XX:+UseSerialGC",
            "-Xshare:auto",
            "-Dlog4j2.level=ERROR",
            "-cp",
            f"{libs}/*",
            TRANSACTIONS_COMMAND,
            "--command-config",
            str(props),
            "--bootstrap-server",
            config.bootstrap_servers,
            *args,
        ]
        try:
            proc = subprocess.run(
                argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout * 2 + 30
            )
        except subprocess.TimeoutExpired:
            raise CliError(
                EXIT_ERROR, f"kafka-transactions {args[0]} did not finish within {timeout * 2 + 30:g}s"
            ) from None
    if proc.returncode != 0:
        lines = [line.strip() for line in (proc.stderr + "\n" + proc.stdout).splitlines() if not _noise(line)]
        message = " ".join(lines) or f"exit code {proc.returncode}"
        message = message.replace(" Enable debug logging for additional detail.", "")
        raise CliError(EXIT_ERROR, f"kafka-transactions {args[0]} failed: {message}")
    return proc.stdout


def parse_tool_table(text: str) -> tuple[list[str], list[list[str]]]:
    """The tab-separated table TransactionsCommand prints: (header, rows), cells stripped."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return [], []
    split = [[cell.strip() for cell in line.rstrip("\t").split("\t")] for line in lines]
    return split[0], split[1:]


def open_transactions(broker: Broker, app: str) -> list[tuple[str, str]]:
    """(transactional.id, state) of the app's open transactions (ids "<app>:...")."""
    header, rows = parse_tool_table(broker.transactions(["list"]))
    try:
        id_col, state_col = header.index("TransactionalId"), header.index("TransactionState")
    except ValueError:
        raise CliError(EXIT_ERROR, f"unexpected output of kafka-transactions list: {header}") from None
    return [
        (row[id_col], row[state_col])
        for row in rows
        if len(row) > state_col
        and row[id_col].startswith(f"{app}:")
        and row[state_col] in OPEN_TRANSACTION_STATES
    ]
