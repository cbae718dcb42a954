"""`--command-config FILE`: a Java client properties file, as Kafka's own tools take it.

The file is read as Java reads `.properties` (comments, `=`/`:`/blank separators, escapes, line
continuations). Kafka's tools hand it to the Java admin client unchanged (eos passes it on to
`TransactionsCommand` the same way); eos's own clients are librdkafka's, so `client_settings`
translates the settings that are named differently there (`eos._kafka._java.from_java`). Values are
never printed: errors name the file, the line and the key only.
"""

from __future__ import annotations

import re
from pathlib import Path

from eos._kafka import _java
from eos.cli._base import EXIT_USAGE, CliError
from eos.errors import ConfigError

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str, where: str) -> str:
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise CliError(EXIT_USAGE, f"{where}: malformed \\uXXXX escape")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def _logical_lines(text: str):
    """(first physical line number, logical line): a line ending in an odd number of backslashes
    continues on the next, whose leading blanks are dropped."""
    pending, start = None, 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.lstrip(" \t\f") if pending is not None else raw
        if pending is None:
            start = number
            stripped = line.lstrip(" \t\f")
            if not stripped or stripped[0] in "#!":
                continue
            line = stripped
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        yield start, (pending or "") + line
        pending = None
    if pending is not None:
        yield start, pending


def parse(text: str, source: str) -> dict[str, str]:
    """The key/value pairs of a `.properties` text (later keys win, as in Java)."""
    props: dict[str, str] = {}
    for number, line in _logical_lines(text):
        where = f"{source}, line {number}"
        i = 0
        while i < len(line):  # the key ends at the first unescaped '=', ':' or blank
            if line[i] == "\\":
                i += 2
                continue
            if line[i] in "=: \t\f":
                break
            i += 1
        key = _unescape(line[:i], where)
        rest = line[i:].lstrip(" \t\f")
        if rest[:1] in ("=", ":") and (i == len(line) or line[i] in " \t\f=:"):
            rest = rest[1:].lstrip(" \t\f")
        if not key:
            raise CliError(EXIT_USAGE, f"{where}: a setting without a key")
        props[key] = _unescape(rest, where)
    return props


def load(path: str) -> dict[str, str]:
    """`parse` of the file at `path`; an unreadable file is a usage error naming it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        text = Path(path).read_text(encoding="latin-1")  # Java's own default for .properties
    except OSError as exc:
        raise CliError(EXIT_USAGE, f"--command-config {path}: {exc.strerror}") from None
    return parse(text, f"--command-config {path}")


def client_settings(props: dict[str, str], source: str) -> dict[str, str]:
    """librdkafka settings for eos's clients from the file's Java client properties
    (`eos._kafka._java.from_java`); what cannot be translated is a usage error naming the file and key."""
    try:
        return _java.from_java(props)
    except ConfigError as exc:
        raise CliError(EXIT_USAGE, f"{source}: {exc.reason}") from None
