"""`eos repair`: copy back what a broker lost of a committed transaction.

A transaction coordinator restarted before the controller fenced it can leave a transaction committed
on some partitions (the input offset among them) and aborted on others (docs/fault-runs.md); eos then
stops with CommitLostError. The aborted records are still in the log. For each committed offset of the
app whose witnesses show such a loss, `eos repair` finds exactly the records of that transaction on each
lost partition (the aborted transaction holding the witness, by its producer id: `_kafka._batches`),
and with `--execute` writes them again, in their order, to the same partitions, in one transaction of
the input partition's own transactional id (which fences any zombie of it) that also commits the same
input offset with a stamp whose witnesses name the copies. So the output ends with every record once;
a repair killed and run again copies nothing twice (its transaction commits the copies and the new
witnesses together, or nothing), and a repaired offset reads back whole.
"""

from __future__ import annotations

import attrs

from eos import _crash, _names
from eos._core import _proof
from eos._kafka import _batches, _offsets, _witness
from eos._kafka._producer import OutputProducer
from eos._log import get_logger
from eos.cli._args import Leaf
from eos.cli._base import EXIT_OK, format_table, print_json
from eos.cli._broker import Broker, exit_codes
from eos.cli._offsets import known_committed, refuse_if_running
from eos.config import Config
from eos.records import Output


@attrs.frozen
class Loss:
    """What one committed transaction lost on one partition, and the records to copy back."""

    topic: str
    partition: int
    witness: int
    records: tuple[_batches.Record, ...]


@attrs.frozen
class Damaged:
    """A committed offset of the app whose transaction the broker aborted on some partitions."""

    topic: str
    partition: int
    offset: int
    metadata: str
    witnesses: dict[tuple[str, int], int]
    losses: tuple[Loss, ...]

    @property
    def transactional_id(self) -> str:
        return _transactional_id(self.metadata, self.topic, self.partition)


def add_commands(commands, leaf: Leaf) -> None:
    """eos repair."""
    repair = leaf(
        commands,
        "repair",
        "copy back the records a broker aborted of a committed transaction (CommitLostError);"
        " a dry run unless --execute",
    )
    repair.add_argument("--app", required=True, help="app_id (the consumer group)")
    repair.add_argument("--execute", action="store_true", help="copy (default: say what would be copied)")
    repair.add_argument("--json", action="store_true", help="JSON instead of a table")
    repair.add_argument("--state-dir", help="also refuse while a store of the app is locked here")
    repair.set_defaults(func=cmd_repair)


def _transactional_id(metadata: str, topic: str, partition: int) -> str:
    app = _offsets.fields(metadata)["app"]
    if topic == _names.parts_topic(app):
        return _names.part_transactional_id(app, partition)
    return _names.transactional_id(app, topic, partition)


def damaged(config: Config, broker: Broker) -> list[Damaged]:
    """Every committed offset of the app whose transaction a witness shows aborted, with what to copy."""
    log = get_logger("eos.repair", app_id=config.app_id)
    committed = known_committed(broker, config.app_id)
    out: list[Damaged] = []
    for topic in sorted({t for t, _ in committed}):
        count = broker.partitions([topic])[topic]
        for partition, (offset, metadata) in sorted(
            broker.committed_metadata(config.app_id, topic, count).items()
        ):
            found = _offsets.fields(metadata)
            witnesses = _witness.decode(found.get(_witness.FIELD)) if found else {}
            if not witnesses:
                continue
            with exit_codes():
                lost = _proof.aborted(config, None, metadata, witnesses, log)
            losses = []
            for t, p, witness in lost:
                with exit_codes():
                    _, offsets = _batches.aborted_transaction_offsets(config, t, p, witness)
                    records = _batches.read_records(config, t, p, offsets)
                losses.append(Loss(t, p, witness, tuple(records)))
            if losses:
                out.append(Damaged(topic, partition, offset, metadata, witnesses, tuple(losses)))
    return out


def repair(config: Config, damage: Damaged) -> dict[tuple[str, int], int]:
    """Copy `damage`'s lost records back and recommit its offset with their witnesses, in one transaction
    of its own transactional id; the new witnesses of the repaired partitions."""
    log = get_logger("eos.repair", app_id=config.app_id, topic=damage.topic, partition=damage.partition)
    producer = OutputProducer(config, damage.transactional_id)
    try:
        producer.init_transactions(log, known_topic=damage.topic)  # fences every incarnation of the id
        records = producer.records
        records.exact = True  # each copy's delivery report notes its partition's witness
        for loss in damage.losses:
            for r in loss.records:
                out = Output(r.value, r.key, list(r.headers), partition=loss.partition, timestamp=r.timestamp)
                records.produce(out, loss.topic, damage.topic, damage.partition, damage.offset)
        records.flush_and_check(damage.topic, damage.partition)
        copies = records.take_witnesses()
        witnesses = {**damage.witnesses, **copies}
        stamp = _offsets.rewitnessed(damage.metadata, witnesses, len(damage.losses))
        producer.send_offsets(
            [(damage.topic, damage.partition, damage.offset, stamp)], _offsets.group_metadata(config), log
        )
        _crash.point("repair_before_commit")
        producer.commit_transaction(log)
        log.info("repaired", copied=sum(len(loss.records) for loss in damage.losses), witnesses=copies)
        return copies
    finally:
        producer.close()


def cmd_repair(args, config: Config, broker: Broker) -> int:
    found = damaged(config, broker)
    if args.execute and found:
        # The repair's init_transactions fences each damaged partition's id: an open transaction of it
        # is a killed repair's or the lost transaction's own (a task of a running query stops at
        # CommitLostError before it opens one), and ends with the fence.
        fencing = {d.transactional_id for d in found}
        refuse_if_running(broker, config, [(d.topic, d.partition) for d in found], fencing)
        for d in found:
            repair(config, d)
    rows = [
        (d.topic, d.partition, d.offset, f"{loss.topic}/{loss.partition}", len(loss.records), _span(loss))
        for d in found
        for loss in d.losses
    ]
    if args.json:
        print_json(
            {
                "app": config.app_id,
                "dry_run": not args.execute,
                "damaged": [
                    {
                        "topic": d.topic,
                        "partition": d.partition,
                        "offset": d.offset,
                        "lost": [
                            {
                                "topic": loss.topic,
                                "partition": loss.partition,
                                "records": len(loss.records),
                                "offsets": [r.offset for r in loss.records],
                            }
                            for loss in d.losses
                        ],
                    }
                    for d in found
                ],
            }
        )
        return EXIT_OK
    if not found:
        print(f"nothing to repair: every committed transaction of app {config.app_id!r} reads back whole")
        return EXIT_OK
    print(format_table(["INPUT", "PARTITION", "OFFSET", "LOST ON", "RECORDS", "OFFSETS"], rows))
    copied = sum(row[4] for row in rows)
    if args.execute:
        print(f"copied {copied} record(s) back, each committed offset's witnesses now name the copies")
    else:
        print(
            f"dry run: nothing written ({copied} record(s) would be copied back); add --execute to copy them"
        )
    return EXIT_OK


def _span(loss: Loss) -> str:
    offsets = [r.offset for r in loss.records]
    return f"{offsets[0]}-{offsets[-1]}" if offsets else "-"
