"""The `eos` command: its parser and one function per subcommand."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from eos import _ledger, _names, _offsets, _parts
from eos.cli import _dlq, _properties, _state
from eos.cli._base import (
    EARLIEST,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNKNOWN_APP,
    EXIT_USAGE,
    LATEST,
    CliError,
    OffsetSpecError,
    format_table,
    lag,
    parse_offset_spec,
    print_json,
)
from eos.cli._broker import Broker, open_transactions
from eos.config import Config
from eos.errors import ConfigError, EosError

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_TIMEOUT = 10.0
_PLACEHOLDER_OUTPUT = "eos-cli"  # Config wants an output topic; the CLI never writes one
_SHARED_ENV = ("EOS_KAFKA_", "EOS_ADMIN_", "EOS_CONSUMER_")

TP = tuple[str, int]


# -- arguments --------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors as the one line every eos error is: `eos: error: ...` (exit 2)."""

    def error(self, message: str):
        hint = f" (see '{self.prog} --help')"
        self.exit(EXIT_USAGE, f"eos: error: {message}{hint}\n")


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be above 0")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0")
    return value


def _datetime_ms(text: str) -> int:
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


def _offset_target(text: str):
    try:
        return parse_offset_spec(text)
    except OffsetSpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _global_options(parser: argparse.ArgumentParser, defaults: bool, environ: Mapping[str, str]) -> None:
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
        type=_positive_float,
        default=DEFAULT_TIMEOUT if defaults else argparse.SUPPRESS,
        help=f"bound on every broker call (default {DEFAULT_TIMEOUT:g})",
    )


