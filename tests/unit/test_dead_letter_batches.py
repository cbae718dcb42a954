"""on_error="dead_letter" with `process_batch`: a refused output names no row of its own (it carries its
call's first offset, `Outputs.offset_of`), so the task calls process_batch one row at a time before it
dead-letters anything, and only the row whose output was refused becomes a dead letter (issue 39, point
2). The real `PartitionTask` and `Writer` on the producer fakes of `tests.support.producers`."""

from __future__ import annotations

import pyarrow as pa
import pytest

import eos
from eos._core._arrow import Layout
from eos._core._spec import Functions, TaskSpec
from eos._core._task import PartitionTask
from tests.support.configs import config
from tests.support.producers import FakeKafka, FakeOutputProducer, FakeRecords

IN, DLQ, BAD = "in", "dlq", 2
#: the output row BAD's process_batch returns: refused at once, or at the flush (`RefusingRecords`)
REFUSED = b"x" * 64


class RefusingRecords(FakeRecords):
    """Refuses every output whose value is REFUSED, naming the input offset the output carries (for a
    process_batch output: its call's first row): at once in produce_outputs, or (`at_flush`) at the
    flush as a broker does, which refuses the whole record batch (every open output's offset a suspect)
    and names no record at all before the redo with `exact`."""

    def __init__(self, producer: FakeOutputProducer, at_flush: bool) -> None:
        super().__init__(producer)
        self.at_flush = at_flush

    def _refusal(self, offset: int, candidates: tuple[int, ...] = ()) -> eos.ProduceError:
        return eos.ProduceError(
            "output refused: too large",
            topic=IN,
            partition=0,
            offset=offset,
            candidates=candidates,
            poison=True,
        )

    def produce_outputs(self, outputs, in_topic, in_partition) -> int:
        if not self.at_flush:
            for i, value in enumerate(outputs.values.to_pylist()):
                if value == REFUSED:
                    raise self._refusal(outputs.offset_of(i))
        return super().produce_outputs(outputs, in_topic, in_partition)

    def flush_and_check(self, in_topic, in_partition) -> None:
        self.producer.step("flush")
        outputs = [(value, offset) for topic, value, offset in self.producer.open if topic != DLQ]
        if not any(value == REFUSED for value, _ in outputs):
            return
        if not self.exact:
            raise eos.DeliveryFailedError("delivery failed (bulk: record unknown)")
        suspects = tuple(sorted({offset for _, offset in outputs}))
        raise self._refusal(suspects[0], suspects)


def rows(offsets) -> pa.RecordBatch:
    offsets = list(offsets)
    return pa.RecordBatch.from_pydict(
        {
            "topic": pa.array([IN] * len(offsets), pa.string()),
            "partition": pa.array([0] * len(offsets), pa.int32()),
            "offset": pa.array(offsets, pa.int64()),
            "value": pa.array([b"v%d" % o for o in offsets], pa.binary()),
        }
    )


def run(kafka: FakeKafka, at_flush: bool, runs: list[pa.RecordBatch], **settings):
    """Run a task whose process_batch returns each row's value, REFUSED for row BAD; its stats and the
    offsets of each process_batch call."""
    cfg = config(processing_guarantee="exactly_once", commit_every=100, max_redo=2, **settings)
    kafka.kept = producer = FakeOutputProducer(kafka, cfg.transactional_id(IN, 0), initialized=True)
    producer.records = RefusingRecords(producer, at_flush)
    calls = []

    def outputs(batch, state):
        offsets = batch.column("offset").to_pylist()
        calls.append(offsets)
        values = [
            REFUSED if o == BAD else v
            for o, v in zip(offsets, batch.column("value").to_pylist(), strict=True)
        ]
        return pa.RecordBatch.from_pydict({"value": pa.array(values, pa.binary())})

    job = TaskSpec(cfg, 7, Layout(value="value"), Functions(None, process_batch=outputs))
    return PartitionTask(job, IN, 0).run(runs), calls


def committed(kafka: FakeKafka, topic: str) -> list[int]:
    return [offset for t, _, offset in kafka.outputs if t == topic]


def test_an_output_refused_at_once_is_traced_to_its_row_by_calling_process_batch_row_by_row(kafka):
    stats, calls = run(kafka, False, [rows(range(10))], on_error="dead_letter", dead_letter_topic=DLQ)
    good = [o for o in range(10) if o != BAD]
    assert committed(kafka, DLQ) == [BAD], "the row that returned the refused output, not its call's first"
    assert [(v, o) for t, v, o in kafka.outputs if t == "out"] == [(b"v%d" % o, o) for o in good]
    assert calls == [list(range(10)), [0], [1], [2]] + [[o] for o in good], (
        "whole, then one row at a time up to the refused output, then one row at a time without it"
    )
    assert (stats.dead_letters, stats.records_out, kafka.offset_commits) == (1, 9, [10])


def test_a_delivery_refused_over_several_calls_is_traced_to_its_row_not_to_a_calls_first(kafka):
    """Two process_batch calls (0-4, 5-9) in one transaction and a refusal of the whole record batch:
    the suspects are the calls' first rows (0 and 5), neither of which is refused alone; before, the
    batch failed. Row by row, the suspects are the rows themselves."""
    stats, _ = run(
        kafka, True, [rows(range(5)), rows(range(5, 10))], on_error="dead_letter", dead_letter_topic=DLQ
    )
    assert committed(kafka, DLQ) == [BAD]
    assert committed(kafka, "out") == [o for o in range(10) if o != BAD]
    assert (stats.dead_letters, kafka.offset_commits) == (1, [10])


@pytest.mark.parametrize("at_flush", [False, True])
def test_on_error_fail_still_fails_on_a_refused_process_batch_output(kafka, at_flush):
    with pytest.raises(eos.ProduceError, match="too large"):
        run(kafka, at_flush, [rows(range(10))], dead_letter_topic=DLQ)
    assert kafka.outputs == []
