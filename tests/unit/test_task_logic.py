"""eos._core._task: the per-partition protocol (skip, commit every N, redo, record errors, fencing), with the
real `Incarnation`, `Writer` and `Transaction` driving a fake OutputProducer and a fake group-offset store
(`tests.support.producers`), on real Arrow record batches. No broker, no Spark."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pyarrow as pa
import pytest

import eos
from eos._core import _input
from eos._core._arrow import Layout
from eos._core._spec import Functions, TaskSpec
from eos._core._stats import STATS_SCHEMA
from eos._core._task import PartitionTask, run_partition
from eos._kafka import _offsets
from eos._spark._preflight import batch_layout
from eos.records import Output
from eos.sink import Sink
from tests.support.configs import config as base_config
from tests.support.producers import FakeKafka, FakeOutputProducer

IN = "in"
LAYOUT = Layout(value="value")


def fenced() -> eos.FencedError:
    return eos.FencedError("fenced by a newer incarnation")


def abortable() -> eos.TransactionAbortableError:
    return eos.TransactionAbortableError("txn requires abort")


config = partial(base_config, processing_guarantee="exactly_once", commit_every=100, max_redo=2)


def value(offset: int, partition: int = 0) -> bytes:
    return f"{IN}|{partition}|{offset}".encode()


def rows(offsets, partition: int = 0, topic: str = IN) -> pa.RecordBatch:
    """The Arrow record batch a task receives for these input offsets of one topic-partition."""
    offsets = list(offsets)
    return pa.RecordBatch.from_pydict(
        {
            "topic": pa.array([topic] * len(offsets), pa.string()),
            "partition": pa.array([partition] * len(offsets), pa.int32()),
            "offset": pa.array(offsets, pa.int64()),
            "value": pa.array([value(o, partition) for o in offsets], pa.binary()),
        }
    )


def concat(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    """One record batch of `batches` (pa.concat_batches needs pyarrow 19)."""
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


def task(cfg: eos.Config, process: Callable | None = None, partition: int = 0, **kw) -> PartitionTask:
    """A task of batch 7; `kw`: Functions' (process_batch, stores, on_commit) and TaskSpec's own."""
    functions = {k: kw.pop(k) for k in ("process_batch", "stores", "on_commit") if k in kw}
    return PartitionTask(TaskSpec(cfg, 7, LAYOUT, Functions(process, **functions), **kw), IN, partition)


def run(cfg: eos.Config, offsets, process: Callable | None = None, partition: int = 0):
    return task(cfg, process, partition).run([rows(offsets, partition)])


# -- the happy path ------------------------------------------------------------------------------------


def test_commits_every_n_records_each_with_its_own_offset(kafka):
    cfg = config(commit_every=2)
    stats = run(cfg, range(5))
    assert kafka.values() == [value(o) for o in range(5)]
    assert kafka.offset_commits == [2, 4, 5]
    assert kafka.offsets == {(IN, 0): 5}
    assert (stats.records_in, stats.records_out, stats.transactions, stats.skipped) == (5, 5, 3, 0)
    assert (stats.first_offset, stats.last_offset, stats.aborted, stats.redos) == (0, 4, 0, 0)
    [producer] = kafka.created
    assert producer.calls == ["init"] + [
        "begin",
        "produce",
        "produce",
        "flush",
        "send_offsets",
        "commit",
    ] * 2 + [
        "begin",
        "produce",
        "flush",
        "send_offsets",
        "commit",
    ]
    assert kafka.released == [producer]
    assert kafka.discarded == []


def test_transactional_id_comes_from_the_config(kafka):
    cfg = config()
    stats = run(cfg, range(2), partition=3)
    assert kafka.acquired == [cfg.transactional_id(IN, 3)]
    assert stats.transactional_id == cfg.transactional_id(IN, 3)


def test_kept_producer_is_not_initialised_again(kafka):
    cfg = config()
    kafka.kept = kept = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)
    stats = run(cfg, range(3))
    assert kafka.created == []
    assert kept.calls[0] == "begin"
    assert "init" not in kept.calls
    assert kafka.released == [kept]
    assert kafka.values() == [value(o) for o in range(3)]
    assert stats.producers_replaced == 0


def test_rows_below_the_committed_offset_are_skipped_and_counted(kafka):
    kafka.offsets[(IN, 0)] = 3
    stats = run(config(), range(6))
    assert kafka.values() == [value(o) for o in (3, 4, 5)]
    assert kafka.offsets[(IN, 0)] == 6
    assert (stats.records_in, stats.skipped, stats.committed_before, stats.first_offset) == (6, 3, 3, 3)


def test_a_fully_committed_batch_opens_no_transaction(kafka):
    kafka.offsets[(IN, 0)] = 10
    stats = run(config(), range(5))
    assert kafka.outputs == []
    assert "begin" not in kafka.created[0].calls
    assert (stats.skipped, stats.transactions) == (5, 0)
    assert kafka.offsets[(IN, 0)] == 10


def test_empty_partition_run(kafka):
    stats = run(config(), [])
    assert (stats.records_in, stats.transactions) == (0, 0)
    assert kafka.released == kafka.created


def test_process_outputs_and_offsets_advance_without_output(kafka):
    def process(row, state):
        offset = row[2]
        if offset % 2:
            return None
        return [Output(b"a%d" % offset, topic="other"), {"value": b"b%d" % offset}]

    stats = run(config(), range(4), process=process)
    assert kafka.outputs == [("other", b"a0", 0), ("out", b"b0", 0), ("other", b"a2", 2), ("out", b"b2", 2)]
    assert kafka.offsets[(IN, 0)] == 4
    assert stats.records_out == 4


def test_process_outputs_default_to_the_output_topic_column(kafka):
    """SPEC: the output topic comes from config.output_topic or from the column that config names.
    The sink checks that column with `process=` too; an Output without a topic of its own must then
    go to the row's column, not to None."""

    batch = pa.RecordBatch.from_pydict(
        {
            "topic": [IN] * 4,
            "partition": pa.array([0] * 4, pa.int32()),
            "offset": pa.array(range(4), pa.int64()),
            "dest": [f"dest-{o % 2}" for o in range(4)],
            "payload": [f"p{o}" for o in range(4)],
        }
    )

    class Batch:
        columns = batch.schema.names
        dtypes = [
            ("topic", "string"),
            ("partition", "int"),
            ("offset", "bigint"),
            ("dest", "string"),
            ("payload", "string"),
        ]

    def process(row, state):
        return row.payload

    cfg = config(output_topic=None, output_topic_column="dest")
    layout, columns = batch_layout(cfg, Batch().dtypes, True)
    assert columns == batch.schema.names
    PartitionTask(TaskSpec(cfg, 7, layout, Functions(process)), IN, 0).run([batch])
    assert kafka.outputs == [(f"dest-{o % 2}", f"p{o}", o) for o in range(4)]


