"""`eos offsets show` and `eos offsets reset`: the app's consumer group, its committed input offsets.

The group also holds the progress of input_mode "any" (`<app>-eos-parts`: each part's committed offset
records the batch it wrote, `eos._core._parts.Progress`). It is not input: `show` leaves it out, and
`reset` leaves it alone unless it is named (`--topic`, or the topic of `--to JSON`) and `--drop-progress`
is given. Any offset `reset` writes carries the operator's stamp, not a part's record, so a reset of the
progress topic makes its parts forget what they committed: a batch a crash interrupted is then written
again in full, parts committed before the crash included.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from eos import _names
from eos.cli import _state
from eos.cli._args import Leaf, datetime_ms, offset_target, subcommands
from eos.cli._base import (
    EARLIEST,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNKNOWN_APP,
    EXIT_USAGE,
    LATEST,
    CliError,
    format_table,
    lag,
    print_json,
)
from eos.cli._broker import Broker, open_transactions
from eos.config import Config

TP = tuple[str, int]

#: why `reset` left a partition of the progress topic alone (its JSON "skipped" reason)
PROGRESS_KEPT = "progress of input_mode 'any', not input: name it with --topic and --drop-progress"


#: what the next run does with offsets set back (`eos._core._input.require_reset_honoured`)
MOVED_BACK = (
    "offsets set back are written from by a query started with a new checkpointLocation (eos.read_stream"
    " starts there); on its old checkpoint the query resumes past them and refuses to run (InputGapError)"
)


def add_commands(commands, leaf: Leaf) -> None:
    """eos offsets show / reset."""
    offsets = commands.add_parser("offsets", help="the group's committed input offsets")
    offsets_cmd = subcommands(offsets)
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
        type=offset_target,
        metavar="earliest|latest|JSON",
        help="earliest, latest (the last stable offset), or JSON as Spark's startingOffsets:"
        ' {"topic": {"0": 42}} (-2 earliest, -1 latest)',
    )
    target.add_argument(
        "--shift", type=int, metavar="N", help="move each committed offset by N (may be negative)"
    )
    target.add_argument(
        "--to-datetime",
        type=datetime_ms,
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
    reset.add_argument(
        "--drop-progress",
        action="store_true",
        help="input_mode 'any': reset the progress topic APP-eos-parts too, named with --topic (or in"
        " --to JSON): its parts forget the batches they committed, and a batch run again is written in"
        " full (naming it is refused without this flag)",
    )
    reset.add_argument("--json", action="store_true", help="JSON instead of a table")
    reset.add_argument("--state-dir", help="also refuse while a store of the app is locked here")
    reset.set_defaults(func=cmd_offsets_reset)


def _arrow_table(rows: Sequence[tuple[str, int, int | None, int]]) -> str:
    return format_table(
        ["TOPIC", "PARTITION", "OLD", "", "NEW"], [(t, p, old, "->", new) for t, p, old, new in rows]
    )


def known_committed(broker: Broker, app: str) -> dict[TP, int]:
    """The group's committed offsets; exit code 3 where it has none (an unknown app)."""
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
    committed = known_committed(broker, app)
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


def refuse_if_running(
    broker: Broker, config: Config, tps: Sequence[TP], fencing: Collection[str] = ()
) -> None:
    """Exit code 5 if anything says the app is running: members in its group, transactional offsets
    pending for it, a store lock held on this host, or an open transaction of one of its ids. But for
    `fencing`, transactional ids the caller fences itself (their open transactions end with it), and
    their input partitions' pending offsets."""
    app = config.app_id
    if fencing:
        tps = [tp for tp in tps if _names.transactional_id(app, *tp) not in fencing]
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
    txns = [(tid, state) for tid, state in open_transactions(broker, app) if tid not in fencing]
    if txns:
        ids = ", ".join(f"{tid} ({state})" for tid, state in txns[:5])
        raise CliError(
            EXIT_REFUSED,
            f"refused: {len(txns)} open transaction(s) of app {app!r}: {ids}; the query is running:"
            " stop it first (an abandoned transaction ends after its transaction.timeout.ms)",
        )


