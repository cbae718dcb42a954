"""A committed offset whose transaction the broker aborted on one of its partitions (what a transaction
coordinator restarted before the controller fenced it leaves behind): eos stops, naming it, instead of
skipping input whose outputs were lost; the reset its error advises writes the input again.

The broker state is made for real on the real broker: records of an aborted transaction on output
partition 3, and the input offset committed in a transaction whose stamp names them as its witness, as
eos's own stamp of such a transaction would. (`make chaos CHAOS_ARGS="--brokers 3"` is where a
coordinator is killed for real.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from conftest import grant_pipeline, run_query

import eos
from eos import _names, testing
from eos._kafka import _offsets, _witness

PER_PARTITION = 400
HALF = PER_PARTITION // 2
OUT_PARTITIONS = 4


def _committed_entry(config, source):
    return _offsets.committed_entries(config, [(source, 0)])[(source, 0)]


def _placements(bootstrap, names, keys):
    """Where librdkafka's murmur2_random partitioner puts each key on a 4-partition topic."""
    topic = names("placement")
    testing.create_topic(bootstrap, topic, OUT_PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    placed = {}

    def on_delivery(err, msg):
        assert err is None, err
        placed[msg.key()] = msg.partition()

    for key in keys:
        producer.produce(topic, b"", key=key, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    return placed


def _fabricate_lost_commit(bootstrap, config, source, output, records, noise=False):
    """`records` (input offset, key, value) written as eos writes pass-through rows, in a transaction
    that committed them on output partitions 0-2 with input offset PER_PARTITION; their share of
    partition 3 in one that aborted. With `noise`, records of other producers come between them on
    partition 3: an idempotent producer's (committed) and another transaction's (aborted), values
    beginning b"noise". Returns the values lost."""
    witnesses: dict[tuple[str, int], int] = {}
    on_three: list[int] = []
    lost = []

    def note(err, msg):
        assert err is None, err
        witnesses[(msg.topic(), msg.partition())] = msg.offset()

    def note_three(err, msg):
        assert err is None, err
        on_three.append(msg.offset())

    def producer(tid):
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
        p.init_transactions(30)
        p.begin_transaction()
        return p

    committed, aborted = producer(f"{config.app_id}-kept"), producer(f"{config.app_id}-lost")
    others = [producer(f"{config.app_id}-other"), Producer({"bootstrap.servers": bootstrap})] if noise else []
    for i, (_, key, value) in enumerate(records):
        partition = _murmur2_partition(key)
        if partition == 3:
            aborted.produce(output, value, key=key, partition=3, on_delivery=note_three)
            lost.append(value)
            aborted.flush(30)  # a record batch of its own: the others' come between
            for other in others:
                other.produce(output, b"noise-%d" % i, key=key, partition=3)
                assert other.flush(30) == 0
        else:
            committed.produce(output, value, key=key, partition=partition, on_delivery=note)
    assert aborted.flush(30) == 0 and committed.flush(30) == 0
    aborted.abort_transaction(30)
    if others:
        others[0].abort_transaction(30)
    witnesses[(output, 3)] = max(on_three)
    stamp = _offsets.stamp(config, witnesses=witnesses, since=HALF)
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": _names.input_group(config.app_id)})
    committed.send_offsets_to_transaction(
        [TopicPartition(source, 0, PER_PARTITION, stamp)], group.consumer_group_metadata(), 30
    )
    committed.commit_transaction(30)
    group.close()
    return lost


def _murmur2_partition(key: bytes) -> int:
    import pyarrow as pa

    from eos._kafka import _rdkafka

    return int(_rdkafka.partitions(pa.array([key]), 0, 1, OUT_PARTITIONS, 0)[0])


def _lost_commit(spark, bootstrap, names, checkpoint_dir, noise=False, data_path="auto"):
    """A clean first run over HALF records, then the second half committed with its outputs on partitions
    0-2 and aborted on partition 3: (config, source, output, all the input values, the values lost)."""
    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, 1)
    testing.create_topic(bootstrap, output, OUT_PARTITIONS)
    sent = testing.produce_sequence(bootstrap, source, 1, HALF)
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=output,
        processing_guarantee="exactly_once",
        data_path=data_path,
    )

    # A clean first run: its offset's stamp names one witness per output partition it wrote, and eos's
    # own placement of the keys (the Arrow path) is librdkafka's.
    run_query(spark, config, [source], checkpoint_dir)
    entry = _committed_entry(config, source)
    assert entry.offset == HALF
    witnesses = _witness.decode(_offsets.fields(entry.metadata)[_witness.FIELD])
    assert sorted(witnesses) == [(output, p) for p in range(OUT_PARTITIONS)]
    records, _ = testing.read_topic(bootstrap, output)
    assert {r.offset for r in records if r.partition == 3} >= {witnesses[(output, 3)]}
    placed = _placements(bootstrap, names, {r.key for r in records})
    assert {(r.key, r.partition) for r in records} == set(placed.items())

    # The second half, committed with its outputs on partitions 0-2 and aborted on partition 3.
    more = testing.produce_sequence(bootstrap, source, 1, HALF, start=HALF)
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": names("peek"), "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(source, 0, HALF)])
    inputs = []
    while len(inputs) < HALF:
        msg = consumer.poll(10)
        assert msg is not None and msg.error() is None
        inputs.append((msg.offset(), msg.key(), msg.value()))
    consumer.close()
    lost = _fabricate_lost_commit(bootstrap, config, source, output, inputs, noise)
    assert lost, "no record of the second half is placed on partition 3"
    return config, source, output, {0: sent[0] + more[0]}, lost


