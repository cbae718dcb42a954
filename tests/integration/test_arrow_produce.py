"""The Arrow produce path (eos/_kafka/_rdkafka.py) on a real broker, beside the produce() loop it stands in
for: the same records in the same partitions and order, a full queue losing and reordering nothing, a record
refused at once named by its input offset with nothing committed."""

from __future__ import annotations

import pyarrow as pa
import pytest

import eos
from eos import testing
from eos._kafka import _producer, _rdkafka
from eos.errors import ProduceError
from eos.records import Outputs

SOURCE = "in-topic"
#: producer settings under which a 5,000-byte record is refused at once (librdkafka's message.max.bytes)
SMALL_MESSAGES = {"message.max.bytes": 4_000, "batch.size": 4_000}


@pytest.fixture
def calls(monkeypatch):
    """Every ArrowProducer.produce call: (records asked for, records enqueued, error code or None)."""
    seen: list[tuple[int, int, int | None]] = []
    real = _rdkafka.ArrowProducer.produce

    def spy(self, topic, values, keys, rows, partitions):
        enqueued, err = real(self, topic, values, keys, rows, partitions)
        seen.append((len(rows), enqueued, None if err is None else err.code()))
        return enqueued, err

    monkeypatch.setattr(_rdkafka.ArrowProducer, "produce", spy)
    return seen


def _config(bootstrap, names, output, **kw):
    return eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=output,
        processing_guarantee="exactly_once",
        **kw,
    )


def _outputs(values: pa.Array, keys: pa.Array | None, topic: str, first: int = 100) -> Outputs:
    offsets = pa.array(range(first, first + len(values)), pa.int64())
    return Outputs(values=values, topic=topic, keys=keys, offsets=offsets)


def _write(config, outputs: Outputs, tid: str) -> None:
    producer = _producer.OutputProducer(config, tid)
    try:
        producer.init_transactions()
        try:
            producer.records.produce_outputs(outputs, SOURCE, 0)
            producer.records.flush_and_check(SOURCE, 0)
        except Exception:
            producer.abort_transaction()
            raise
        producer.commit_transaction()
    finally:
        producer.close()


def _by_partition(bootstrap, topic) -> dict[int, list[tuple[bytes | None, bytes | None]]]:
    records, hanging = testing.read_topic(bootstrap, topic, marker=testing.write_markers(bootstrap, topic))
    assert hanging == []
    found: dict[int, list] = {}
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        found.setdefault(r.partition, []).append((r.key, r.value))
    return found


@pytest.mark.parametrize("kind", [pa.binary(), pa.large_string()])
def test_arrow_columns_are_written_as_the_produce_loop_writes_them(bootstrap, names, calls, kind):
    def text(b):
        return None if b is None else (b.decode() if kind == pa.large_string() else b)

    n = 3_000
    raw_values = [None if i % 97 == 5 else (b"" if i % 89 == 3 else b"value-%d" % i) for i in range(n + 7)]
    raw_keys = [None if i % 13 == 0 else (b"" if i % 17 == 0 else b"key-%d" % (i % 50)) for i in range(n + 7)]
    # sliced: the columns start inside their buffers, as a batch's runs do
    values = pa.array([text(v) for v in raw_values], kind).slice(7)
    keys = pa.array([text(k) for k in raw_keys], kind).slice(7)

    by_arrow, by_loop = names("out-arrow"), names("out-loop")
    for topic in (by_arrow, by_loop):
        testing.create_topic(bootstrap, topic, 4)
    _write(_config(bootstrap, names, by_arrow), _outputs(values, keys, by_arrow), names("tid-arrow"))
    # the Arrow path wrote them, but for the first record of each partition (produce(), for its
    # delivery report: the transaction's witness there)
    arrow_written = sum(asked for asked, _, _ in calls)
    assert n - 4 <= arrow_written < n
    loop_config = _config(bootstrap, names, by_loop, arrow_produce=False)
    _write(loop_config, _outputs(values, keys, by_loop), names("tid-loop"))
    assert sum(asked for asked, _, _ in calls) == arrow_written  # the loop wrote these

    arrow, loop = _by_partition(bootstrap, by_arrow), _by_partition(bootstrap, by_loop)
    expected = list(zip(raw_keys[7:], raw_values[7:], strict=True))
    for written in (arrow, loop):
        assert sorted(sum(written.values(), []), key=repr) == sorted(expected, key=repr)
    # keyed records go where murmur2 puts them, in input order; null keys go to a random partition
    keyed = {p: [r for r in rs if r[0] is not None] for p, rs in arrow.items()}
    assert keyed == {p: [r for r in rs if r[0] is not None] for p, rs in loop.items()}
    for records in arrow.values():
        nulls = [raw_values.index(v) for k, v in records if k is None and v]
        assert nulls == sorted(nulls)