# -- abortable errors: abort and redo --------------------------------------------------------------


@pytest.mark.parametrize("step", ["flush", "send_offsets", "commit"])
def test_abortable_error_at_commit_aborts_and_redoes_the_transaction(kafka, step):
    cfg = config(commit_every=3)
    kafka.kept = producer = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)
    producer.fail[step] = [None, abortable()]  # the second transaction fails once
    stats = run(cfg, range(6))
    assert kafka.values() == [value(o) for o in range(6)]
    assert kafka.offset_commits == [3, 6]
    assert (stats.aborted, stats.redos, stats.transactions) == (1, 1, 2)
    assert producer.calls.count("abort") == 1


def test_abortable_error_while_producing_redoes_the_earlier_rows(kafka):
    cfg = config()
    kafka.kept = producer = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)
    producer.fail_at_offset[2] = [abortable()]
    stats = run(cfg, range(4))
    assert kafka.values() == [value(o) for o in range(4)]
    assert (stats.aborted, stats.redos, stats.transactions) == (1, 1, 1)


def test_redo_is_bounded(kafka):
    cfg = config(commit_every=2, max_redo=2)
    kafka.kept = producer = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)
    producer.fail["flush"] = [None] + [abortable() for _ in range(10)]
    t = task(cfg)
    with pytest.raises(eos.TransactionAbortableError):
        t.run([rows(range(4))])
    assert kafka.values() == [value(0), value(1)]  # the first transaction stays committed
    assert kafka.offsets == {(IN, 0): 2}
    # the first redo (record by record, to name a failed record) is free; then max_redo more
    assert (t.stats.aborted, t.stats.redos) == (4, 3)
    assert producer.records.exact_rows == [2, 3] * 3, "every redo is record by record"
    assert kafka.discarded == [producer]
    assert kafka.released == []


# -- record errors: abort and raise, naming the record ----------------------------------------------


def test_process_raising_aborts_and_names_the_record(kafka):
    def process(row, state):
        if row[2] == 3:
            raise ValueError("bad order")
        return row[3]

    with pytest.raises(eos.ProcessError) as info:
        run(config(commit_every=2), range(5), process=process)
    assert (info.value.topic, info.value.partition, info.value.offset) == (IN, 0, 3)
    assert "ValueError" in str(info.value) and "bad order" in str(info.value)
    assert f"{IN}/0@3" in str(info.value)
    assert kafka.values() == [value(0), value(1)]
    assert kafka.offsets == {(IN, 0): 2}
    [producer] = kafka.created
    assert producer.calls[-1] == "abort"
    assert kafka.discarded == [producer]


def test_process_returning_a_wrong_type_names_the_record(kafka):
    with pytest.raises(eos.ProcessError) as info:
        run(config(), range(3), process=lambda row, state: [42] if row[2] == 1 else row[3])
    assert info.value.offset == 1
    assert "int" in str(info.value)
    assert kafka.outputs == []