def build_parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    env = os.environ if environ is None else environ
    parser = _Parser(
        prog="eos",
        description="Operate an eos application: group offsets, Kafka transactions, local state stores,"
        ' the ledger of a format("eos") query.',
        epilog="exit codes: 0 ok, 1 error, 2 bad arguments, 3 unknown app, 4 broker unreachable,"
        " 5 refused (the query is running)",
    )
    _global_options(parser, True, env)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_Parser)

    def leaf(group, name: str, help: str) -> argparse.ArgumentParser:
        sub = group.add_parser(name, help=help, description=help)
        _global_options(sub, False, env)
        return sub

    # offsets
    offsets = commands.add_parser("offsets", help="the group's committed input offsets")
    offsets_cmd = offsets.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=_Parser)
    show = leaf(offsets_cmd, "show", "committed offset, log end offset and lag per input partition")
    show.add_argument("--app", required=True, help="app_id (the consumer group)")
    show.add_argument(
        "--topic", action="append", help="input topic (repeatable; default: every topic the group committed)"
    )
    show.add_argument("--json", action="store_true", help="JSON instead of a table")
    show.set_defaults(func=cmd_offsets_show)

    reset = leaf(offsets_cmd, "reset", "move the group's committed offsets (refused while the query runs)")
    reset.add_argument("--app", required=True, help="app_id (the consumer group)")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--to",
        type=_offset_target,
        metavar="earliest|latest|JSON",
        help="earliest, latest (the last stable offset), or JSON as Spark's startingOffsets:"
        ' {"topic": {"0": 42}} (-2 earliest, -1 latest)',
    )
    target.add_argument(
        "--shift", type=int, metavar="N", help="move each committed offset by N (may be negative)"
    )
    target.add_argument(
        "--to-datetime",
        type=_datetime_ms,
        metavar="YYYY-MM-DDTHH:mm:SS.sss",
        help="the first offset whose record timestamp is at or after this time (the end of the log"
        " where there is none); without a zone (Z, +01:00) it is this machine's local time, as in Kafka",
    )
    reset.add_argument(
        "--topic", action="append", help="input topic (repeatable; default: every topic the group committed)"
    )
    run = reset.add_mutually_exclusive_group()
    run.add_argument(
        "--execute",
        action="store_true",
        help="change the offsets (without it: a dry run, as kafka-consumer-groups)",
    )
    run.add_argument(
        "--dry-run", action="store_true", help="print old -> new and change nothing (the default)"
    )
    reset.add_argument("--json", action="store_true", help="JSON instead of a table")
    reset.add_argument("--state-dir", help="also refuse while a store of the app is locked here")
    reset.set_defaults(func=cmd_offsets_reset)

    # transactions
    txn = commands.add_parser("transactions", help="Kafka's transactions (kafka-transactions from the jars)")
    txn_cmd = txn.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=_Parser)
    tlist = leaf(txn_cmd, "list", "list transactions")
    tlist.add_argument("--app", help="only the app's (transactional ids starting with APP:)")
    tlist.set_defaults(func=cmd_transactions_list)
    hanging = leaf(txn_cmd, "find-hanging", "find hanging transactions on a broker")
    hanging.add_argument("--broker-id", type=_non_negative_int, default=1, help="default 1")
    hanging.add_argument("--topic", help="only this topic")
    hanging.add_argument("--partition", type=_non_negative_int, help="only this partition (needs --topic)")
    hanging.add_argument(
        "--max-transaction-timeout", type=_non_negative_int, metavar="MINUTES", help="default 15 (Kafka's)"
    )
    hanging.set_defaults(func=cmd_transactions_find_hanging)
    abort = leaf(txn_cmd, "abort", "abort the open transaction that starts at an offset of a partition")
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=_non_negative_int, required=True)
    abort.add_argument("--start-offset", type=_non_negative_int, required=True)
    abort.set_defaults(func=cmd_transactions_abort)
    describe = leaf(txn_cmd, "describe", "describe one transactional id")
    describe.add_argument("--transactional-id", required=True)
    describe.set_defaults(func=cmd_transactions_passthrough, tool_args=("describe", "transactional_id"))
    producers = leaf(
        txn_cmd, "describe-producers", "producers of a partition, with their open transaction's start offset"
    )
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=_non_negative_int, required=True)
    producers.set_defaults(
        func=cmd_transactions_passthrough, tool_args=("describe-producers", "topic", "partition")
    )

    # state
    state = commands.add_parser("state", help="the local state stores")
    state_cmd = state.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=_Parser)
    sshow = leaf(state_cmd, "show", "keys, checkpoint, local and changelog offsets per store and partition")
    sshow.add_argument("--app", required=True)
    sshow.add_argument("--state-dir", help="default: $EOS_STATE_DIR, else eos' default")
    sshow.add_argument("--json", action="store_true", help="JSON instead of a table")
    sshow.set_defaults(func=cmd_state_show)
    wipe = leaf(state_cmd, "wipe", "mark a partition's stores unclean: the next run restores them")
    wipe.add_argument("--app", required=True)
    wipe.add_argument("--topic", required=True, help="input topic")
    wipe.add_argument("--partition", type=_non_negative_int, required=True, help="input partition")
    wipe.add_argument("--store", help="only this store (default: every store of the partition)")
    wipe.add_argument("--state-dir", help="default: $EOS_STATE_DIR, else eos' default")
    wipe.set_defaults(func=cmd_state_wipe)

    # ledger
    ledger = commands.add_parser("ledger", help='the per-batch ledger of a format("eos") query')
    ledger_cmd = ledger.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=_Parser)
    lshow = leaf(
        ledger_cmd, "show", "per batch: the input partitions committed, their offsets and transactional ids"
    )
    where = lshow.add_mutually_exclusive_group(required=True)
    where.add_argument("--checkpoint-location", help="the query's checkpointLocation (its ledger is inside)")
    where.add_argument("--ledger-dir", help="the ledger's directory, where the query set eos.ledger.dir")
    lshow.add_argument(
        "--batch", type=_non_negative_int, action="append", help="only this batch (repeatable)"
    )
    lshow.add_argument(
        "--last", type=_non_negative_int, default=20, help="the last N batches (default 20; 0 for all)"
    )
    lshow.add_argument("--topic", help="only this input topic")
    lshow.add_argument("--partition", type=_non_negative_int, help="only this input partition")
    lshow.add_argument("--json", action="store_true", help="JSON lines (one per batch) instead of a table")
    lshow.set_defaults(func=cmd_ledger_show)

    # parts
    parts = commands.add_parser("parts", help='input_mode "any": the batch each part last committed')
    parts_cmd = parts.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=_Parser)
    pshow = leaf(parts_cmd, "show", "per part: the last batch it committed, its rows and digest")
    pshow.add_argument("--app", required=True, help="app_id (the consumer group)")
    pshow.add_argument("--json", action="store_true", help="JSON instead of a table")
    pshow.set_defaults(func=cmd_parts_show)

    # dlq
    dlq = commands.add_parser("dlq", help='the dead-letter topic of on_error="dead_letter"')
    dlq_cmd = dlq.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=_Parser)
    dshow = leaf(
        dlq_cmd, "show", "dead letters grouped by error: count, first and last input record, message"
    )
    dshow.add_argument("--topic", required=True, help="the dead-letter topic")
    dshow.add_argument("--json", action="store_true", help="JSON instead of a table")
    dshow.set_defaults(func=_dlq.cmd_dlq_show)
    replay = leaf(
        dlq_cmd,
        "replay",
        "copy dead letters (key, value, input headers) to a topic, exactly once per replay group;"
        " a dry run unless --execute",
    )
    replay.add_argument("--topic", required=True, help="the dead-letter topic")
    replay.add_argument("--to", required=True, help="where the copies go (the input topic, a retry topic)")
    replay.add_argument(
        "--group",
        help="replay group: where it resumes (default eos-dlq-replay.<topic>; its transactional.id)",
    )
    replay.add_argument("--execute", action="store_true", help="copy (default: say what would be copied)")
    replay.set_defaults(func=_dlq.cmd_dlq_replay)
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