def test_offset_committed_by_a_transaction_aborted_on_one_partition_stops_the_query(
    spark, bootstrap, names, checkpoint_dir, data_path
):
    config, source, output, sent, lost = _lost_commit(
        spark, bootstrap, names, checkpoint_dir, data_path=data_path
    )
    with pytest.raises(Exception) as info:
        run_query(spark, config, [source], checkpoint_dir)
    message = str(info.value)
    assert "CommitLostError" in message and f"{output}/3" in message, message
    assert f"committed offset {PER_PARTITION}" in message, message

    # Nothing was skipped silently: the group offset is where the fabricated transaction left it, and
    # partition 3 lacks exactly the aborted records.
    assert _committed_entry(config, source).offset == PER_PARTITION
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    assert result.missing == len(lost) and result.duplicated == 0, result

    # The error's advice: write the second half again (its outputs on partitions 0-2 twice).
    reset = subprocess.run(
        [
            sys.executable,
            "-m",
            "eos.cli",
            "--bootstrap-server",
            bootstrap,
            "offsets",
            "reset",
            "--app",
            config.app_id,
            "--to",
            f'{{"{source}": {{"0": {HALF}}}}}',
            "--execute",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert reset.returncode == 0, reset.stderr
    run_query(spark, config, [source], checkpoint_dir)
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten(sent))
    assert result.missing == 0 and result.duplicated == HALF - len(lost), result


def _cli(bootstrap, *args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "eos.cli", "--bootstrap-server", bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_eos_repair_copies_back_exactly_the_records_the_broker_aborted(
    spark, bootstrap, names, checkpoint_dir, tmp_path
):
    """The lost commit of the test above, with other producers' records between the lost ones on partition
    3 (committed ones, and another aborted transaction's). `eos repair` names the damaged offset and the
    records; killed (SIGKILL) after its copies and new witnesses were sent, it commits nothing; run
    again, it copies the lost records back once, in their order, and the query goes on: read_committed,
    every input value once, the other producers' committed records once, their aborted ones never."""
    config, source, output, sent, lost = _lost_commit(spark, bootstrap, names, checkpoint_dir, noise=True)
    with pytest.raises(Exception, match="CommitLostError"):
        run_query(spark, config, [source], checkpoint_dir)

    stamp = _committed_entry(config, source).metadata
    dry = _cli(bootstrap, "repair", "--app", config.app_id, "--json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    [damaged] = plan["damaged"]
    assert (damaged["topic"], damaged["partition"], damaged["offset"]) == (source, 0, PER_PARTITION)
    [loss] = damaged["lost"]
    assert (loss["topic"], loss["partition"], loss["records"]) == (output, 3, len(lost)), plan
    assert plan["dry_run"] and _committed_entry(config, source).metadata == stamp, "the dry run wrote"

    once = tmp_path / "once"
    once.mkdir()
    killed = _cli(
        bootstrap,
        "repair",
        "--app",
        config.app_id,
        "--execute",
        env={"EOS_CRASH_AT": "repair_before_commit", "EOS_CRASH_ONCE_DIR": str(once)},
    )
    assert killed.returncode == -9 and (once / "crashed-repair_before_commit").exists(), killed.stderr
    records, _ = testing.read_topic(bootstrap, output)
    assert sorted(r.value for r in records if r.value in set(lost)) == [], "the killed repair committed"

    done = _cli(bootstrap, "repair", "--app", config.app_id, "--execute")
    assert done.returncode == 0 and f"copied {len(lost)} record(s) back" in done.stdout, done.stderr
    again = _cli(bootstrap, "repair", "--app", config.app_id)
    assert again.returncode == 0 and "nothing to repair" in again.stdout, again.stdout

    run_query(spark, config, [source], checkpoint_dir)
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    noise = [r.value for r in records if r.value.startswith(b"noise")]
    # the idempotent producer's, once each; none of the other aborted transaction's
    assert len(noise) == len(set(noise)) == len(lost), noise
    result = testing.compare(
        testing.flatten(sent), [r for r in records if not r.value.startswith(b"noise")], hanging
    )
    assert result.exactly_once, result


@pytest.mark.long  # make chaos
def test_eos_repair_reads_record_batches_over_sasl_plain_and_mutual_tls(broker, names):
    """`eos repair` reads record batches with Kafka's Fetch request itself: over the local broker's
    SASL/PLAIN listener (ACLs enforced; its admin user) and its mutual-TLS one (a PEM certificate and
    key), the same plan as over PLAINTEXT; executed over TLS, nothing is left to repair."""
    from tests.support.localbroker import SASL_USERS

    local = broker.require_local()
    bootstrap = local.bootstrap_servers
    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, 1)
    testing.create_topic(bootstrap, output, OUT_PARTITIONS)
    sent = testing.produce_sequence(bootstrap, source, 1, 100)
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=output,
        processing_guarantee="exactly_once",
    )
    inputs = [(o, b"k%d" % (o % 97), v) for o, v in enumerate(sent[0])]
    lost = _fabricate_lost_commit(bootstrap, config, source, output, inputs)
    certs = broker.certificates
    grant_pipeline(local, certs.client_principal, source, output, config.app_id)  # the TLS client's ACLs
    over = {
        "plaintext": (bootstrap, {}),
        "sasl": (
            local.sasl_bootstrap_servers,
            {
                "EOS_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                "EOS_KAFKA_SASL_MECHANISM": "PLAIN",
                "EOS_KAFKA_SASL_USERNAME": "admin",
                "EOS_KAFKA_SASL_PASSWORD": SASL_USERS["admin"],
            },
        ),
        "tls": (
            local.ssl_bootstrap_servers,
            {
                "EOS_KAFKA_SECURITY_PROTOCOL": "SSL",
                "EOS_KAFKA_SSL_CA_LOCATION": str(certs.ca),
                # PEM text: what librdkafka, Kafka's Java tools (the running-query checks) and the
                # repair's own reader all take
                "EOS_KAFKA_SSL_CERTIFICATE_PEM": (certs.home / "client.crt").read_text(),
                "EOS_KAFKA_SSL_KEY_PEM": (certs.home / "client.key").read_text(),
            },
        ),
    }
    plans = {}
    for name, (servers, env) in over.items():
        result = _cli(servers, "repair", "--app", config.app_id, "--json", env=env)
        assert result.returncode == 0, (name, result.stderr)
        plans[name] = json.loads(result.stdout)["damaged"]
    assert plans["sasl"] == plans["tls"] == plans["plaintext"]
    assert [loss["records"] for loss in plans["tls"][0]["lost"]] == [len(lost)]
    servers, env = over["tls"]
    done = _cli(servers, "repair", "--app", config.app_id, "--execute", env=env)
    assert done.returncode == 0 and f"copied {len(lost)} record(s) back" in done.stdout, done.stderr
    assert "nothing to repair" in _cli(bootstrap, "repair", "--app", config.app_id).stdout


def test_a_part_committed_by_a_transaction_aborted_on_one_partition_stops_the_rerun(
    spark, bootstrap, names, tmp_path
):
    """input_mode="any": part 1 of batch 0 is committed with a witness the broker aborted (made as above);
    the re-run of batch 0 must not count the part as written: CommitLostError naming batch and part,
    before anything of it is skipped or written."""
    from eos._core import _parts
    from tests.support.aggregates import any_config, start_counts
    from tests.support.faults import fail_part_0_while

    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, 4)
    testing.create_topic(bootstrap, output, OUT_PARTITIONS)
    testing.produce_sequence(bootstrap, source, 4, 20)
    marker = tmp_path / "fail-part-0"
    marker.touch()
    config = any_config(bootstrap, names("app"), output_topic=output, parts=4)

    def run():
        sink = eos.sink(config, process_batch=fail_part_0_while(str(marker)))
        start_counts(spark, config, source, tmp_path / "ckpt", sink=sink).awaitTermination()

    with pytest.raises(Exception, match="part 0 fails"):
        run()
    progress = _parts.read_progress(config, [1])[1]
    assert progress is not None and progress.batch_id == 0 and progress.witnesses, progress

    # Part 1's progress again, its witnesses now naming a record of an aborted transaction.
    aborted_at = []
    lost = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{config.app_id}-lost"})
    lost.init_transactions(30)
    lost.begin_transaction()
    lost.produce(
        output, b"v", key=b"k", partition=3, on_delivery=lambda err, msg: aborted_at.append(msg.offset())
    )
    assert lost.flush(30) == 0
    lost.abort_transaction(30)
    witnesses = {**progress.witnesses, (output, 3): aborted_at[0]}
    metadata = progress.metadata(config, 1, witnesses)
    writer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{config.app_id}-writer"})
    writer.init_transactions(30)
    writer.begin_transaction()
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": _names.input_group(config.app_id)})
    topic = _names.parts_topic(config.app_id)
    writer.send_offsets_to_transaction(
        [TopicPartition(topic, 1, 1, metadata)], group.consumer_group_metadata(), 30
    )
    writer.commit_transaction(30)
    group.close()
    before = testing.read_topic(bootstrap, output)[0]

    marker.unlink()
    with pytest.raises(Exception) as info:
        run()
    message = str(info.value)
    assert "CommitLostError: batch 0, part 1:" in message and f"{output}/3" in message, message
    assert "--drop-progress" in message, message
    assert _parts.read_progress(config, [1])[1].batch_id == 0
    # part 1 wrote nothing again (parts 0, 2, 3 may have: the query stopped on part 1)
    after = testing.read_topic(bootstrap, output)[0]
    part_one = {r.key for r in before}
    assert sorted(r.value for r in after if r.key in part_one) == sorted(r.value for r in before), (
        "a part counted lost was written again"
    )

    # `eos repair` (the first advice) copies the aborted record back under part 1's progress, whose
    # witnesses then name the copy: the re-run checks part 1's rows against its digest and goes on.
    assert "eos repair" in message, message
    done = _cli(bootstrap, "repair", "--app", config.app_id, "--execute")
    assert done.returncode == 0 and "copied 1 record(s) back" in done.stdout, done.stdout + done.stderr
    run()
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert hanging == [] and [r.value for r in records if r.key == b"k"].count(b"v") == 1