def test_produce_error_aborts_without_redo(kafka):
    cfg = config()
    kafka.kept = producer = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)
    producer.fail_at_offset[1] = [eos.ProduceError("too large", topic=IN, partition=0, offset=1)]
    t = task(cfg)
    with pytest.raises(eos.ProduceError):
        t.run([rows(range(3))])
    assert kafka.outputs == []
    assert kafka.offsets == {}
    assert (t.stats.aborted, t.stats.redos) == (1, 0)
    assert producer.calls.count("abort") == 1


# -- fatal errors and fencing ----------------------------------------------------------------------


def test_fatal_error_raises_without_redo(kafka):
    cfg = config()
    kafka.kept = producer = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)
    producer.fail["commit"] = [eos.FatalError("broken")]
    with pytest.raises(eos.FatalError):
        run(cfg, range(3))
    assert kafka.outputs == []
    assert producer.calls.count("commit") == 1
    assert kafka.discarded == [producer]


def test_fresh_producer_fenced_is_a_zombie(kafka):
    kafka.setup = lambda producer: producer.fail.update(send_offsets=[fenced()])
    t = task(config())
    with pytest.raises(eos.FencedError):
        t.run([rows(range(3))])
    assert kafka.outputs == []
    assert t.stats.producers_replaced == 0
    assert kafka.discarded == kafka.created
    assert kafka.released == []


def test_kept_producer_fenced_before_any_commit_is_replaced_once(kafka):
    """Another worker took the partition over and committed rows 0-1 meanwhile: this task fences it
    back with a fresh producer, skips what it committed and writes the rest exactly once."""
    cfg = config()
    kept = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)

    def displaced():
        kafka.outputs.extend(("out", value(o), o) for o in (0, 1))
        kafka.offsets[(IN, 0)] = 2
        raise fenced()

    kept.fail["send_offsets"] = [displaced]
    kafka.kept = kept
    stats = run(cfg, range(4))
    assert kafka.values() == [value(o) for o in range(4)]
    assert kafka.offsets[(IN, 0)] == 4
    assert stats.producers_replaced == 1
    assert stats.skipped == 2
    assert kafka.discarded == [kept]
    [fresh] = [p for p in kafka.created if p is not kept]
    assert fresh.calls[0] == "init"
    assert kafka.released == [fresh]


def test_replacement_fenced_again_raises(kafka):
    cfg = config()
    kafka.kept = kept = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)
    kept.fail["begin"] = [fenced()]
    kafka.setup = lambda producer: producer.fail.update(begin=[fenced()])
    t = task(cfg)
    with pytest.raises(eos.FencedError):
        t.run([rows(range(2))])
    assert t.stats.producers_replaced == 1
    assert len(kafka.created) == 1
    assert kafka.discarded == [kept, *kafka.created]
    assert kafka.outputs == []


def test_kept_producer_fenced_after_a_commit_is_a_zombie(kafka):
    cfg = config(commit_every=2)
    kept = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)
    kept.fail["send_offsets"] = [None, fenced()]
    kafka.kept = kept
    t = task(cfg)
    with pytest.raises(eos.FencedError):
        t.run([rows(range(4))])
    assert kafka.values() == [value(0), value(1)]
    assert t.stats.producers_replaced == 0
    assert kafka.discarded == [kept]


def test_kept_producer_displaced_is_found_out_before_any_row_is_produced(kafka):
    """Rows 0-1 are committed; another worker's producer for the partition fenced the kept one since.
    Step 2 sends the committed offset into a transaction first: the kept producer fails there, having
    produced nothing, and a fresh one writes rows 2-3 once."""
    cfg = config()
    kafka.offsets[(IN, 0)] = 2
    kafka.outputs.extend(("out", value(o), o) for o in (0, 1))
    kafka.kept = kept = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)
    kept.fail["send_offsets"] = [fenced()]
    stats = run(cfg, range(4))
    assert kept.calls == ["begin", "send_offsets"]  # no produce: no row written twice or lost
    assert kafka.values() == [value(o) for o in range(4)]
    assert (stats.producers_replaced, stats.skipped, kafka.offsets[(IN, 0)]) == (1, 2, 4)
    [fresh] = kafka.created
    assert fresh.calls[:2] == ["init", "begin"]
    assert kafka.discarded == [kept] and kafka.released == [fresh]


def test_kept_producer_whose_own_commit_is_the_committed_offset_skips_the_round_trip(kafka):
    """The committed offset's metadata is the stamp this producer last committed: nobody committed
    since, so step 2 sends nothing before the rows."""
    cfg = config()
    kafka.offsets[(IN, 0)] = 2
    kafka.kept = kept = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)
    kept.committed_stamp = _offsets.stamp(cfg)  # what the fake broker holds as the committed metadata
    stats = run(cfg, range(5))
    assert kept.calls == ["begin", "produce", "produce", "produce", "flush", "send_offsets", "commit"]
    assert (stats.producers_replaced, stats.check_seconds, kafka.offsets[(IN, 0)]) == (0, 0.0, 5)
    assert kept.committed_stamp != _offsets.stamp(cfg), "it remembers its new commit"


