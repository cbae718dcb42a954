"""`eos`: operate an eos application from the shell.

    eos offsets show  --app APP [--topic T ...] [--json]
    eos offsets reset --app APP (--to earliest|latest|JSON | --shift N | --to-datetime T) [--topic T ...]
                      [--execute] [--json]
    eos transactions list [--app APP] | find-hanging | abort | describe | describe-producers
    eos state show --app APP [--state-dir DIR] [--json]
    eos state wipe --app APP --topic T --partition P [--store S] [--state-dir DIR]
    eos dlq show --topic DLQ [--json]
    eos dlq replay --topic DLQ --to TOPIC [--group G] [--execute]

Global options (before or after the subcommand), as Kafka's tools name them: --bootstrap-server
(alias --bootstrap-servers; default $EOS_BOOTSTRAP_SERVERS, else 127.0.0.1:9092), --command-config
FILE (Java client properties) and --timeout SECONDS (default 10). The clients also take the same
EOS_KAFKA_* / EOS_ADMIN_* settings (security) as the pipeline, through `eos.Config`. A reset is a dry
run unless --execute.

Exit codes: 0 ok, 1 runtime error, 2 bad arguments, 3 unknown app (the group has no committed offsets
and there is no state), 4 broker unreachable, 5 refused because the query is running. Errors are one
line on stderr: `eos: error: ...`. docs/cli.md shows every command with its output.

The package: `_main.py` the parser and the one place errors become exit codes, `_args.py` the argument
conventions every command shares; a module per command group, with its subcommands' arguments and
functions: `_offsets.py`, `_transactions.py`, `_state.py` (and the local stores on disk), `_progress.py`
(`ledger` and `parts`), `_dlq.py` (the dead-letter topic). `_base.py` exit codes, tables and offset
specs (no broker), `_broker.py` the broker side (admin calls, Kafka's own CLI tools), `_tools.py` the
jars those tools need (fetched on first use), `_properties.py` --command-config. The names it looks for
are `eos._names`'s, as the runtime writes them.
"""

from eos.cli._base import EXIT_ERROR, EXIT_OK, EXIT_REFUSED, EXIT_UNKNOWN_APP, EXIT_UNREACHABLE, EXIT_USAGE
from eos.cli._main import build_config, build_parser, main

__all__ = [
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_UNKNOWN_APP",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "build_config",
    "build_parser",
    "main",
]