# -- output -----------------------------------------------------------------------------------------


def _arrow_table(rows: Sequence[tuple[str, int, int | None, int]]) -> str:
    return format_table(
        ["TOPIC", "PARTITION", "OLD", "", "NEW"], [(t, p, old, "->", new) for t, p, old, new in rows]
    )


# -- offsets ----------------------------------------------------------------------------------------


def _known_committed(broker: Broker, app: str) -> dict[TP, int]:
    broker.partitions()  # no broker within --timeout: exit 4 before anything else
    committed = broker.committed(app)
    if not committed:
        raise CliError(EXIT_UNKNOWN_APP, f"unknown app {app!r}: the group {app!r} has no committed offsets")
    return committed


def _all_partitions(broker: Broker, topics: Sequence[str]) -> list[TP]:
    counts = broker.require_topics(topics)
    return [(t, p) for t in dict.fromkeys(topics) for p in range(counts[t])]


def cmd_offsets_show(args, config: Config, broker: Broker) -> int:
    app = config.app_id
    committed = _known_committed(broker, app)
    progress = _names.parts_topic(app)  # input_mode "any": not input; `eos parts show` reads it
    tps = (
        _all_partitions(broker, args.topic)
        if args.topic
        else sorted(t for t in committed if t[0] != progress)
    )
    ends = broker.log_offsets(tps, "latest")
    rows = [
        (t, p, committed.get((t, p)), ends.get((t, p)), lag(committed.get((t, p)), ends.get((t, p))))
        for t, p in tps
    ]
    if args.json:
        print_json(
            {
                "app": app,
                "partitions": [
                    {"topic": t, "partition": p, "committed": c, "end": e, "lag": g} for t, p, c, e, g in rows
                ],
            }
        )
    else:
        print(format_table(["TOPIC", "PARTITION", "COMMITTED", "END", "LAG"], rows))
    return EXIT_OK


def cmd_parts_show(args, config: Config, broker: Broker) -> int:
    """input_mode "any": what each part's committed progress offset says (`eos._parts.Progress`)."""
    app = config.app_id
    topic = _names.parts_topic(app)
    count = broker.partitions([topic]).get(topic)
    if count is None:
        raise CliError(
            EXIT_UNKNOWN_APP, f"app {app!r} has no progress topic {topic!r}: it never ran in input_mode 'any'"
        )
    entries = broker.committed_metadata(app, topic, count)
    rows = []
    for part in range(count):
        offset, metadata = entries.get(part, (None, None))
        progress = _parts.Progress.of(_offsets.Committed(offset, metadata) if offset is not None else None)
        if progress is None:
            rows.append((part, None, None, None, None))
        else:
            d = progress.digest
            rows.append((part, progress.batch_id, d.rows, progress.parts, d.text()))
    if args.json:
        keys = ("part", "batch", "rows", "parts", "digest")
        print_json({"app": app, "topic": topic, "parts": [dict(zip(keys, r, strict=True)) for r in rows]})
    else:
        print(format_table(["PART", "BATCH", "ROWS", "PARTS", "DIGEST"], rows))
    return EXIT_OK