def test_kept_producer_whose_commit_was_followed_by_another_is_replaced_at_once(kafka):
    """Another producer committed the partition after this one's last commit: it was initialised later
    and fenced this one. Replaced before any call to the broker, the rows written once."""
    cfg = config()
    kafka.offsets[(IN, 0)] = 2
    kafka.outputs.extend(("out", value(o), o) for o in (0, 1))
    kafka.kept = kept = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)
    kept.committed_stamp = "eos/1;app=app;out=out;an-older-commit"
    stats = run(cfg, range(4))
    assert kept.calls == []
    assert (stats.producers_replaced, stats.skipped, kafka.offsets[(IN, 0)]) == (1, 2, 4)
    [fresh] = kafka.created
    assert fresh.calls[:2] == ["init", "begin"]
    assert kafka.values() == [value(o) for o in range(4)]
    assert kafka.discarded == [kept] and kafka.released == [fresh]


def test_kept_producer_fenced_since_its_own_commit_is_found_out_late_and_replaced(kafka):
    """Its own stamp is still the committed one, but another worker initialised a producer since (and
    died before committing): the first produce is refused as fenced (8d), nothing of it is visible, and
    a fresh producer writes the rows once."""
    cfg = config()
    kafka.offsets[(IN, 0)] = 2
    kafka.outputs.extend(("out", value(o), o) for o in (0, 1))
    kafka.kept = kept = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)
    kept.committed_stamp = _offsets.stamp(cfg)
    kept.fail["produce"] = [fenced()]
    stats = run(cfg, range(4))
    assert kept.calls[:2] == ["begin", "produce"]
    assert kafka.values() == [value(o) for o in range(4)]
    assert (stats.producers_replaced, kafka.offsets[(IN, 0)]) == (1, 4)
    assert kafka.discarded == [kept]


def test_kept_current_producer_checks_with_the_committed_offset_and_goes_on_in_that_transaction(kafka):
    cfg = config()
    kafka.offsets[(IN, 0)] = 2
    kafka.kept = kept = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)
    stats = run(cfg, range(5))
    assert kept.calls == ["begin", "send_offsets", "produce", "produce", "produce", "flush"] + [
        "send_offsets",
        "commit",
    ]
    assert kafka.offset_commits == [5] and stats.transactions == 1 and stats.producers_replaced == 0
    assert kafka.released == [kept]


def test_kept_producer_checks_only_when_it_writes(kafka, monkeypatch):
    """Every row committed already: no transaction, so no check; the producer is kept. And a task that
    fails its own checks before writing leaves no transaction open on the partition's offset (a
    discarded producer's would hold every stable read of it until transaction_timeout_ms)."""
    cfg = config()
    kafka.offsets[(IN, 0)] = 3
    kafka.kept = kept = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)
    stats = run(cfg, range(3))
    assert kept.calls == []
    assert (stats.skipped, stats.transactions, kafka.offset_commits) == (3, 0, [])
    assert kafka.released == [kept] and not kept.in_transaction
    kafka.kept = kept

    def gap(scope, committed, start_known=False):
        raise eos.InputOrderError("input record 3 did not reach it", topic=IN, partition=0, offset=3)

    monkeypatch.setattr(_input, "require_contiguous", gap)  # 3a: the task's own check fails it
    with pytest.raises(eos.InputOrderError):
        PartitionTask(TaskSpec(cfg, 7, LAYOUT, check_input=True, query="q"), IN, 0).run([rows(range(5, 7))])
    assert kept.calls == [] and kafka.discarded == [kept]


# -- at_least_once ---------------------------------------------------------------------------------


def test_at_least_once_flushes_then_commits_offsets_to_the_group(kafka):
    cfg = config(processing_guarantee="at_least_once", commit_every=2)
    stats = run(cfg, range(5))
    assert stats.transactional_id is None
    assert kafka.acquired == [None]
    [producer] = kafka.created
    assert not {"init", "begin", "send_offsets", "commit", "abort"} & set(producer.calls)
    assert kafka.values() == [value(o) for o in range(5)]
    assert kafka.offset_commits == [2, 4, 5]
    steps = [e[0] for e in kafka.events if e[0] != "produce"]
    assert steps == ["flush", "offset_commit"] * 3
    assert stats.transactions == 3


# -- run_partition and the batch summary -----------------------------------------------------------


