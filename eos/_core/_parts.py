"""input_mode "any": a batch without Kafka input coordinates (an aggregation, a join, a non-Kafka source),
written in parts, each part once per batch id. Steps P1-P3 (driver) and A1-A6 (executor) of
docs/protocol.md.

Spark re-runs a failed batch N on the same source offsets and the same state version, so it computes the
same rows again. eos makes the re-run write nothing that already reached Kafka: the rows are placed in
`parts` parts by a hash of their content (`place`, P1), each part is one transaction of a producer whose
transactional.id names the part, and the transaction also commits "part i is at batch N" (with the row
count and an order-independent digest) as the offset of partition i of the progress topic
`<app>-eos-parts`, in group `app_id`. A part that finds batch N committed writes nothing, once it has
checked that this run computed the same rows (else NondeterministicBatchError).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Iterator
from typing import Any

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from eos import _crash, _names
from eos._core import _worker
from eos._core._arrow import Layout, batch_outputs, passthrough
from eos._core._job import Commit, Functions
from eos._core._stats import STATS_SCHEMA, PartitionStats
from eos._kafka import _offsets, _pool, _producer, _schemas
from eos._log import get_logger
from eos.config import Config
from eos.errors import (
    FatalError,
    NondeterministicBatchError,
    OffsetsUnstableError,
    PartTooLargeError,
    ProcessError,
)
from eos.records import Outputs, outputs_of
from eos.state import State

#: the part a row is placed in, and the hash of its content (added by `place`, read by the task)
PART_COLUMN = "eos_part"
HASH_COLUMN = "eos_h"
#: a part's one transaction is aborted once it has been open this share of transaction_timeout_ms
TIMEOUT_SHARE = 0.8

_U64 = np.uint64


# -- what a part's transaction records -------------------------------------------------------------


@attrs.frozen
class Digest:
    """Row count and two wrapping 64-bit sums over the rows' hashes: the same for the same rows in any
    order (a sum, not an XOR: two equal rows do not cancel out)."""

    rows: int = 0
    sum: int = 0
    mix: int = 0

    def plus(self, hashes: np.ndarray) -> Digest:
        h = hashes.astype(_U64, copy=False)
        with np.errstate(over="ignore"):
            total = int(np.sum(h, dtype=_U64))
            mixed = int(np.sum(_splitmix64(h), dtype=_U64))
        mask = (1 << 64) - 1
        return Digest(self.rows + len(h), (self.sum + total) & mask, (self.mix + mixed) & mask)

    def text(self) -> str:
        return f"{self.sum:016x}{self.mix:016x}"


def _splitmix64(h: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = h + _U64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
        return z ^ (z >> _U64(31))


@attrs.frozen
class Progress:
    """What part i's committed offset says: batch `batch_id` of `parts` parts is written, `digest` its rows.
    The offset itself is batch_id + 1 (Kafka's "next to process")."""

    batch_id: int
    parts: int | None
    digest: Digest

    def metadata(self, config: Config, part: int) -> str:
        d = self.digest
        parts = "" if self.parts is None else str(self.parts)
        return (
            f"{_offsets.stamp(config)};mode=any;batch={self.batch_id};part={part};parts={parts}"
            f";rows={d.rows};digest={d.text()}"
        )

    @classmethod
    def of(cls, entry: _offsets.Committed | None) -> Progress | None:
        fields = _offsets.fields(entry.metadata) if entry is not None else None
        if fields is None or fields.get("mode") != "any":
            return None
        digest = fields.get("digest", "")
        return cls(
            batch_id=int(fields["batch"]),
            parts=int(fields["parts"]) if fields.get("parts") else None,
            digest=Digest(int(fields["rows"]), int(digest[:16], 16), int(digest[16:], 16)),
        )


def read_progress(
    config: Config, parts: Iterable[int], log=None, stable: bool = True, wait: bool = True
) -> dict[int, Any]:
    """Each part's committed Progress (None: none yet, or an offset without a part record); an offset this
    app did not commit is refused (ForeignOffsetError)."""
    topic = _names.parts_topic(config.app_id)
    entries = _offsets.committed_entries(config, [(topic, p) for p in parts], log, stable, wait)
    _offsets.check_stamps(config, entries)
    return {p: Progress.of(entries[(topic, p)]) for (_, p) in entries}


# -- the executor: A1-A6 ---------------------------------------------------------------------------


@attrs.frozen
class PartJob:
    """What every part's task of one batch needs; built by the sink (or the data source)."""

    config: Config
    batch_id: int
    layout: Layout
    #: the number of parts; None where Spark's own partitioning made them (`format("eos")`)
    parts: int | None
    functions: Functions = attrs.field(factory=Functions)


class PartTask:
    """One part of one batch: A1-A6 of docs/protocol.md."""

    def __init__(self, job: PartJob, part: int) -> None:
        self.job = job
        self.config = config = job.config
        self.part = part
        self.topic = _names.parts_topic(config.app_id)
        tid = _names.part_transactional_id(config.app_id, part) if config.exactly_once else None
        self.log = get_logger(app_id=config.app_id, part=part, transactional_id=tid, batch_id=job.batch_id)
        self.stats = PartitionStats(self.topic, part, tid)
        self.tid = tid
        self.producer: _producer.OutputProducer | None = None
        self.serializers = _schemas.Serializers.of(config)
        self.started = time.monotonic()

    def where(self) -> str:
        return f"batch {self.job.batch_id}, part {self.part}"

    def run(self, batches: Iterator[pa.RecordBatch]) -> PartitionStats:
        try:
            progress = self._start()  # A2, A3
            if progress is not None and progress.batch_id == self.job.batch_id:
                self._verify(progress, batches)  # A4
            else:
                self._write(batches)  # A5, A6
            _pool.release(self.producer)
            self.producer = None
            self.log.info(
                "part written",
                records_in=self.stats.records_in,
                records_out=self.stats.records_out,
                skipped=self.stats.skipped,
                seconds=round(time.monotonic() - self.started, 3),
            )
            return self.stats
        except BaseException:
            if self.producer is not None:
                _pool.discard(self.producer)  # an open transaction dies with it
                self.producer = None
            raise

    def _start(self) -> Progress | None:
        """A2, A3: a producer that has fenced every other attempt at this part (a retry, a speculative
        copy, a zombie of a killed driver), and the part's progress read after that fence.

        A fresh producer's init_transactions fences, at a cost (docs/design.md, "A fresh producer's
        init_transactions"). A producer this worker kept from an earlier batch fenced the others when it
        was initialised, unless another worker initialised one for the part since; it learns that only
        from a transactional call, so before any row is read it begins the transaction and sends the
        part's committed offset unchanged into it (A5 then goes on in that transaction, whose final offset
        replaces it). Fenced: a fresh producer after all."""
        config = self.config
        if not config.exactly_once:
            self.producer, _ = _pool.acquire(config, None)
            return self._progress(stable=True)
        self.producer, kept = _pool.acquire(config, self.tid)
        if kept:
            try:
                progress = self._progress(stable=True, wait=False)
                if progress is not None and progress.batch_id == self.job.batch_id:
                    return progress  # A4 writes nothing: it needs no fence
                self.producer.begin_transaction(self.log)
                self.producer.send_offsets(
                    [self._unchanged(progress)], _offsets.group_metadata(config), self.log
                )
                return progress
            except (FatalError, OffsetsUnstableError) as exc:
                # Displaced by another worker, or another attempt's transaction is open: fence it.
                self.log.info(
                    "kept producer of the part is not current: starting a fresh one", error=str(exc)
                )
                _pool.discard(self.producer)
                self.stats.producers_replaced += 1
                self.producer = _producer.OutputProducer(config, self.tid)
        self.producer.init_transactions(self.log, known_topic=self.topic)
        return self._progress(stable=True)

    def _unchanged(self, progress: Progress | None) -> tuple[str, int, int, str]:
        """The part's committed offset as it is (none yet: offset 0 without a progress record)."""
        if progress is None:
            return (self.topic, self.part, 0, _offsets.stamp(self.config))
        return (self.topic, self.part, progress.batch_id + 1, progress.metadata(self.config, self.part))

    def run_empty(self) -> PartitionStats:
        """A part with no rows in this run writes nothing; it only checks that the batch's first run did
        not commit rows for it (unfenced: it writes nothing either way)."""
        progress = self._progress(stable=False)
        if progress is not None and progress.batch_id == self.job.batch_id:
            self._compare(progress, Digest())
        return self.stats

    def _progress(self, stable: bool, wait: bool = True) -> Progress | None:
        """A3: the part's committed progress, checked against this batch."""
        progress = read_progress(self.config, [self.part], self.log, stable, wait)[self.part]
        self.stats.committed_before = None if progress is None else progress.batch_id + 1
        if progress is None:
            return None
        if progress.batch_id > self.job.batch_id:
            raise NondeterministicBatchError(
                f"{self.where()}: part {self.part} already recorded batch {progress.batch_id}, a later one:"
                " this is not the Spark checkpoint the parts were written under (it was deleted or"
                " replaced). Nothing was written. Use a new app_id for a new checkpoint, or drop the"
                f" group's progress: kafka-consumer-groups --delete-offsets --group {self.config.app_id}"
                f" --topic {self.topic} (its batches are then written again).",
                batch_id=self.job.batch_id,
                part=self.part,
            )
        if progress.batch_id == self.job.batch_id and progress.parts != self.job.parts:
            raise NondeterministicBatchError(
                f"{self.where()}: the batch's first run committed it in {progress.parts} parts, this run"
                f" places it in {self.job.parts}: a batch's re-run must keep `parts`. Nothing was written"
                " for this part; set parts back until the batch is done.",
                batch_id=self.job.batch_id,
                part=self.part,
            )
        return progress

    def _verify(self, progress: Progress, batches: Iterator[pa.RecordBatch]) -> None:
        """A4: the part is committed for this batch: write nothing, after checking that this run computed
        the same rows."""
        digest = Digest()
        for batch in batches:
            self._check_part(batch)
            digest = digest.plus(self._hashes(batch))
        self.stats.records_in = self.stats.skipped = digest.rows
        self._compare(progress, digest)
        self.log.info("part already committed for this batch: nothing written", rows=digest.rows)

    def _compare(self, progress: Progress, digest: Digest) -> None:
        if progress.digest == digest:
            return
        self.log.error(
            "part's rows differ from its committed run", recorded=progress.digest.rows, now=digest.rows
        )
        raise NondeterministicBatchError(
            f"{self.where()}: its first run committed {progress.digest.rows} rows (digest"
            f" {progress.digest.text()}), this re-run of the batch computed {digest.rows} rows (digest"
            f" {digest.text()}). The query is not deterministic: rand(), uuid(), a UDF that reads the clock"
            " or an outside service, a float aggregate summed in another order, a static table joined"
            " that changed, or a Spark or code upgrade between the runs. Nothing was written for this"
            " part: eos does not write a second, different version of it.",
            batch_id=self.job.batch_id,
            part=self.part,
        )

    def _write(self, batches: Iterator[pa.RecordBatch]) -> None:
        """A5, A6: every row of the part in one transaction, which also commits the part's progress."""
        config, producer = self.config, self.producer
        _crash.point("before_produce")
        if config.exactly_once and not producer.in_transaction:  # a kept producer's is open (A2)
            producer.begin_transaction(self.log)
        began = time.monotonic()
        digest = Digest()
        for batch in batches:
            self._check_part(batch)
            self._check_age(began, digest.rows)
            if self.job.functions.process is not None:
                self.stats.records_out += self._produce_rows(batch, digest.rows)
            else:
                outputs = self._outputs(batch, digest.rows)
                if self.serializers is not None:
                    outputs = self.serializers.outputs(outputs, self.topic, self.part)
                self.stats.records_out += producer.records.produce_outputs(outputs, self.topic, self.part)
            digest = digest.plus(self._hashes(batch))
        self.stats.records_in = digest.rows
        producer.records.flush_and_check(self.topic, self.part)
        self._check_age(began, digest.rows)
        _crash.point("after_produce")
        t0 = time.monotonic()
        progress = Progress(self.job.batch_id, self.job.parts, digest)
        offset = self.job.batch_id + 1
        metadata = progress.metadata(config, self.part)
        if config.exactly_once:
            producer.send_offsets(
                [(self.topic, self.part, offset, metadata)],
                _offsets.group_metadata(config),
                self.log,
            )
            _crash.point("after_send_offsets")
            producer.commit_transaction(self.log)
        else:
            _offsets.commit(config, self.topic, self.part, offset, self.log, metadata)
        seconds = time.monotonic() - t0
        _crash.point("after_commit")
        self.stats.transactions = 1
        self.stats.commit_seconds_max = self.stats.commit_seconds_total = seconds
        if self.job.functions.on_commit is not None:
            self.job.functions.on_commit(
                Commit(
                    app_id=config.app_id,
                    topic=self.topic,
                    partition=self.part,
                    offset=offset,
                    batch_id=self.job.batch_id,
                    transactional_id=self.tid,
                    records=digest.rows,
                    outputs=self.stats.records_out,
                    seconds=seconds,
                )
            )

    def _check_age(self, began: float, rows: int) -> None:
        """Abort before the broker would: a part is one transaction, so it must fit in
        transaction_timeout_ms."""
        seconds = time.monotonic() - began
        if seconds * 1000 < TIMEOUT_SHARE * self.config.transaction_timeout_ms:
            return
        raise PartTooLargeError(
            f"{self.where()}: its transaction has been open {seconds:.1f}s after {rows} rows, past"
            f" {TIMEOUT_SHARE:.0%} of transaction_timeout_ms ({self.config.transaction_timeout_ms}); it was"
            " aborted, nothing of it is visible. A part is written in one transaction: make batches smaller"
            " (maxOffsetsPerTrigger, maxFilesPerTrigger, rowsPerBatch), spread them over more parts"
            " (parts), or raise transaction_timeout_ms (at most the broker's transaction.max.timeout.ms).",
            batch_id=self.job.batch_id,
            part=self.part,
        )

    def _check_part(self, batch: pa.RecordBatch) -> None:
        if PART_COLUMN not in batch.schema.names:
            return
        if not pc.all(pc.equal(batch.column(PART_COLUMN), self.part)).as_py():
            raise NondeterministicBatchError(
                f"{self.where()}: the task holds rows placed in another part: Spark did not keep the"
                " placement (eos_part) as its partitioning. Nothing of this part was written.",
                batch_id=self.job.batch_id,
                part=self.part,
            )

    def _hashes(self, batch: pa.RecordBatch) -> np.ndarray:
        if HASH_COLUMN in batch.schema.names:
            return batch.column(HASH_COLUMN).to_numpy(zero_copy_only=False).view(_U64)
        return row_hashes(batch, [n for n in batch.schema.names if n != PART_COLUMN])

    def _outputs(self, batch: pa.RecordBatch, first: int) -> Outputs:
        """The output records of `batch`, its rows named by their index in the part (first..)."""
        job, layout, topic = self.job, self.job.layout, self.config.output_topic
        last = first + batch.num_rows - 1
        if job.functions.process_batch is not None:
            try:
                result = job.functions.process_batch(batch, State({}))
            except Exception as exc:  # noqa: BLE001 - any user error fails the part and names its rows
                raise ProcessError(
                    f"{self.where()}: process_batch over rows {first}-{last} raised"
                    f" {type(exc).__name__}: {exc}",
                    topic=self.topic,
                    partition=self.part,
                    offset=first,
                ) from exc
            return batch_outputs(
                result,
                default_topic=topic,
                topic=self.topic,
                partition=self.part,
                first=first,
                last=last,
                serialized=_schemas.serialized_fields(self.config),
            )
        return passthrough(batch, layout, topic, offsets=pa.array(range(first, last + 1), pa.int64()))

    def _produce_rows(self, batch: pa.RecordBatch, first: int) -> int:
        """`process(row, state)` per row, its outputs produced; returns how many."""
        from eos._core import _rows

        producer, default_topic, produced = self.producer, self.config.output_topic, 0
        view = State({})
        for i, row in enumerate(_rows.rows(batch, self.job.functions.struct)):
            try:
                outs = list(outputs_of(self.job.functions.process(row, view)))
            except Exception as exc:  # noqa: BLE001 - any user error fails the part and names its row
                raise ProcessError(
                    f"{self.where()}, row {first + i}: process raised {type(exc).__name__}: {exc}",
                    topic=self.topic,
                    partition=self.part,
                    offset=first + i,
                ) from exc
            for out in outs:
                if self.serializers is not None:
                    self.serializers.record(out, out.topic or default_topic, self.topic, self.part, first + i)
                producer.records.produce(out, out.topic or default_topic, self.topic, self.part, first + i)
            produced += len(outs)
        return produced


def row_hashes(batch: pa.RecordBatch, columns: list[str]) -> np.ndarray:
    """Each row's 64-bit hash where Spark did not add one (`format("eos")`): BLAKE2b of its values."""
    data = [batch.column(c).to_pylist() for c in columns]
    out = np.empty(batch.num_rows, dtype=_U64)
    for i, row in enumerate(zip(*data, strict=True)):
        out[i] = int.from_bytes(hashlib.blake2b(repr(row).encode(), digest_size=8).digest(), "little")
    return out


def run_parts(
    job: PartJob, batches: Iterator[pa.RecordBatch], spark_partition: int = 0
) -> Iterator[pa.RecordBatch]:
    """P2, on the executors: one PartTask for the part Spark partition `spark_partition` holds."""
    batches = iter(batches)
    try:
        first = next((b for b in batches if b.num_rows), None)
        if first is None:
            stats = PartTask(job, spark_partition).run_empty()
        else:
            part = (
                first.column(PART_COLUMN)[0].as_py() if PART_COLUMN in first.schema.names else spark_partition
            )
            stats = PartTask(job, part).run(_chain(first, batches))
        yield pa.RecordBatch.from_pylist([attrs.asdict(stats)], schema=STATS_SCHEMA)
    finally:
        _worker.trim_import_caches()


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    for batch in rest:
        if batch.num_rows:
            yield batch