def refuse_if_running(broker: Broker, config: Config, tps: Sequence[TP]) -> None:
    """Exit code 5 if anything says the app is running: members in its group, transactional offsets
    pending for it, a store lock held on this host, or an open transaction of one of its ids."""
    app = config.app_id
    members = broker.members(app)
    if members:
        raise CliError(
            EXIT_REFUSED,
            f"refused: the group {app!r} has {len(members)} live member(s) ({', '.join(members[:3])}):"
            " stop the query first",
        )
    unstable = broker.unstable(app, tps)
    if unstable:
        where = ", ".join(f"{t}/{p}" for t, p in unstable[:5])
        raise CliError(
            EXIT_REFUSED,
            f"refused: an open transaction holds offsets of group {app!r} for {where}:"
            " the query is committing; stop it first"
            " (an abandoned transaction ends after its transaction.timeout.ms)",
        )
    locked = [s for s in _state.scan(config.state_dir, app) if s.locked]
    if locked:
        s = locked[0]
        raise CliError(
            EXIT_REFUSED,
            f"refused: a process on this host holds the lock of store {s.store!r} of {s.topic}/{s.partition}"
            f" ({len(locked)} locked store(s)): the query is running; stop it first",
        )
    txns = open_transactions(broker, app)
    if txns:
        ids = ", ".join(f"{tid} ({state})" for tid, state in txns[:5])
        raise CliError(
            EXIT_REFUSED,
            f"refused: {len(txns)} open transaction(s) of app {app!r}: {ids}; the query is running:"
            " stop it first (an abandoned transaction ends after its transaction.timeout.ms)",
        )


def _targets(args, broker: Broker, committed: dict[TP, int]) -> tuple[list[TP], dict[TP, int], list[TP]]:
    """(partitions, new offset per partition, partitions left as they are)."""
    to = args.to
    if isinstance(to, dict):
        counts = broker.require_topics(to)
        for topic, partitions in to.items():
            beyond = [p for p in partitions if p >= counts[topic]]
            if beyond:
                raise CliError(
                    EXIT_ERROR, f"topic {topic!r} has {counts[topic]} partition(s), no partition {beyond[0]}"
                )
        tps = sorted((t, p) for t, parts in to.items() for p in parts)
    elif args.topic:
        tps = _all_partitions(broker, args.topic)
    else:
        tps = sorted(committed)
    low = broker.log_offsets(tps, "earliest")
    end = broker.log_offsets(tps, "latest")
    stable = broker.log_offsets(tps, "latest", committed_only=True)  # where a read_committed reader stops
    for tp in tps:
        if low.get(tp) is None or end.get(tp) is None or stable.get(tp) is None:
            raise CliError(EXIT_ERROR, f"partition {tp[0]}/{tp[1]} does not exist")
    at_time = broker.offsets_for_time(tps, args.to_datetime) if args.to_datetime is not None else {}
    new: dict[TP, int] = {}
    skipped: list[TP] = []
    for tp in tps:
        if args.to_datetime is not None:
            found = at_time.get(tp)
            new[tp] = stable[tp] if found is None or found < 0 else found  # none that late: the end
        elif to == "earliest":
            new[tp] = low[tp]
        elif to == "latest":
            new[tp] = stable[tp]
        elif isinstance(to, dict):
            offset = to[tp[0]][tp[1]]
            if offset == EARLIEST:
                new[tp] = low[tp]
            elif offset == LATEST:
                new[tp] = stable[tp]
            elif not low[tp] <= offset <= end[tp]:
                raise CliError(
                    EXIT_ERROR,
                    f"offset {offset} of {tp[0]}/{tp[1]} is outside its log"
                    f" (earliest {low[tp]}, end {end[tp]})",
                )
            else:
                new[tp] = offset
        elif tp in committed:  # --shift
            new[tp] = min(max(committed[tp] + args.shift, low[tp]), end[tp])
        else:
            skipped.append(tp)
    return tps, new, skipped


