"""The broker side of the `eos` command: the group's offsets, log offsets, the checks that refuse an
offset reset while the query runs (through `eos._kafka._admin`), and Kafka's own `TransactionsCommand`
run from the fetched jars.

Every call is bounded by `--timeout`; a broker that does not answer is exit code 4, never a hang.
`exit_codes` is where the Kafka layer's errors become the CLI's exit codes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from eos._kafka import _admin, _java, _offsets, _topics
from eos.cli._base import EXIT_ERROR, EXIT_REFUSED, EXIT_UNREACHABLE, CliError
from eos.cli._tools import tools_classpath
from eos.config import Config
from eos.errors import BrokerUnreachableError, EosError, GroupNotEmptyError

TP = tuple[str, int]

# Transaction states in which a transaction is open (its offsets may still be committed).
OPEN_TRANSACTION_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})
TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"


@contextlib.contextmanager
def exit_codes() -> Iterator[None]:
    """The Kafka layer's errors as CliError, their messages kept: no broker answered exit code 4, the
    broker refused to change a group that has members 5, anything else 1."""
    try:
        yield
    except CliError:
        raise
    except BrokerUnreachableError as exc:
        raise CliError(EXIT_UNREACHABLE, str(exc)) from None
    except GroupNotEmptyError as exc:
        raise CliError(EXIT_REFUSED, str(exc)) from None
    except EosError as exc:
        raise CliError(EXIT_ERROR, str(exc)) from None


class Broker:
    """The CLI's view of the cluster: `eos._kafka._admin.Admin`'s calls, their errors as CliError."""

    def __init__(self, config: Config, timeout: float, java_settings: dict[str, str] | None = None) -> None:
        self.config = config
        self.timeout = timeout
        #: --command-config as written (Java names), for Kafka's own tools
        self.java_settings = dict(java_settings or {})
        self._admin = _admin.Admin(config, timeout)

    def transactions(self, args: list[str]) -> str:
        """Kafka's `TransactionsCommand <args>` against this cluster (see `transactions_command`)."""
        return transactions_command(self.config, args, self.timeout, self.java_settings)

    # -- metadata -------------------------------------------------------------------------------------

    def partitions(self, topics: Iterable[str] = ()) -> dict[str, int]:
        """Partition count of each existing topic among `topics`. Also the reachability check: raises
        exit code 4 if no broker answers within the timeout."""
        with exit_codes():
            return _topics.partitions(self.config, list(topics))

    def require_topics(self, topics: Iterable[str]) -> dict[str, int]:
        topics = list(dict.fromkeys(topics))
        found = self.partitions(topics)
        missing = [t for t in topics if t not in found]
        if missing:
            raise CliError(EXIT_ERROR, f"topic {', '.join(repr(t) for t in missing)} does not exist")
        return found

    # -- offsets --------------------------------------------------------------------------------------

    def committed(self, group: str) -> dict[TP, int]:
        with exit_codes():
            return self._admin.committed(group)

    def committed_metadata(self, group: str, topic: str, partitions: int) -> dict[int, tuple[int, str]]:
        with exit_codes():
            return self._admin.committed_metadata(group, topic, partitions)

    def unstable(self, group: str, tps: Iterable[TP]) -> list[TP]:
        with exit_codes():
            return self._admin.unstable(group, tps)

    def log_offsets(
        self, tps: Iterable[TP], which: str, committed_only: bool = False
    ) -> dict[TP, int | None]:
        with exit_codes():
            return self._admin.log_offsets(tps, which, committed_only)

    def offsets_for_time(self, tps: Iterable[TP], timestamp_ms: int) -> dict[TP, int | None]:
        with exit_codes():
            return self._admin.offsets_for_time(tps, timestamp_ms)

    # -- the group ------------------------------------------------------------------------------------

    def members(self, group: str) -> list[str]:
        with exit_codes():
            return self._admin.members(group)

    def alter(self, group: str, offsets: dict[TP, int], was: Mapping[TP, int] | None = None) -> None:
        """Set the group's offsets, stamped as set by an operator (`eos._kafka._offsets.cli_stamp`), which
        the app accepts as its own, with the offset each replaced (`was`)."""
        was = was or {}
        stamps = {tp: _offsets.cli_stamp(group, was.get(tp)) for tp in offsets}
        with exit_codes():
            self._admin.alter(group, offsets, stamps)


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
    for key, value in _java.spark_source_options(config).items():
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
