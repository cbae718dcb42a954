"""The `eos` command: the parser of every command group (`_offsets`, `_transactions`, `_state`,
`_progress`, `_dlq`, `_repair`), the Config its clients are built from, and the one place its errors
become exit codes."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from eos._version import __version__
from eos.cli import _dlq, _offsets, _progress, _properties, _repair, _state, _transactions
from eos.cli._args import Parser, global_options, leaves
from eos.cli._base import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError
from eos.cli._broker import Broker
from eos.config import Config
from eos.errors import ConfigError, EosError

_PLACEHOLDER_OUTPUT = "eos-cli"  # Config wants an output topic; the CLI never writes one
_SHARED_ENV = ("EOS_KAFKA_", "EOS_ADMIN_", "EOS_CONSUMER_")
_GROUPS = (_offsets, _transactions, _state, _progress, _dlq, _repair)


def build_parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    env = os.environ if environ is None else environ
    parser = Parser(
        prog="eos",
        description="Operate an eos application: group offsets, Kafka transactions, local state stores,"
        ' the ledger of a format("eos") query.',
        epilog="exit codes: 0 ok, 1 error, 2 bad arguments, 3 unknown app, 4 broker unreachable,"
        " 5 refused (the query is running)",
    )
    parser.add_argument(
        "--version", action="version", version=f"eos {__version__}", help="print eos's version and exit"
    )
    global_options(parser, True, env)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=Parser)
    leaf = leaves(env)
    for group in _GROUPS:
        group.add_commands(commands, leaf)
    return parser


def build_config(
    app: str | None,
    bootstrap_servers: str,
    timeout: float,
    state_dir: str | None = None,
    environ: Mapping[str, str] | None = None,
    client_settings: Mapping[str, str] | None = None,
) -> Config:
    """The Config the CLI's clients are built from: the app id and brokers given, the shared client
    settings (EOS_KAFKA_*, EOS_ADMIN_*, EOS_CONSUMER_*: security) and EOS_STATE_DIR from the
    environment, and nothing else of it (the CLI needs no guarantee, output topic, ...).
    `client_settings` (from --command-config) win over the environment's."""
    env = os.environ if environ is None else environ
    shared = {k: v for k, v in env.items() if k.startswith(_SHARED_ENV)}
    kwargs: dict[str, Any] = {
        "app_id": app or "eos-cli",
        "bootstrap_servers": bootstrap_servers,
        "output_topic": _PLACEHOLDER_OUTPUT,
        "operation_timeout_ms": max(int(timeout * 1000), 1),
        # librdkafka logs connection failures to stderr; the CLI reports errors itself, on one line.
        "admin": {"log_level": 0},
        "consumer": {"log_level": 0},
    }
    if state_dir:
        kwargs["state_dir"] = state_dir
    elif env.get("EOS_STATE_DIR"):
        kwargs["state_dir"] = env["EOS_STATE_DIR"]
    config = Config.from_env(shared, **kwargs)
    if client_settings:
        config = attrs.evolve(config, kafka={**config.kafka, **client_settings})
    return config


def _error(message: str, code: int) -> int:
    print(f"eos: error: {' '.join(str(message).split())}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)  # bad arguments: exit 2
    try:
        java_settings = _properties.load(args.command_config) if args.command_config else {}
        config = build_config(
            getattr(args, "app", None),
            args.bootstrap_servers,
            args.timeout,
            getattr(args, "state_dir", None),
            client_settings=_properties.client_settings(
                java_settings, f"--command-config {args.command_config}"
            ),
        )
    except CliError as exc:
        return _error(str(exc), exc.code)
    except ConfigError as exc:
        return _error(str(exc), EXIT_USAGE)
    try:
        return args.func(args, config, Broker(config, args.timeout, java_settings))
    except CliError as exc:
        return _error(str(exc), exc.code)
    except EosError as exc:
        return _error(str(exc), EXIT_ERROR)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `eos ... | head`
        sys.stderr.close()
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - a script gets one line and exit code 1, not a traceback
        return _error(f"{type(exc).__name__}: {exc}", EXIT_ERROR)