def cmd_offsets_reset(args, config: Config, broker: Broker) -> int:
    if isinstance(args.to, dict) and args.topic:
        raise CliError(EXIT_USAGE, "--topic does not combine with --to JSON (the JSON names the topics)")
    app = config.app_id
    committed = _known_committed(broker, app)
    tps, new, skipped = _targets(args, broker, committed)
    refuse_if_running(broker, config, sorted(set(tps) | set(committed)))
    rows = [(t, p, committed.get((t, p)), new[(t, p)]) for t, p in tps if (t, p) in new]
    dry_run = not args.execute
    if not dry_run and new:
        broker.alter(app, new)
    if args.json:
        print_json(
            {
                "app": app,
                "dry_run": dry_run,
                "partitions": [{"topic": t, "partition": p, "old": o, "new": n} for t, p, o, n in rows],
                "skipped": [
                    {"topic": t, "partition": p, "reason": "no committed offset"} for t, p in skipped
                ],
            }
        )
        return EXIT_OK
    print(_arrow_table(rows))
    for t, p in skipped:
        print(f"{t}/{p}: no committed offset to shift: left as it is")
    if dry_run:
        print(f"dry run: nothing changed ({len(rows)} partition(s) would be reset); add --execute to reset")
    else:
        print(f"reset {len(rows)} partition(s) of group {app!r}")
    return EXIT_OK


# -- transactions -----------------------------------------------------------------------------------


def cmd_transactions_list(args, config: Config, broker: Broker) -> int:
    broker.partitions()
    out = broker.transactions(["list"])
    if args.app:
        lines = out.splitlines()
        out = "\n".join(lines[:1] + [line for line in lines[1:] if line.startswith(f"{args.app}:")]) + "\n"
    sys.stdout.write(out)
    return EXIT_OK


def cmd_transactions_find_hanging(args, config: Config, broker: Broker) -> int:
    if args.partition is not None and not args.topic:
        raise CliError(EXIT_USAGE, "--partition needs --topic")
    broker.partitions()
    tool = ["find-hanging", "--broker-id", str(args.broker_id)]
    if args.topic:
        broker.require_topics([args.topic])
        tool += ["--topic", args.topic]
    if args.partition is not None:
        tool += ["--partition", str(args.partition)]
    if args.max_transaction_timeout is not None:
        tool += ["--max-transaction-timeout", str(args.max_transaction_timeout)]
    sys.stdout.write(broker.transactions(tool))
    return EXIT_OK


def _require_partition(broker: Broker, topic: str, partition: int) -> None:
    count = broker.require_topics([topic])[topic]
    if partition >= count:
        raise CliError(EXIT_ERROR, f"topic {topic!r} has {count} partition(s), no partition {partition}")


def cmd_transactions_abort(args, config: Config, broker: Broker) -> int:
    _require_partition(broker, args.topic, args.partition)
    tool = [
        "abort",
        "--topic",
        args.topic,
        "--partition",
        str(args.partition),
        "--start-offset",
        str(args.start_offset),
    ]
    sys.stdout.write(broker.transactions(tool))
    print(
        f"aborted the transaction that started at offset {args.start_offset} of {args.topic}/{args.partition}"
    )
    return EXIT_OK


def cmd_transactions_passthrough(args, config: Config, broker: Broker) -> int:
    name, *options = args.tool_args
    if "topic" in options:
        _require_partition(broker, args.topic, args.partition)
    else:
        broker.partitions()
    tool = [name]
    for option in options:
        tool += [f"--{option.replace('_', '-')}", str(getattr(args, option))]
    sys.stdout.write(broker.transactions(tool))
    return EXIT_OK


# -- state ------------------------------------------------------------------------------------------