def test_run_partition_runs_one_task_per_contiguous_topic_partition(kafka):
    cfg = config(commit_every=2)
    kafka.input_topics |= {"a", "b"}
    kafka.offsets[("a", 1)] = 1
    batches = [
        concat([rows(range(3), partition=0, topic="a"), rows(range(2), partition=1, topic="a")]),
        concat([rows([2], partition=1, topic="a"), rows([5], topic="b")]),
    ]
    out = list(run_partition(TaskSpec(cfg, 7, LAYOUT), iter(batches)))
    assert all(b.schema == STATS_SCHEMA and b.num_rows == 1 for b in out)
    stats = [b.to_pylist()[0] for b in out]
    assert [(s["topic"], s["partition"]) for s in stats] == [("a", 0), ("a", 1), ("b", 0)]
    assert [s["records_in"] for s in stats] == [3, 3, 1]
    assert [s["skipped"] for s in stats] == [0, 1, 0]
    assert kafka.acquired == [
        cfg.transactional_id("a", 0),
        cfg.transactional_id("a", 1),
        cfg.transactional_id("b", 0),
    ]
    assert kafka.offsets == {("a", 0): 3, ("a", 1): 3, ("b", 0): 6}

    summary = Sink(cfg)._summarize(7, stats, 1.23456)
    assert (summary.batch_id, summary.partitions, summary.records_in, summary.skipped) == (7, 3, 7, 1)
    assert summary.records_out == 6
    assert summary.transactions == sum(s["transactions"] for s in stats) == 4
    assert summary.guarantee == "exactly_once"
    assert summary.seconds == 1.235
    assert summary.per_partition == tuple(stats)


def test_summary_of_an_empty_batch():
    summary = Sink(config())._summarize(0, [], 0.0)
    assert (summary.partitions, summary.records_in, summary.commit_ms_max) == (0, 0, 0.0)


# -- Arrow chunks: bulk delivery failures, transaction bounds, process_batch, input order ----------------


def refusing(kafka: FakeKafka, cfg: eos.Config, offsets: set[int], batch: bool = False) -> FakeOutputProducer:
    """The worker's kept producer and every fresh one refuse the outputs of input `offsets` (with `batch`,
    every output of a transaction that holds one, as a broker refuses a whole record batch); a producer
    whose transaction had a delivery fail is not used again, so the task goes on with fresh ones."""

    def setup(p: FakeOutputProducer) -> None:
        p.records.undeliverable, p.records.batch_refusal = set(offsets), batch

    kafka.setup = setup
    kafka.kept = producer = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)
    setup(producer)
    return producer


def exact_rows(kafka: FakeKafka, kept: FakeOutputProducer) -> list[int]:
    """The input offsets produced with exact delivery tracking, by every producer in turn."""
    return [o for p in [kept, *kafka.created] for o in p.records.exact_rows]


@pytest.mark.parametrize("max_redo", [0, 2])
def test_bulk_delivery_failure_is_redone_record_by_record_to_name_the_record(kafka, max_redo):
    cfg = config(commit_every=4, max_redo=max_redo)
    producer = refusing(kafka, cfg, {6})
    t = task(cfg)
    with pytest.raises(eos.ProduceError) as info:
        t.run([rows(range(10))])
    assert info.value.offset == 6
    assert exact_rows(kafka, producer) == [4, 5, 6, 7], "the failed transaction was redone record by record"
    assert kafka.values() == [value(o) for o in range(4)]  # the transaction before it stays committed
    assert kafka.offsets == {(IN, 0): 4}
    assert (t.stats.aborted, t.stats.redos) == (2, 1)
    # the producer whose transaction had a delivery refused was aborted and replaced by a fresh one; the
    # record named, the fresh one's transaction is aborted and the task fails
    assert [p.calls[-1] for p in [producer, *kafka.created]] == ["abort", "abort"]
    assert t.stats.producers_replaced == 1


def test_a_refusal_that_hits_a_whole_record_batch_is_narrowed_to_the_record_refused_alone(kafka):
    cfg = config(commit_every=100)
    producer = refusing(kafka, cfg, {6}, batch=True)
    t = task(cfg)
    with pytest.raises(eos.ProduceError) as info:
        t.run([rows(range(10))])
    assert info.value.offset == 6 and info.value.candidates == (6,)
    # bulk, then record by record (all 10 refused together), then each suspect alone up to the culprit
    assert exact_rows(kafka, producer) == list(range(10)) + list(range(7))
    assert kafka.outputs == [] and kafka.offsets == {}
    assert all("commit" not in p.calls for p in [producer, *kafka.created]), "the search committed"


def test_a_suspect_whose_write_is_purged_is_written_again_not_taken_as_accepted(kafka):
    """A record purged unsent (_PURGE_QUEUE) is no verdict on the suspect."""
    cfg = config(commit_every=100)
    producer = refusing(kafka, cfg, {2}, batch=True)
    purged = eos.TransactionAbortableError("delivery to 'out' failed: Local: Purged in queue")
    setup = kafka.setup

    def purging_once(p: FakeOutputProducer) -> None:
        setup(p)
        if len(kafka.created) == 1:  # the second fresh one, the search's: its first write is purged
            p.fail["flush"] = [purged]

    kafka.setup = purging_once
    t = task(cfg)
    with pytest.raises(eos.ProduceError) as info:
        t.run([rows(range(5))])
    assert info.value.offset == 2 and info.value.candidates == (2,)
    # bulk (kept), record by record (fresh), then suspects alone: 0 (purged), 0 again, 1, 2
    assert exact_rows(kafka, producer) == list(range(5)) + [0, 0, 1, 2]
    assert kafka.outputs == [] and all("commit" not in p.calls for p in [producer, *kafka.created])


