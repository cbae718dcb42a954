"""on_error="dead_letter" for real: bad records of every kind reach the dead-letter topic in the same
transactions as the outputs and offsets, through driver SIGKILLs, each exactly once."""

from __future__ import annotations

import os
import random
from collections import Counter

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from conftest import finish, kill_after_commits, seed, start_pipeline

from eos import testing
from tests.support.deadletters import letters_by_input
from tests.support.registry import Registry
from tests.support.summaries import read_summaries

#: how --poison makes these keys' records fail (examples/pipeline.py), and the error each must name
POISON = {b"k13": ("raise", b"ValueError"), b"k42": ("type", b"eos.errors.OutputTypeError")}
POISON[b"k7"] = ("large", b"eos.errors.ProduceError")
POISON[b"k21"] = ("schema", b"eos.errors.SerializationError")  # a str key; the key's schema is Avro bytes


def _key_of(value: bytes) -> bytes:
    return b"k%d" % (testing.parse_value(value)[2] % 97)


@pytest.mark.slow
@pytest.mark.long
def test_bad_records_go_to_the_dead_letter_topic_exactly_once_through_driver_kills(
    bootstrap, names, tmp_path
):
    """A stateful `process` fails on four keys' records in four ways (raises, returns an int, returns a
    value larger than the producer's message.max.bytes, returns a key that does not fit the key's Avro
    schema), each after storing the key's count; the driver is SIGKILLed mid-batch. Read
    read_committed: the outputs are exactly the good records, once, in order, with running counts that
    never counted a bad record, their keys Confluent-framed Avro; the dead letters are exactly the bad
    records, once each, carrying their input value and naming their error and input coordinates.

    `make chaos` only (~30 s). make test keeps its parts: dead letters written once in the transactions
    of their batch, aborts and redos among them (test_refused_outputs.py, test_dead_letter_batches.py,
    test_schema_registry.py's Avro misfits), and driver SIGKILLs mid-batch whose re-run skips what the
    killed run committed (test_format_eos.py's data path switch, test_state_restores.py's upgrade)."""
    source, output, sent = seed(bootstrap, names, 1_500)
    dead_letters = names("dlq")
    testing.create_topic(bootstrap, dead_letters, 1)
    app_id, checkpoint, summaries = names("app"), tmp_path / "ckpt", tmp_path / "summaries.jsonl"
    commits = tmp_path / "commits.jsonl"
    flags = {
        "max_offsets": 1_000,
        "commit_every": 100,
        "commits": commits,
        "stateful": True,
        "dead_letters": dead_letters,
        "poison": ",".join(f"{kind}:{key.decode()}" for key, (kind, _) in POISON.items()),
    }
    rng = random.Random(os.environ.get("EOS_TEST_SEED", "7"))
    with Registry() as registry:  # the loopback stand-in: the driver registers the key's schema at each start
        env = {
            "EOS_PROCESSING_GUARANTEE": "exactly_once",
            "EOS_KEY_SERIALIZER": "avro",
            "EOS_KEY_SCHEMA": '"bytes"',
            "EOS_SCHEMA_REGISTRY_URL": registry.url,
        }
        # One kill (make test's 15 minutes): mid-batch, so the restart re-runs the batch and skips what
        # its committed transactions hold, dead letters among them.
        proc = start_pipeline(bootstrap, app_id, source, output, checkpoint, summaries, env=env, **flags)
        kill_after_commits(proc, commits, rng.randint(1, 12))
        finish(start_pipeline(bootstrap, app_id, source, output, checkpoint, summaries, env=env, **flags))
        records, hanging = testing.read_topic(
            bootstrap, output, marker=testing.write_markers(bootstrap, output)
        )
        deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
        context = SerializationContext(output, MessageField.KEY)
        keys = [(deserialize(r.key, context), r.value) for r in records if r.value]
    assert keys and all(key == _key_of(value.rpartition(b"#")[0]) for key, value in keys), keys[:3]

    def is_bad(offset: int, value: bytes) -> bool:  # --poison: the key's records at even offsets
        return _key_of(value) in POISON and offset % 2 == 0

    good = {p: [v for o, v in enumerate(values) if not is_bad(o, v)] for p, values in sent.items()}
    bad = {(p, o): v for p, values in sent.items() for o, v in enumerate(values) if is_bad(o, v)}
    result = testing.compare(
        testing.flatten(good), records, hanging, running_counts=testing.expected_running_counts(good)
    )
    assert result.exactly_once, result
    assert result.state_mismatches == 0, "a bad record's stored count survived its dead letter"

    letters = letters_by_input(bootstrap, dead_letters, source)
    for coordinates, [letter, *_] in letters.items():
        headers = dict(letter.headers)
        assert letter.value == bad.get(coordinates), f"dead letter of {coordinates} carries another value"
        assert headers["__eos.errors.exception"] == POISON[_key_of(letter.value)][1], headers
        assert headers["__eos.errors.app.id"] == app_id.encode()
    assert not [c for c, found in letters.items() if len(found) > 1], "a dead letter written twice"
    assert set(letters) == set(bad), f"missing dead letters: {sorted(set(bad) - set(letters))[:5]}"
    kinds = Counter(POISON[_key_of(v)][0] for v in bad.values())
    assert set(kinds) == {kind for kind, _ in POISON.values()}, kinds
    assert sum(s["skipped"] for s in read_summaries(summaries)) > 0, "no kill landed mid-batch"