def _check_progress_named(args, app: str) -> bool:
    """Whether the reset names the progress topic of input_mode "any"; refused (exit 2) unless
    --drop-progress is given, which in turn applies to that topic only."""
    progress = _names.parts_topic(app)
    named = progress in (args.to if isinstance(args.to, dict) else (args.topic or ()))
    if named and not args.drop_progress:
        raise CliError(
            EXIT_USAGE,
            f"refused: {progress!r} is the progress topic of input_mode 'any', not input: each part's"
            " committed offset there records the batch it wrote. A reset stamps it as the operator's,"
            " so the parts forget their batches: a batch the query runs again (one a crash interrupted)"
            " is then written again in full, its committed parts included (duplicates)."
            " Nothing was changed. To do that all the same (the query's checkpoint was replaced, or"
            " eos refused the progress as a foreign offset: it is lost already), add --drop-progress;"
            f" `eos parts show --app {app}` shows the progress",
        )
    if args.drop_progress and not named:
        raise CliError(
            EXIT_USAGE,
            f"--drop-progress applies to the progress topic only: name it with --topic {progress}",
        )
    return named


def _targets(
    args, broker: Broker, committed: dict[TP, int], progress: str
) -> tuple[list[TP], dict[TP, int], list[TP]]:
    """(partitions, new offset per partition, partitions left as they are). Without --topic or --to JSON:
    every partition the group committed but those of the progress topic `progress`."""
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
        tps = sorted(tp for tp in committed if tp[0] != progress)
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
    progress = _names.parts_topic(app)
    dropping = _check_progress_named(args, app)
    committed = known_committed(broker, app)
    tps, new, skipped = _targets(args, broker, committed, progress)
    refuse_if_running(broker, config, sorted(set(tps) | set(committed)))
    rows = [(t, p, committed.get((t, p)), new[(t, p)]) for t, p in tps if (t, p) in new]
    by_default = not (args.topic or isinstance(args.to, dict))  # every topic the group committed
    kept = sorted(tp for tp in committed if tp[0] == progress) if by_default else []
    dropped = sorted(p for t, p in new if t == progress and (t, p) in committed) if dropping else []
    dry_run = not args.execute
    if not dry_run and new:
        broker.alter(app, new, was=committed)
    if args.json:
        print_json(
            {
                "app": app,
                "dry_run": dry_run,
                "partitions": [{"topic": t, "partition": p, "old": o, "new": n} for t, p, o, n in rows],
                "skipped": [{"topic": t, "partition": p, "reason": "no committed offset"} for t, p in skipped]
                + [{"topic": t, "partition": p, "reason": PROGRESS_KEPT} for t, p in kept],
                "progress_dropped": [{"topic": progress, "part": p} for p in dropped],
            }
        )
        return EXIT_OK
    print(_arrow_table(rows))
    for t, p in skipped:
        print(f"{t}/{p}: no committed offset to shift: left as it is")
    if kept:
        print(
            f"{progress}: the progress of input_mode 'any' ({len(kept)} part(s)) left as it is"
            " (not input; name it with --topic and --drop-progress to reset it)"
        )
    if dropped:
        print(
            f"{progress}: {'would drop' if dry_run else 'dropped'} the progress of {len(dropped)} part(s):"
            " they forget the batches they committed, and a batch the query runs again (one a crash"
            " interrupted) is written again in full, committed parts included"
        )
    if any(old is not None and new_ < old for _, _, old, new_ in rows):
        print(MOVED_BACK)
    if dry_run:
        print(f"dry run: nothing changed ({len(rows)} partition(s) would be reset); add --execute to reset")
    else:
        print(f"reset {len(rows)} partition(s) of group {app!r}")
    return EXIT_OK
