"""`eos dlq show` and `eos dlq replay`: the dead-letter topic of on_error="dead_letter".

Both read it read_committed, from the start (show) or the replay group's committed offsets (replay) to
its end as of the call. A replay copies each dead letter's key, value and input headers (not eos's
`__eos.errors.*`) to a topic, a chunk per transaction that also commits the replay group's offsets, as
eos's tasks do: a replay that fails or is killed and is run again copies nothing twice.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from eos._core import _deadletter
from eos._kafka import _clients, _translate
from eos.cli._args import Leaf, subcommands
from eos.cli._base import EXIT_OK, EXIT_UNREACHABLE, CliError, format_table, print_json
from eos.cli._broker import Broker
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


def _consumer(config: Config, group: str) -> Consumer:
    settings = _clients.consumer_settings(config, **{"group.id": group, "enable.partition.eof": True})
    with _translate.translating("creating the dead-letter consumer"):
        return Consumer(_clients.with_logger(settings))


def _letters(
    consumer: Consumer, topic: str, partitions: int, start: dict[int, int], timeout: float
) -> Iterator:
    """The committed records of `topic` from `start` (per partition; else the beginning) to its end,
    per partition in offset order. read_committed: the end is the last stable offset (what an open
    transaction wrote above it is not returned)."""
    ends = {}
    for p in range(partitions):
        with _translate.translating(f"reading the end of {topic}/{p}"):
            ends[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
    waiting = {p for p in range(partitions) if start.get(p, 0) < ends[p]}
    consumer.assign([TopicPartition(topic, p, start.get(p, 0)) for p in range(partitions)])
    deadline = time.monotonic() + timeout
    while waiting:
        msg = consumer.poll(0.5)
        if msg is None:
            if time.monotonic() > deadline:
                raise CliError(
                    EXIT_UNREACHABLE,
                    f"reading {topic}: no record within {timeout:g}s of partitions {sorted(waiting)}",
                )
            continue
        deadline = time.monotonic() + timeout
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                waiting.discard(msg.partition())
                continue
            raise _translate.translate_error(msg.error(), f"reading {topic}")
        yield msg


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
    consumer = _consumer(config, default_group(args.topic))
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    others = 0
    try:
        for msg in _letters(consumer, args.topic, count, {}, args.timeout):
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
        consumer.close()
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
    committed = {tp[1]: offset for tp, offset in broker.committed(group).items() if tp[0] == args.topic}
    consumer = _consumer(config, group)
    producer = None
    copied, valueless, others, chunk = 0, 0, 0, 0
    try:
        if args.execute:
            settings = _clients.producer_settings(config, group)
            with _translate.translating("creating the replay producer"):
                producer = Producer(_clients.with_logger(settings))
            _translate.call(
                lambda: producer.init_transactions(args.timeout),
                what=f"init_transactions ({group})",
                timeout_s=args.timeout,
            )
        for msg in _letters(consumer, args.topic, count, committed, args.timeout):
            if producer is not None and chunk == 0:
                _translate.call(producer.begin_transaction, what="begin_transaction", timeout_s=args.timeout)
            chunk += 1
            headers = msg.headers() or []
            if not any(k == _deadletter.KIND for k, _ in headers):
                others += 1  # not an eos dead letter
            elif any(k == _deadletter.VALUE_BYTES for k, _ in headers):
                valueless += 1  # its value was left out (too large): nothing to replay
            else:
                if producer is not None:
                    keep = [(k, v) for k, v in headers if not k.startswith(_deadletter.PREFIX)]
                    _produce(producer, args.to, msg.value(), msg.key(), keep)
                copied += 1
            if producer is not None and chunk >= REPLAY_CHUNK:
                _commit(producer, consumer, args.timeout)
                chunk = 0
        if producer is not None and chunk:
            _commit(producer, consumer, args.timeout)
    finally:
        consumer.close()
    verb, dry = ("replayed", "") if args.execute else ("would replay", "; a dry run: add --execute")
    print(f"{verb} {copied} dead letters of {args.topic} to {args.to} (replay group {group}{dry})")
    if valueless:
        print(f"{valueless} dead letters carry no value (refused as too large) and stay in {args.topic} only")
    if others:
        print(f"{others} other records in {args.topic} are not eos dead letters and were not copied")
    return EXIT_OK


def _produce(producer: Producer, topic: str, value, key, headers) -> None:
    while True:
        try:
            producer.produce(topic, value, key, headers=headers or None)
            return
        except BufferError:
            producer.poll(0.1)


def _commit(producer: Producer, consumer: Consumer, timeout: float) -> None:
    """The chunk's copies and the replay group's offsets, in one transaction."""
    positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
    _translate.call(
        lambda: producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), timeout),
        what="send_offsets_to_transaction",
        timeout_s=timeout,
    )
    _translate.call(
        lambda: producer.commit_transaction(timeout), what="commit_transaction", timeout_s=timeout
    )
