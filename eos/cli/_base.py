"""What every `eos` subcommand shares and what needs no broker: exit codes, the one error type,
table formatting and the parsing of offset specs. Kept apart so the unit tests reach it directly."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from eos.errors import EosError

# Exit codes a script can rely on (also in docs/cli.md).
EXIT_OK = 0  # done
EXIT_ERROR = 1  # a runtime error: a broker call failed, a topic is missing, the tool failed...
EXIT_USAGE = 2  # bad arguments (argparse's own code)
EXIT_UNKNOWN_APP = 3  # the group has no committed offsets and there is no local state for the app
EXIT_UNREACHABLE = 4  # no broker answered within --timeout
EXIT_REFUSED = 5  # refused: the query (or another process) is running

EARLIEST = -2  # Spark's startingOffsets spells earliest -2 and latest -1
LATEST = -1

_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


class CliError(EosError):
    """An error the CLI reports as one line on stderr and exits with `code`."""

    def __init__(self, code: int, message: str) -> None:
        self.code = code
        super().__init__(message)


class OffsetSpecError(ValueError):
    """An offset spec given to `--to` is malformed."""


def parse_offset_spec(text: str) -> str | dict[str, dict[int, int]]:
    """`--to`: "earliest", "latest", or Spark's startingOffsets JSON, {"topic": {"0": 42}}, where
    -2 means earliest and -1 latest. Returns "earliest"/"latest" or {topic: {partition: offset}}."""
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        return word
    expected = f'{text!r} is not earliest, latest or JSON like {{"topic": {{"0": 42}}}}'
    if not text.strip().startswith("{"):
        raise OffsetSpecError(expected)
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise OffsetSpecError(f"{expected}: {exc}") from None
    if not isinstance(raw, dict) or not raw:
        raise OffsetSpecError('the JSON must be a non-empty object: {"topic": {"partition": offset}}')
    spec: dict[str, dict[int, int]] = {}
    for topic, partitions in raw.items():
        if not _TOPIC.match(topic):
            raise OffsetSpecError(f"{topic!r} is not a legal Kafka topic name")
        if not isinstance(partitions, dict) or not partitions:
            raise OffsetSpecError(f'topic {topic!r}: expected a non-empty object {{"partition": offset}}')
        spec[topic] = {}
        for partition, offset in partitions.items():
            if not str(partition).isdigit():
                raise OffsetSpecError(f"topic {topic!r}: partition {partition!r} is not an integer >= 0")
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                raise OffsetSpecError(
                    f"topic {topic!r} partition {partition}: offset {offset!r} is not an integer >= 0,"
                    " -2 (earliest) or -1 (latest)"
                )
            spec[topic][int(partition)] = offset
    return spec


def print_json(value: Any) -> None:
    """A command's result as indented JSON (`--json`)."""
    print(json.dumps(value, indent=2))


def show(value: Any) -> str:
    """A cell: None is shown as "-"."""
    return "-" if value is None else str(value)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table: one header line, columns two spaces apart, numbers aligned right."""
    cells = [[show(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    numeric = [
        bool(rows) and all(isinstance(row[i], int) or row[i] is None for row in rows)
        for i in range(len(headers))
    ]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)]
        return "  ".join(parts).rstrip()

    return "\n".join([line(list(headers))] + [line(row) for row in cells])


def lag(committed: int | None, end: int | None) -> int | None:
    if committed is None or end is None:
        return None
    return max(end - committed, 0)
