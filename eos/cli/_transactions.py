"""`eos transactions ...`: Kafka's own kafka-transactions tool (from the broker's jars), checked first
against the broker so a wrong topic or partition is one clear line."""

from __future__ import annotations

import sys

from eos.cli._args import Leaf, non_negative_int, subcommands
from eos.cli._base import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError
from eos.cli._broker import Broker
from eos.config import Config


def add_commands(commands, leaf: Leaf) -> None:
    """eos transactions list / find-hanging / abort / describe / describe-producers."""
    txn = commands.add_parser("transactions", help="Kafka's transactions (kafka-transactions from the jars)")
    txn_cmd = subcommands(txn)
    tlist = leaf(txn_cmd, "list", "list transactions")
    tlist.add_argument("--app", help="only the app's (transactional ids starting with APP:)")
    tlist.set_defaults(func=cmd_transactions_list)
    hanging = leaf(txn_cmd, "find-hanging", "find hanging transactions on a broker")
    hanging.add_argument("--broker-id", type=non_negative_int, default=1, help="default 1")
    hanging.add_argument("--topic", help="only this topic")
    hanging.add_argument("--partition", type=non_negative_int, help="only this partition (needs --topic)")
    hanging.add_argument(
        "--max-transaction-timeout", type=non_negative_int, metavar="MINUTES", help="default 15 (Kafka's)"
    )
    hanging.set_defaults(func=cmd_transactions_find_hanging)
    abort = leaf(txn_cmd, "abort", "abort the open transaction that starts at an offset of a partition")
    abort.add_argument("--topic", required=True, help="the partition's topic")
    abort.add_argument(
        "--partition", type=non_negative_int, required=True, help="the partition holding the open transaction"
    )
    abort.add_argument(
        "--start-offset",
        type=non_negative_int,
        required=True,
        help="the first offset of the open transaction (`eos transactions hanging` shows it)",
    )
    abort.set_defaults(func=cmd_transactions_abort)
    describe = leaf(txn_cmd, "describe", "describe one transactional id")
    describe.add_argument("--transactional-id", required=True, help="the producer's transactional.id")
    describe.set_defaults(func=cmd_transactions_passthrough, tool_args=("describe", "transactional_id"))
    producers = leaf(
        txn_cmd, "describe-producers", "producers of a partition, with their open transaction's start offset"
    )
    producers.add_argument("--topic", required=True, help="the partition's topic")
    producers.add_argument(
        "--partition", type=non_negative_int, required=True, help="the partition whose producers to show"
    )
    producers.set_defaults(
        func=cmd_transactions_passthrough, tool_args=("describe-producers", "topic", "partition")
    )


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