def test_a_transient_bulk_failure_succeeds_in_the_redo_and_the_next_transaction_is_bulk_again(kafka):
    cfg = config(commit_every=3)
    kafka.kept = producer = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)
    producer.fail["flush"] = [eos.DeliveryFailedError("delivery failed")]
    stats = run(cfg, range(6))
    assert kafka.values() == [value(o) for o in range(6)]
    assert producer.records.exact_rows == [0, 1, 2]
    assert (stats.aborted, stats.redos, stats.transactions) == (1, 1, 2)


def test_at_least_once_redo_record_by_record_lasts_one_transaction_too(kafka):
    cfg = config(processing_guarantee="at_least_once", commit_every=3)
    kafka.kept = producer = FakeOutputProducer(kafka, None, initialized=True)
    producer.fail["flush"] = [eos.DeliveryFailedError("delivery failed")]
    stats = run(cfg, range(6))
    assert producer.records.exact_rows == [0, 1, 2], "only the failed transaction is redone record by record"
    assert kafka.offset_commits == [3, 6]
    # at_least_once has no transaction to abort: what was delivered before the failure is written again
    assert kafka.values() == [value(o) for o in (0, 1, 2, 0, 1, 2, 3, 4, 5)]
    assert stats.redos == 1


def test_no_transaction_takes_more_than_commit_every_rows_of_a_large_batch(kafka):
    stats = run(config(commit_every=10), range(25))
    assert kafka.offset_commits == [10, 20, 25]
    assert stats.transactions == 3


def test_large_records_commit_by_bytes_before_commit_every(kafka):
    """Rows of ~1 KB: a 3 KB bound commits every few rows, whatever commit_every says; so the input
    a transaction holds for a redo stays bounded by bytes too."""
    big = pa.RecordBatch.from_pydict(
        {
            "topic": pa.array([IN] * 12, pa.string()),
            "partition": pa.array([0] * 12, pa.int32()),
            "offset": pa.array(range(12), pa.int64()),
            "value": pa.array([b"x" * 1_000] * 12, pa.binary()),
        }
    )
    cfg = config(commit_every=100_000, commit_max_bytes=3_000)
    chunks = [big.slice(i, 2) for i in range(0, 12, 2)]  # Arrow batches of 2 rows
    stats = task(cfg).run(chunks)
    assert kafka.offset_commits == [4, 8, 12]
    assert stats.transactions == 3


def test_process_batch_outputs_go_to_their_topics_and_offsets_commit(kafka):
    calls = []

    def upper(batch, state):
        calls.append(batch.column("offset").to_pylist())
        values = [v.upper() for v in batch.column("value").to_pylist()]
        topics = ["other" if i % 2 else None for i in range(len(values))]
        return pa.RecordBatch.from_pydict({"value": values, "topic": topics})

    stats = task(config(commit_every=4), process_batch=upper).run([rows(range(6))])
    assert calls == [[0, 1, 2, 3], [4, 5]], "process_batch sees at most one transaction's rows"
    # (topic, value, input offset named for it): None is the configured topic (the producer's default);
    # outputs of a call are named by the call's first input record
    assert kafka.outputs == [
        ("other" if o % 2 else None, value(o).upper(), 0 if o < 4 else 4) for o in range(6)
    ]
    assert kafka.offset_commits == [4, 6]
    assert stats.records_out == 6


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (lambda batch: pa.RecordBatch.from_pydict({"key": [b"k"]}), "no 'value' column"),
        (lambda batch: batch, "not output fields"),
        (lambda batch: 1 / 0, "raised ZeroDivisionError"),
    ],
    ids=["no-value", "input-returned", "raising"],
)
def test_process_batch_errors_abort_and_name_the_first_record_of_the_call(kafka, result, message):
    with pytest.raises(eos.ProcessError, match=message) as info:
        task(config(commit_every=3), process_batch=lambda batch, state: result(batch)).run([rows(range(5))])
    assert info.value.offset == 0
    assert "process_batch over input offsets 0-2" in str(info.value)
    assert kafka.outputs == [] and kafka.offsets == {}


def test_process_stops_mid_batch_when_the_transaction_is_due(kafka):
    import time

    def slow(row, state):
        time.sleep(0.003)
        return row.value

    stats = task(config(commit_interval_ms=1), slow).run([rows(range(4))])
    assert kafka.offset_commits == [1, 2, 3, 4], "each row outlasted commit_interval_ms: one transaction each"
    assert stats.transactions == 4