def cmd_state_show(args, config: Config, broker: Broker) -> int:
    app = config.app_id
    stores = _state.scan(config.state_dir, app)
    where = _names.app_dir(config.state_dir, app)
    broker.partitions()
    if not stores:
        if not broker.committed(app):
            raise CliError(
                EXIT_UNKNOWN_APP,
                f"unknown app {app!r}: the group has no committed offsets"
                f" and there is no state under {where}",
            )
        if args.json:
            print_json({"app": app, "state_dir": str(config.state_dir), "stores": []})
        else:
            print(f"no local state for app {app!r} under {where}")
        return EXIT_OK
    changelogs = {(s.topic, s.store): _names.changelog_topic(config.app_id, s.topic, s.store) for s in stores}
    ends = broker.log_offsets({(changelogs[(s.topic, s.store)], s.partition) for s in stores}, "latest")
    records = []
    for s in stores:
        changelog = changelogs[(s.topic, s.store)]
        records.append((s, changelog, ends.get((changelog, s.partition))))
    if args.json:
        print_json(
            {
                "app": app,
                "state_dir": str(config.state_dir),
                "stores": [
                    {
                        "topic": s.topic,
                        "partition": s.partition,
                        "store": s.store,
                        "keys": s.keys,
                        "checkpoint": s.checkpoint,
                        "clean": s.checkpoint is not None,
                        "local": s.local,
                        "changelog": changelog,
                        "changelog_end": end,
                        "locked": s.locked,
                    }
                    for s, changelog, end in records
                ],
            }
        )
        return EXIT_OK
    rows = [
        (
            s.topic,
            s.partition,
            s.store,
            s.keys,
            "none (unclean)" if s.checkpoint is None else s.checkpoint,
            s.local,
            "missing" if end is None else end,
            "yes" if s.locked else "no",
        )
        for s, _, end in records
    ]
    print(
        format_table(
            ["TOPIC", "PARTITION", "STORE", "KEYS", "CHECKPOINT", "LOCAL", "CHANGELOG_END", "LOCKED"], rows
        )
    )
    return EXIT_OK


def cmd_state_wipe(args, config: Config, broker: Broker) -> int:
    wiped = _state.wipe(config.state_dir, config.app_id, args.topic, args.partition, args.store)
    for name in wiped:
        print(
            f"wiped store {name!r} of {args.topic}/{args.partition}: checkpoint and local database deleted;"
            f" the next run restores it from {_names.changelog_topic(config.app_id, args.topic, name)}"
        )
    return EXIT_OK


# -- ledger ---------------------------------------------------------------------------------------


def cmd_ledger_show(args, config: Config, broker: Broker) -> int:
    location = args.ledger_dir or _ledger.location_of(args.checkpoint_location)
    try:
        ids = _ledger.batch_ids(location)
    except FileNotFoundError:
        raise CliError(
            EXIT_ERROR, f'no eos ledger at {location} (written by format("eos") queries)'
        ) from None
    if args.batch:
        ids = [i for i in ids if i in set(args.batch)]
    elif args.last:
        ids = ids[-args.last :]

    def wanted(p: dict[str, Any]) -> bool:
        return (args.topic is None or p["topic"] == args.topic) and (
            args.partition is None or p["partition"] == args.partition
        )

    rows = []
    for entry in _ledger.read_batches(location, ids):
        for attempt in entry["attempts"]:
            attempt["partitions"] = [p for p in attempt["partitions"] if wanted(p)]
        if args.json:
            print(json.dumps(entry, sort_keys=True))
            continue
        for number, attempt in enumerate(entry["attempts"], 1):
            for p in attempt["partitions"]:
                offsets = "-" if p["first_offset"] is None else f"{p['first_offset']}-{p['last_offset']}"
                after = p["committed_before"] if p["last_offset"] is None else p["last_offset"] + 1
                rows.append(
                    (
                        entry["batch_id"],
                        number,
                        attempt["outcome"],
                        p["topic"],
                        p["partition"],
                        p["transactional_id"] or "-",
                        offsets,
                        p["committed_before"],
                        after,
                        p["records_in"],
                        p["skipped"],
                        p["records_out"],
                        p["transactions"],
                        p["task"],
                    )
                )
    if not args.json:
        headers = ["BATCH", "ATTEMPT", "OUTCOME", "TOPIC", "PARTITION", "TRANSACTIONAL_ID", "WRITTEN"]
        headers += ["FROM", "TO", "IN", "SKIPPED", "OUT", "TXNS", "TASK"]
        print(format_table(headers, rows))
    return EXIT_OK


# -- entry point ------------------------------------------------------------------------------------


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