def test_a_full_queue_loses_and_reorders_nothing(bootstrap, names, calls):
    output = names("out")
    testing.create_topic(bootstrap, output, 3)
    n = 30_000
    values = pa.array([b"%d" % i for i in range(n)])
    keys = pa.array([b"k%d" % (i % 11) for i in range(n)])
    config = _config(bootstrap, names, output, producer={"queue.buffering.max.messages": 2_000})
    _write(config, _outputs(values, keys, output, first=0), names("tid"))

    assert any(enqueued < asked for asked, enqueued, _ in calls)  # the queue did fill up
    written = _by_partition(bootstrap, output)
    numbers = [int(v) for records in written.values() for _, v in records]
    assert sorted(numbers) == list(range(n))
    for records in written.values():
        per_key: dict[bytes, list[int]] = {}
        for k, v in records:
            per_key.setdefault(k, []).append(int(v))
        assert all(seq == sorted(seq) for seq in per_key.values())


@pytest.mark.parametrize("arrow", [True, False], ids=["arrow", "loop"])
def test_a_record_refused_at_once_is_named_and_nothing_is_committed(bootstrap, names, calls, arrow):
    output = names("out")
    testing.create_topic(bootstrap, output, 2)
    values = pa.array([b"x" * (5_000 if i == 12_345 else 10) for i in range(20_000)])
    config = _config(
        bootstrap,
        names,
        output,
        arrow_produce=arrow,
        producer=SMALL_MESSAGES,
    )
    with pytest.raises(ProduceError) as failed:
        _write(config, _outputs(values, None, output, first=1_000), names("tid"))
    assert failed.value.offset == 1_000 + 12_345
    assert "too large" in str(failed.value).lower()
    assert bool(calls) is arrow
    assert _by_partition(bootstrap, output) == {}


def test_a_fenced_producer_writing_arrow_columns_commits_nothing(bootstrap, names, calls):
    output = names("out")
    testing.create_topic(bootstrap, output, 2)
    config, tid = _config(bootstrap, names, output), names("tid")
    first = _outputs(pa.array([b"zombie-%d" % i for i in range(5_000)]), None, output)
    zombie = _producer.OutputProducer(config, tid)
    zombie.init_transactions()
    zombie.records.produce_outputs(first, SOURCE, 0)
    winner = _producer.OutputProducer(config, tid)
    winner.init_transactions()  # fences the zombie, aborts its transaction
    try:
        with pytest.raises(eos.FencedError):
            zombie.records.produce_outputs(first, SOURCE, 0)
            zombie.records.flush_and_check(SOURCE, 0)
            zombie.commit_transaction()
        assert calls  # the zombie wrote through the Arrow path
        assert _by_partition(bootstrap, output) == {}
    finally:
        winner.close()


@pytest.mark.parametrize("arrow", [True, False], ids=["arrow", "loop"])
def test_a_record_refused_at_once_becomes_a_dead_letter_beside_the_rest(bootstrap, names, calls, arrow):
    """on_error="dead_letter" in a partition task on both paths: the refused record's dead letter (its
    too-large value left out, its size and input offset named) commits with every other record's output
    and the input offset, in one transaction."""
    from confluent_kafka import Consumer, TopicPartition

    from eos._core._arrow import Layout
    from eos._core._spec import TaskSpec
    from eos._core._task import PartitionTask

    source, output, dead_letters = names("in"), names("out"), names("dlq")
    for topic in (source, output, dead_letters):
        testing.create_topic(bootstrap, topic, 1)
    n, bad = 20_000, 12_345
    values = [b"x" * 5_000 if i == bad else b"%08d" % i for i in range(n)]
    rows = pa.RecordBatch.from_pydict(
        {
            "topic": pa.array([source] * n, pa.string()),
            "partition": pa.array([0] * n, pa.int32()),
            "offset": pa.array(range(n), pa.int64()),
            "value": pa.array(values, pa.binary()),
        }
    )
    config = _config(
        bootstrap,
        names,
        output,
        arrow_produce=arrow,
        producer=SMALL_MESSAGES,
        on_error="dead_letter",
        dead_letter_topic=dead_letters,
    )
    stats = PartitionTask(TaskSpec(config, 3, Layout(value="value")), source, 0).run([rows])
    assert (stats.dead_letters, stats.records_out, stats.transactions) == (1, n - 1, 1)
    assert bool(calls) is arrow
    assert [v for _, v in _by_partition(bootstrap, output)[0]] == values[:bad] + values[bad + 1 :]
    [letter], hanging = testing.read_topic(
        bootstrap, dead_letters, marker=testing.write_markers(bootstrap, dead_letters)
    )
    headers = dict(letter.headers)
    assert (letter.value, hanging) == (None, [])
    assert (headers["__eos.errors.offset"], headers["__eos.errors.value.bytes"]) == (b"12345", b"5000")
    assert headers["__eos.errors.kind"] == b"ProduceError"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": config.app_id})
    try:
        [committed] = consumer.committed([TopicPartition(source, 0)], timeout=10)
    finally:
        consumer.close()
    assert committed.offset == n