def test_rows_out_of_order_fail_the_partition_before_anything_of_that_run_commits(kafka):
    batch = concat([rows(range(3)), rows([7, 5])])
    with pytest.raises(eos.InputOrderError, match="strictly increasing"):
        list(run_partition(TaskSpec(config(commit_every=2), 7, LAYOUT), iter([batch])))
    assert kafka.outputs == [] and kafka.offsets == {}


# -- on_error="dead_letter" ------------------------------------------------------------------------------

DLQ = "dlq"


def dead_letter_config(**kw) -> eos.Config:
    return config(on_error="dead_letter", dead_letter_topic=DLQ, **kw)


def last_letter(kafka: FakeKafka) -> Output:
    """The last dead letter produced (committed or not)."""
    return [p.out for p in kafka.produced if p.topic == DLQ][-1]


def committed(kafka: FakeKafka, topic: str) -> list[int]:
    """The input offsets whose records reached `topic`, committed."""
    return [o for t, _, o in kafka.outputs if t == topic]


def test_a_record_whose_process_raises_becomes_a_dead_letter_in_the_same_transaction(kafka):
    def process(row, state):
        if row[2] in (3, 7):
            raise ValueError(f"bad record {row[2]}")
        return row[3]

    t = task(dead_letter_config(), process)
    stats = t.run([rows(range(10))])
    assert committed(kafka, "out") == [0, 1, 2, 4, 5, 6, 8, 9]
    assert committed(kafka, DLQ) == [3, 7]
    assert kafka.offset_commits == [10], "outputs, dead letters and the offset: one transaction"
    assert (stats.dead_letters, stats.records_out, stats.transactions, stats.aborted) == (2, 8, 1, 2)
    assert last_letter(kafka).value == value(7), "a dead letter carries the input row's value"
    letter = dict(last_letter(kafka).headers)
    assert letter["__eos.errors.exception"] == b"ValueError"
    assert letter["__eos.errors.kind"] == b"ProcessError"
    assert b"bad record 7" in letter["__eos.errors.message"]
    assert (letter["__eos.errors.topic"], letter["__eos.errors.partition"]) == (IN.encode(), b"0")
    assert (letter["__eos.errors.offset"], letter["__eos.errors.batch.id"]) == (b"7", b"7")
    assert letter["__eos.errors.app.id"] == b"app"
    assert b"raise ValueError" in letter["__eos.errors.stacktrace"]


def test_dead_letters_past_the_bound_fail_the_batch_and_commit_nothing(kafka):
    def process(row, state):
        if row[2] % 2:
            raise ValueError("odd")
        return row[3]

    with pytest.raises(eos.TooManyDeadLettersError, match="max_dead_letters_per_batch \\(2\\)") as info:
        run(dead_letter_config(max_dead_letters_per_batch=2), range(10), process=process)
    assert (info.value.topic, info.value.partition, info.value.offset) == (IN, 0, 5)
    assert kafka.outputs == [] and kafka.offsets == {}


def test_on_error_fail_is_unchanged_by_a_dead_letter_topic(kafka):
    cfg = config(dead_letter_topic=DLQ)
    with pytest.raises(eos.ProcessError):
        run(cfg, range(3), process=lambda row, state: 1 / 0 if row[2] == 1 else row[3])
    assert kafka.outputs == []


def test_process_batch_raising_is_called_row_by_row_to_find_the_record_then_whole_again(kafka):
    calls = []

    def upper(batch, state):
        offsets = batch.column("offset").to_pylist()
        calls.append(offsets)
        if 2 in offsets:
            raise KeyError("no such customer")
        return pa.RecordBatch.from_pydict({"value": [v.upper() for v in batch.column("value").to_pylist()]})

    stats = task(dead_letter_config(commit_every=4), process_batch=upper).run([rows(range(8))])
    assert committed(kafka, DLQ) == [2]
    assert [v for t, v, _ in kafka.outputs if t == "out"] == [value(o).upper() for o in (0, 1, 3, 4, 5, 6, 7)]
    assert calls == [[0, 1, 2, 3], [0], [1], [2], [0], [1], [3], [4, 5, 6, 7]], (
        "whole, then one row at a time to find the record, then without it; the next transaction whole"
    )
    assert (stats.dead_letters, kafka.offset_commits) == (1, [4, 8])
    assert dict(last_letter(kafka).headers)["__eos.errors.exception"] == b"KeyError"


def test_process_batch_returning_the_wrong_shape_is_not_a_bad_record(kafka):
    with pytest.raises(eos.ProcessError, match="no 'value' column"):
        task(
            dead_letter_config(), process_batch=lambda b, s: pa.RecordBatch.from_pydict({"key": [b"k"]})
        ).run([rows(range(3))])
    assert kafka.outputs == []


