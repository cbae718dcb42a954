"""The `eos` command's argument conventions, shared by every command group: argparse's errors as eos's
one line, Kafka's tools' global options (on the main parser and on every subcommand), and the argument
types."""

from __future__ import annotations

import argparse
import datetime
from collections.abc import Callable, Mapping

from eos.cli._base import EXIT_USAGE, OffsetSpecError, parse_offset_spec

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_TIMEOUT = 10.0

#: adds one subcommand (`eos GROUP NAME`) with the global options: (group's subparsers, name, help)
Leaf = Callable[[argparse._SubParsersAction, str, str], argparse.ArgumentParser]


class Parser(argparse.ArgumentParser):
    """argparse, with its errors as the one line every eos error is: `eos: error: ...` (exit 2)."""

    def error(self, message: str):
        hint = f" (see '{self.prog} --help')"
        self.exit(EXIT_USAGE, f"eos: error: {message}{hint}\n")


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be above 0")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0")
    return value


def datetime_ms(text: str) -> int:
    """Kafka's `--to-datetime` format to epoch milliseconds."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time like 2026-11-22T09:30:00.000 (optionally with Z or +01:00)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, as kafka-consumer-groups takes it
    return int(moment.timestamp() * 1000)


def offset_target(text: str):
    try:
        return parse_offset_spec(text)
    except OffsetSpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def global_options(parser: argparse.ArgumentParser, defaults: bool, environ: Mapping[str, str]) -> None:
    # On the main parser with defaults; on every subcommand with SUPPRESS, so the options may come
    # after the subcommand too without the subcommand's absence of them overriding the main parser's.
    group = parser.add_argument_group("connection")
    group.add_argument(
        "--bootstrap-server",
        "--bootstrap-servers",  # eos' first spelling, kept
        dest="bootstrap_servers",
        metavar="HOST:PORT[,...]",
        default=environ.get("EOS_BOOTSTRAP_SERVERS") or DEFAULT_BOOTSTRAP if defaults else argparse.SUPPRESS,
        help=f"Kafka brokers (default: $EOS_BOOTSTRAP_SERVERS, else {DEFAULT_BOOTSTRAP})",
    )
    group.add_argument(
        "--command-config",
        metavar="FILE",
        default=None if defaults else argparse.SUPPRESS,
        help="client properties (Java names, as for Kafka's tools: security.protocol, sasl.mechanism,"
        " sasl.jaas.config, ssl.truststore.location with ssl.truststore.type=PEM, ...) for every client",
    )
    group.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=positive_float,
        default=DEFAULT_TIMEOUT if defaults else argparse.SUPPRESS,
        help=f"bound on every broker call (default {DEFAULT_TIMEOUT:g})",
    )


def leaves(environ: Mapping[str, str]) -> Leaf:
    """The `Leaf` of a parser whose global options default from `environ`."""

    def leaf(group: argparse._SubParsersAction, name: str, help: str) -> argparse.ArgumentParser:
        sub = group.add_parser(name, help=help, description=help)
        global_options(sub, False, environ)
        return sub

    return leaf


def subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    """A command group's ACTION subparsers (`eos offsets show`, ...)."""
    return parser.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=Parser)
