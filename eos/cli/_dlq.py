"""`eos dlq show` and `eos dlq replay`: the dead-letter topic of on_error="dead_letter".

Both read it read_committed, from the start (show) or the replay group's committed offsets (replay) to
its end as of the call. A replay copies each dead letter's key, value and input headers (not eos's
`__eos.errors.*`) to a topic, a chunk per transaction that also commits the replay group's offsets, as
eos's tasks do: a replay that fails or is killed and is run again copies nothing twice. That holds
because a replay fences every earlier run of its group (its producer's init_transactions: the
transactional.id is the group) before it reads the group's offsets, stable (`GroupReader.committed`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from eos._core import _deadletter
from eos._kafka._reads import GroupReader
from eos._kafka._writes import TransactionalCopier
from eos.cli._args import Leaf, subcommands
from eos.cli._base import EXIT_OK, format_table, print_json
from eos.cli._broker import Broker, exit_codes
from eos.config import Config

#: dead letters copied per replay transaction
REPLAY_CHUNK = 1_000


def add_commands(commands, leaf: Leaf) -> None:
    """eos dlq show / replay."""
    dlq = commands.add_parser("dlq", help='the dead-letter topic of on_error="dead_letter"')
    dlq_cmd = subcommands(dlq)
    dshow = leaf(
        dlq_cmd, "show", "dead letters grouped by error: count, first and last input record, message"
    )
    dshow.add_argument("--topic", required=True, help="the dead-letter topic")
    dshow.add_argument("--json", action="store_true", help="JSON instead of a table")
    dshow.set_defaults(func=cmd_dlq_show)
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
    replay.set_defaults(func=cmd_dlq_replay)


def default_group(topic: str) -> str:
    return f"eos-dlq-replay.{topic}"


def _reader(config: Config, group: str) -> GroupReader:
    return GroupReader(config, group, "the dead-letter consumer")


def _errors(msg) -> dict[str, str]:
    """The `__eos.errors.*` headers of a dead letter, as text."""
    return {
        k[len(_deadletter.PREFIX) :]: (v or b"").decode("utf-8", "replace")
        for k, v in (msg.headers() or [])
        if k.startswith(_deadletter.PREFIX)
    }


def cmd_dlq_show(args, config: Config, broker: Broker) -> int:
    """Dead letters grouped by error: how many, the input records they came from, the first message."""
    count = broker.require_topics([args.topic])[args.topic]
    reader = _reader(config, default_group(args.topic))
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    others = 0
    try:
        with exit_codes():  # no record within --timeout: exit code 4
            for msg in reader.records(args.topic, count, {}, args.timeout):
                e = _errors(msg)
                if "kind" not in e:
                    others += 1  # not written by eos: no __eos.errors.* headers
                    continue
                key = (e.get("exception", "?"), e.get("kind", "?"), e.get("topic", "?"))
                at = f"{e.get('partition', '?')}@{e.get('offset', '?')}"
                group = groups.setdefault(
                    key, {"count": 0, "first": at, "message": e.get("message", ""), "batches": Counter()}
                )
                group["count"] += 1
                group["last"] = at
                group["batches"][e.get("batch.id", "?")] += 1
    finally:
        reader.close()
    rows = sorted(groups.items(), key=lambda item: -item[1]["count"])
    if args.json:
        print_json(
            {
                "topic": args.topic,
                "dead_letters": sum(g["count"] for g in groups.values()),
                "other_records": others,
                "errors": [
                    {
                        "exception": exc,
                        "kind": kind,
                        "input_topic": topic,
                        "count": g["count"],
                        "first": g["first"],
                        "last": g["last"],
                        "batches": len(g["batches"]),
                        "message": g["message"],
                    }
                    for (exc, kind, topic), g in rows
                ],
            }
        )
        return EXIT_OK
    table = [
        (exc, kind, topic, g["count"], g["first"], g["last"], _short(g["message"]))
        for (exc, kind, topic), g in rows
    ]
    print(format_table(["EXCEPTION", "KIND", "INPUT TOPIC", "COUNT", "FIRST", "LAST", "MESSAGE"], table))
    if others:
        print(f"{others} other records in {args.topic}: not eos dead letters (no __eos.errors.* headers)")
    return EXIT_OK


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def cmd_dlq_replay(args, config: Config, broker: Broker) -> int:
    """Copy dead letters to `--to`, exactly once per replay group; a dry run unless --execute."""
    count = broker.require_topics([args.topic, args.to])[args.topic]
    group = args.group or default_group(args.topic)
    reader = _reader(config, group)
    copier = None
    copied, valueless, others, chunk = 0, 0, 0, 0
    try:
        with exit_codes():  # no record within --timeout: exit code 4
            if args.execute:
                # Fence first, then read where the group stands: an earlier run killed during its commit
                # may still complete it (its request was on its way), and offsets read before the fence
                # would miss that chunk and copy it again.
                copier = TransactionalCopier(config, reader, args.timeout)
                committed = reader.committed(args.topic, count, args.timeout)
            else:  # a dry run fences nothing: the last committed offsets, as a running replay left them
                committed = {tp[1]: o for tp, o in broker.committed(group).items() if tp[0] == args.topic}
            for msg in reader.records(args.topic, count, committed, args.timeout):
                chunk += 1
                headers = msg.headers() or []
                if not any(k == _deadletter.KIND for k, _ in headers):
                    others += 1  # not an eos dead letter
                elif any(k == _deadletter.VALUE_BYTES for k, _ in headers):
                    valueless += 1  # its value was left out (too large): nothing to replay
                else:
                    if copier is not None:
                        keep = [(k, v) for k, v in headers if not k.startswith(_deadletter.PREFIX)]
                        copier.produce(args.to, msg.value(), msg.key(), keep, msg)
                    copied += 1
                if copier is not None and chunk >= REPLAY_CHUNK:
                    copier.commit()  # the chunk's copies and the replay group's offsets
                    chunk = 0
            if copier is not None and chunk:
                copier.commit()
    finally:
        reader.close()
        if copier is not None:
            copier.close()
    verb, dry = ("replayed", "") if args.execute else ("would replay", "; a dry run: add --execute")
    print(f"{verb} {copied} dead letters of {args.topic} to {args.to} (replay group {group}{dry})")
    if valueless:
        print(f"{valueless} dead letters carry no value (refused as too large) and stay in {args.topic} only")
    if others:
        print(f"{others} other records in {args.topic} are not eos dead letters and were not copied")
    return EXIT_OK