def test_dlq_show_groups_dead_letters_and_replay_copies_them_once(bootstrap, names):
    """Dead letters written by a partition task (no Spark), plus an aborted transaction's record in the
    dead-letter topic: `eos dlq show` groups the committed ones by error; `eos dlq replay` is a dry run
    until --execute, then copies each committed dead letter's key and value (not the aborted one, not
    eos's error headers) to the target once, and a second replay copies nothing."""
    import json

    import pyarrow as pa
    from confluent_kafka import Producer
    from test_cli import cli, ok

    import eos
    from eos._core._arrow import Layout
    from eos._core._spec import Functions, TaskSpec
    from eos._core._task import PartitionTask

    source, output, dead_letters, retry = names("in"), names("out"), names("dlq"), names("retry")
    for topic in (source, output, dead_letters, retry):
        testing.create_topic(bootstrap, topic, 1)
    n = 50
    rows = pa.RecordBatch.from_pydict(
        {
            "topic": pa.array([source] * n, pa.string()),
            "partition": pa.array([0] * n, pa.int32()),
            "offset": pa.array(range(n), pa.int64()),
            "key": pa.array([b"k%d" % (i % 5) for i in range(n)], pa.binary()),
            "value": pa.array([b"v%d" % i for i in range(n)], pa.binary()),
        }
    )

    def process(row, state):
        if row.key == b"k3":
            raise ValueError("no customer k3")
        if row.offset in (7, 21):
            return 42  # not a value Kafka can carry
        return row.value

    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=output,
        processing_guarantee="exactly_once",
        on_error="dead_letter",
        dead_letter_topic=dead_letters,
    )
    stats = PartitionTask(TaskSpec(config, 0, Layout(), Functions(process)), source, 0).run([rows])
    assert stats.dead_letters == 12  # 10 with key k3, offsets 7 and 21
    aborted = Producer({"bootstrap.servers": bootstrap, "transactional.id": names("tid")})
    aborted.init_transactions(30)
    aborted.begin_transaction()
    aborted.produce(dead_letters, b"aborted", b"k9")
    aborted.flush(30)
    aborted.abort_transaction(30)

    testing.write_markers(bootstrap, dead_letters)  # a record of another writer: not a dead letter
    shown = json.loads(ok(cli(bootstrap, "dlq", "show", "--topic", dead_letters, "--json")))
    assert (shown["dead_letters"], shown["other_records"]) == (12, 1)
    assert [(e["exception"], e["count"], e["first"], e["last"]) for e in shown["errors"]] == [
        ("ValueError", 10, "0@3", "0@48"),
        ("eos.errors.OutputTypeError", 2, "0@7", "0@21"),
    ]
    table = ok(cli(bootstrap, "dlq", "show", "--topic", dead_letters))
    assert "no customer k3" in table and "EXCEPTION" in table and "1 other records" in table

    replay = ("dlq", "replay", "--topic", dead_letters, "--to", retry)
    assert "would replay 12" in ok(cli(bootstrap, *replay))
    assert testing.read_topic(bootstrap, retry)[0] == []
    executed = ok(cli(bootstrap, *replay, "--execute"))
    assert "replayed 12" in executed and "1 other records" in executed
    assert "replayed 0" in ok(cli(bootstrap, *replay, "--execute")), "a second replay copied again"
    copies, hanging = testing.read_topic(bootstrap, retry, marker=testing.write_markers(bootstrap, retry))
    expected = [(b"k%d" % (i % 5), b"v%d" % i) for i in range(n) if i % 5 == 3 or i in (7, 21)]
    assert ([(r.key, r.value) for r in copies], hanging) == (expected, [])
    assert all(not k.startswith("__eos.") for r in copies for k, _ in r.headers)


ATTEMPTS = 20


def test_an_abort_right_after_a_refused_record_leaves_the_producer_usable(bootstrap, names):
    """The abort a dead letter starts with, repeated: a transaction that begins after a commit with
    offsets, produces a few records, has one refused as too large and aborts at once. Without the flush
    before the abort (OutputProducer.abort_transaction), librdkafka 2.12's abort failed here with a fatal
    INVALID_TXN_STATE in about 1 try of 3 (librdkafka issue 4849)."""

    import eos
    from eos._kafka import _offsets, _producer

    source, output = names("in"), names("out")
    for topic in (source, output):
        testing.create_topic(bootstrap, topic, 1)
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=output,
        processing_guarantee="exactly_once",
    )
    for attempt in range(ATTEMPTS):
        producer = _producer.OutputProducer(config, names("tid"))  # fresh, as a new task's
        try:
            producer.init_transactions()
            for i in range(100):
                producer.records.produce(eos.Output(b"%d" % i), output, source, 0, i)
            offsets = [(source, 0, 100 * (attempt + 1))]
            producer.send_offsets(offsets, _offsets.group_metadata(config))
            producer.commit_transaction()
            for i in range(4):
                producer.records.produce(eos.Output(b"x"), output, source, 0, 100 + i)
            with pytest.raises(eos.ProduceError):
                producer.records.produce(eos.Output(b"z" * (2**20 + 10)), output, source, 0, 104)
            producer.abort_transaction()  # raised FatalError (INVALID_TXN_STATE) without the flush
        finally:
            producer.close()
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert (len(records), hanging) == (100 * ATTEMPTS, [])