def test_a_record_the_client_refuses_becomes_a_dead_letter_and_a_missing_topic_does_not(kafka):
    cfg = dead_letter_config()
    kafka.kept = producer = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)
    too_large = eos.ProduceError("too large", topic=IN, partition=0, offset=1, poison=True)
    producer.fail_at_offset[1] = [too_large]
    stats = task(cfg).run([rows(range(3))])
    assert (committed(kafka, "out"), committed(kafka, DLQ), stats.dead_letters) == ([0, 2], [1], 1)

    kafka.outputs.clear()
    kafka.offsets.clear()
    kafka.kept = producer = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)
    missing = eos.ProduceError("output topic 'x' is not available", topic=IN, partition=0, offset=1)
    producer.fail_at_offset[1] = [missing]
    with pytest.raises(eos.ProduceError, match="not available"):
        task(cfg).run([rows(range(3))])
    assert kafka.outputs == []


def test_a_delivery_refused_in_a_whole_record_batch_is_narrowed_then_dead_lettered(kafka):
    cfg = dead_letter_config()
    refusing(kafka, cfg, {6}, batch=True)
    stats = task(cfg).run([rows(range(10))])
    assert committed(kafka, "out") == [o for o in range(10) if o != 6]
    assert committed(kafka, DLQ) == [6]
    assert (stats.dead_letters, kafka.offset_commits) == (1, [10])


def test_several_refused_records_in_one_record_batch_are_each_dead_lettered(kafka):
    """Three outputs of one transaction refused together with the good ones: each refused alone is a
    dead letter, the good rows are written once."""
    cfg = dead_letter_config()
    refusing(kafka, cfg, {2, 5, 9}, batch=True)
    stats = task(cfg).run([rows(range(12))])
    assert committed(kafka, "out") == [o for o in range(12) if o not in (2, 5, 9)]
    assert committed(kafka, DLQ) == [2, 5, 9]
    assert (stats.dead_letters, kafka.offset_commits) == (3, [12])


def test_a_dead_letter_refused_too_fails_the_batch_naming_both_errors(kafka):
    cfg = dead_letter_config()
    kafka.kept = producer = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)
    producer.fail_at_offset[1] = [
        eos.ProduceError("too large", topic=IN, partition=0, offset=1, poison=True),
        eos.ProduceError("dead letter too large", topic=IN, partition=0, offset=1, poison=True),
    ]
    with pytest.raises(eos.ProduceError, match="dead letter of this record was refused too") as info:
        task(cfg).run([rows(range(3))])
    assert info.value.offset == 1 and "too large" in str(info.value)
    assert kafka.outputs == []


def test_a_pass_through_value_refused_as_too_large_reaches_the_dead_letter_topic_without_it(kafka):
    from confluent_kafka import KafkaError

    cfg = dead_letter_config()
    kafka.kept = producer = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)
    error = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
    producer.fail_at_offset[1] = [
        eos.ProduceError("too large", topic=IN, partition=0, offset=1, poison=True, kafka_error=error)
    ]
    task(cfg).run([rows(range(3))])
    letter = last_letter(kafka)
    assert letter.value is None
    assert dict(letter.headers)["__eos.errors.value.bytes"] == str(len(value(1))).encode()


# -- 8f: a call of the transaction timed out ---------------------------------------------------------


def in_doubt() -> eos.TransactionInDoubtError:
    return eos.TransactionInDoubtError("commit_transaction: Local: Timed out: the transaction is in doubt")


@pytest.mark.parametrize("reached", [True, False], ids=["commit-reached-the-broker", "commit-lost"])
def test_a_commit_in_doubt_is_settled_by_a_fresh_producer_never_retried_on_its_own(kafka, reached):
    """The commit of rows 3-5 times out; whether the coordinator got it is unknown. The producer is
    neither asked again nor aborted: a fresh one takes over (its init_transactions commits or aborts the
    transaction), and the task goes on from the committed offset it then reads: rows 3-5 once either way."""
    cfg = config(commit_every=3)
    kafka.kept = kept = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)

    def timed_out():
        if reached:  # the broker committed it; the answer never came
            kept.kafka.outputs.extend(kept.open)
            kept.kafka.offsets.update(kept.open_offsets)
        raise in_doubt()

    kept.fail["commit"] = [None, timed_out]
    stats = run(cfg, range(9))
    assert kafka.values() == [value(o) for o in range(9)]
    assert kafka.offsets == {(IN, 0): 9}
    assert kept.calls.count("commit") == 2 and "abort" not in kept.calls, "neither retried nor aborted"
    assert kafka.discarded[0] is kept
    [fresh] = kafka.created
    assert fresh.calls[0] == "init"
    assert stats.producers_replaced == 1
    assert stats.skipped == (3 if reached else 0), "the rows the in-doubt commit committed are skipped"


def test_calls_in_doubt_again_and_again_fail_the_task_after_max_redo(kafka):
    cfg = config(commit_every=3, max_redo=2)
    kafka.setup = lambda p: p.fail.update(commit=[in_doubt()])
    kafka.kept = kept = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)
    kafka.setup(kept)
    with pytest.raises(eos.TransactionInDoubtError):
        run(cfg, range(3))
    assert len(kafka.created) == 2 and kafka.outputs == []
