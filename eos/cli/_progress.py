"""`eos ledger show` and `eos parts show`: what each batch committed, as a format("eos") query's ledger
and as input_mode "any"'s progress offsets record it."""

from __future__ import annotations

import json
from typing import Any

from eos import _names
from eos._core import _parts
from eos._kafka import _offsets
from eos._spark import _ledger
from eos.cli._args import Leaf, non_negative_int, subcommands
from eos.cli._base import EXIT_ERROR, EXIT_OK, EXIT_UNKNOWN_APP, CliError, format_table, print_json
from eos.cli._broker import Broker
from eos.config import Config


def add_commands(commands, leaf: Leaf) -> None:
    """eos ledger show, eos parts show."""
    ledger = commands.add_parser("ledger", help='the per-batch ledger of a format("eos") query')
    ledger_cmd = subcommands(ledger)
    lshow = leaf(
        ledger_cmd, "show", "per batch: the input partitions committed, their offsets and transactional ids"
    )
    where = lshow.add_mutually_exclusive_group(required=True)
    where.add_argument("--checkpoint-location", help="the query's checkpointLocation (its ledger is inside)")
    where.add_argument("--ledger-dir", help="the ledger's directory, where the query set eos.ledger.dir")
    lshow.add_argument("--batch", type=non_negative_int, action="append", help="only this batch (repeatable)")
    lshow.add_argument(
        "--last", type=non_negative_int, default=20, help="the last N batches (default 20; 0 for all)"
    )
    lshow.add_argument("--topic", help="only this input topic")
    lshow.add_argument("--partition", type=non_negative_int, help="only this input partition")
    lshow.add_argument("--json", action="store_true", help="JSON lines (one per batch) instead of a table")
    lshow.set_defaults(func=cmd_ledger_show)
    # parts
    parts = commands.add_parser("parts", help='input_mode "any": the batch each part last committed')
    parts_cmd = subcommands(parts)
    pshow = leaf(parts_cmd, "show", "per part: the last batch it committed, its rows and digest")
    pshow.add_argument("--app", required=True, help="app_id (the consumer group)")
    pshow.add_argument("--job", help="a batch job's id (eos.write): its parts instead of the stream's")
    pshow.add_argument("--json", action="store_true", help="JSON instead of a table")
    pshow.set_defaults(func=cmd_parts_show)


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
                        "-" if p.get("task") is None else p["task"],
                    )
                )
    if not args.json:
        headers = ["BATCH", "ATTEMPT", "OUTCOME", "TOPIC", "PARTITION", "TRANSACTIONAL_ID", "WRITTEN"]
        headers += ["FROM", "TO", "IN", "SKIPPED", "OUT", "TXNS", "TASK"]
        print(format_table(headers, rows))
    return EXIT_OK


def cmd_parts_show(args, config: Config, broker: Broker) -> int:
    """input_mode "any" and batch jobs: what each part's committed progress offset says
    (`eos._core._parts.Progress`)."""
    app = config.app_id if args.job is None else _names.job_app_id(config.app_id, args.job)
    topic = _names.parts_topic(app)
    count = broker.partitions([topic]).get(topic)
    if count is None:
        never = (
            "it never ran in input_mode 'any'"
            if args.job is None
            else f"no job {args.job!r} of app {config.app_id!r} ran"
        )
        raise CliError(EXIT_UNKNOWN_APP, f"app {app!r} has no progress topic {topic!r}: {never}")
    entries = broker.committed_metadata(app, topic, count)  # the group is the (job's) app id
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
