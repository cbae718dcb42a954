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
from urllib.parse import quote, unquote

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from eos import _crash, _names
from eos._core import _proof, _worker
from eos._core._arrow import Layout
from eos._core._fence import Fence
from eos._core._spec import Functions
from eos._core._stats import STATS_SCHEMA, PartitionStats
from eos._core._transaction import Transaction
from eos._core._writer import Writer
from eos._kafka import _offsets, _producer, _topics, _witness
from eos._log import get_logger
from eos._scope import PartitionScope
from eos.config import Config
from eos.errors import (
    CommitLostError,
    FatalError,
    NondeterministicBatchError,
    PartTooLargeError,
    RecordError,
    TransactionAbortableError,
)
from eos.state import State

#: the part a row is placed in, and the hash of its content (added by `place`, read by the task)
PART_COLUMN = "eos_part"
HASH_COLUMN = "eos_h"
#: a row's index in its part, added by the task: what names a row of a part (its "offset")
ROW_COLUMN = "eos_row"
#: rows written between two checks of the part's transaction's age
_CHUNK = 10_000
#: a part's one transaction is aborted once it has been open this share of transaction_timeout_ms
TIMEOUT_SHARE = 0.8
#: why a part's task replaces a kept producer that another worker's fenced
STALE_PART = "kept producer of the part is not current: starting a fresh one"

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
class RowPlacement:
    """How P1 placed a batch's rows: in `parts` parts (None: Spark's own partitions, `format("eos")`),
    by `by`: "content" (a hash of each row), "key" (the `key` column; rows without one by content) or
    "columns:<a>,<b>" (`part_columns`). A re-run of a batch must place its rows as its first run did."""

    parts: int | None
    by: str | None

    @classmethod
    def of(cls, config: Config, key: str | None) -> RowPlacement:
        """The placement `config` asks for, for a batch with (`key`) or without a key column."""
        return cls.chosen(config.parts, (config.part_columns or "").split(","), key)

    @classmethod
    def chosen(cls, parts: int, columns: Iterable[str], key: str | None) -> RowPlacement:
        """`parts` parts by `columns` where any are named, else by the key column, else by content."""
        named = [c.strip() for c in columns if c.strip()]
        if named:
            return cls(parts, "columns:" + ",".join(named))
        return cls(parts, "key" if key else "content")

    @property
    def columns(self) -> list[str]:
        """The columns of "columns:..." (else none)."""
        return self.by.split(":", 1)[1].split(",") if self.by and self.by.startswith("columns:") else []

    def describe(self) -> str:
        how = {"content": "by row content", "key": "by the key column"}.get(
            self.by or "", f"by part_columns={','.join(self.columns)!r}" if self.columns else "(unrecorded)"
        )
        return f"parts={self.parts} {how}"


@attrs.frozen
class Progress:
    """What part i's committed offset says: batch `batch_id` placed as `placement` is written, `digest`
    its rows. The offset itself is batch_id + 1 (Kafka's "next to process")."""

    batch_id: int
    placement: RowPlacement
    digest: Digest
    #: the committing transaction's witnesses (`eos._kafka._witness`), and the whole metadata they came in
    witnesses: dict[tuple[str, int], int] = attrs.field(factory=dict, eq=False)
    stamp: str | None = attrs.field(default=None, eq=False)

    @property
    def parts(self) -> int | None:
        return self.placement.parts

    def metadata(
        self, config: Config, part: int, witnesses: dict[tuple[str, int], int] | None = None, log=None
    ) -> str:
        d = self.digest
        parts = "" if self.parts is None else str(self.parts)
        by = "" if self.placement.by is None else f";by={quote(self.placement.by, safe=':,')}"
        rest = (
            f";mode=any;batch={self.batch_id};part={part};parts={parts}{by};rows={d.rows};digest={d.text()}"
        )
        return _offsets.stamp(config, witnesses=witnesses, log=log, reserve=len(rest)) + rest

    @classmethod
    def of(cls, entry: _offsets.Committed | None) -> Progress | None:
        fields = _offsets.fields(entry.metadata) if entry is not None else None
        if fields is None or fields.get("mode") != "any":
            return None
        digest = fields.get("digest", "")
        return cls(
            batch_id=int(fields["batch"]),
            placement=RowPlacement(
                int(fields["parts"]) if fields.get("parts") else None,
                unquote(fields["by"]) if "by" in fields else None,
            ),
            digest=Digest(int(fields["rows"]), int(digest[:16], 16), int(digest[16:], 16)),
            witnesses=_witness.decode(fields.get(_witness.FIELD)),
            stamp=entry.metadata,
        )


def batch_placement(config: Config, batch_id: int, log=None) -> RowPlacement | None:
    """P0, on the driver before any part of batch `batch_id` writes: the placement its first run
    committed parts with (None: no part of it is committed). Reads every partition of the progress topic
    (a first run may have used more parts than this one), the last committed offsets (an open
    transaction of a part is that part's to fence)."""
    topic = _names.parts_topic(config.app_id)
    count = _topics.partitions(config, [topic]).get(topic) or 0
    found = {
        progress.placement
        for progress in read_progress(config, range(count), log, stable=False).values()
        if progress is not None and progress.batch_id == batch_id
    }
    if len(found) > 1:
        raise NondeterministicBatchError(
            f"batch {batch_id}: its parts were committed under different placements"
            f" ({'; '.join(sorted(p.describe() for p in found))}), so no placement writes the rest of it"
            " exactly once. Nothing more of it was written.",
            batch_id=batch_id,
            part=-1,
        )
    return next(iter(found), None)


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
class PartSpec:
    """What every part's task of one batch needs; built by the sink (or the data source)."""

    config: Config
    batch_id: int
    layout: Layout
    #: the number of parts; None where Spark's own partitioning made them (`format("eos")`)
    parts: int | None
    functions: Functions = attrs.field(factory=Functions)
    #: how P1 placed the rows (None: not recorded, `format("eos")`)
    placement: RowPlacement | None = None

    @property
    def recorded(self) -> RowPlacement:
        return self.placement if self.placement is not None else RowPlacement(self.parts, None)


class PartTask:
    """One part of one batch: A1-A6 of docs/protocol.md."""

    def __init__(self, job: PartSpec, part: int) -> None:
        self.job = job
        self.config = config = job.config
        self.part = part
        self.topic = _names.parts_topic(config.app_id)
        tid = _names.part_transactional_id(config.app_id, part) if config.exactly_once else None
        self.log = get_logger(
            "eos.task", app_id=config.app_id, part=part, transactional_id=tid, batch_id=job.batch_id
        )
        self.stats = PartitionStats(self.topic, part, tid)
        self.tid = tid
        self.fence = Fence(config, tid, (self.topic, part), self.stats, self.log, trusts_own_commit=False)
        self.layout = attrs.evolve(job.layout, offset=ROW_COLUMN)
        self.started = time.monotonic()

    def where(self) -> str:
        return f"batch {self.job.batch_id}, part {self.part}"

    def run(self, batches: Iterator[pa.RecordBatch]) -> PartitionStats:
        try:
            return self._run(batches)
        except RecordError as exc:  # its coordinates are the part's progress partition and row index
            raise exc.named(f"{self.where()}, row {exc.offset}") from exc.__cause__

    def _run(self, batches: Iterator[pa.RecordBatch]) -> PartitionStats:
        try:
            progress = self._start()  # A2, A3
            if progress is not None and progress.batch_id == self.job.batch_id:
                self._verify(progress, batches)  # A4
            else:
                self._write(batches)  # A5, A6
            self.fence.release()
            self.log.info(
                "part written",
                records_in=self.stats.records_in,
                records_out=self.stats.records_out,
                skipped=self.stats.skipped,
                seconds=round(time.monotonic() - self.started, 3),
            )
            return self.stats
        except BaseException:
            self.fence.discard()  # an open transaction dies with it
            raise

    @property
    def producer(self) -> _producer.OutputProducer | None:
        return self.fence.producer

    def _start(self) -> Progress | None:
        """A2, A3: a producer that has fenced every other attempt at this part (a retry, a speculative
        copy, a zombie of a killed driver), and the part's progress read after that fence (`Fence`).
        A kept producer without a commit of its own proves it is current before any row is read: it
        sends the part's committed offset unchanged into a new transaction (A5 then goes on in that
        transaction, whose final offset replaces it). Fenced: a fresh producer after all. A part
        already committed for this batch (A4) writes nothing and needs no such proof."""
        progress = self._progress(self.fence.start(reuse=True))
        if not self.fence.unchecked or (progress is not None and progress.batch_id == self.job.batch_id):
            return progress
        try:
            self.fence.check_current(self._unchanged(progress))
        except FatalError as exc:  # displaced by another worker
            progress = self._progress(self.fence.replace(STALE_PART, exc))
        return progress

    def _unchanged(self, progress: Progress | None) -> tuple[str, int, int, str]:
        """The part's committed offset as it is (none yet: offset 0 without a progress record)."""
        if progress is None:
            return (self.topic, self.part, 0, _offsets.stamp(self.config))
        return (self.topic, self.part, progress.batch_id + 1, progress.metadata(self.config, self.part))

    def run_empty(self) -> PartitionStats:
        """A part with no rows in this run writes nothing; it only checks that the batch's first run did
        not commit rows for it (unfenced: it writes nothing either way)."""
        entry = _offsets.committed_entries(self.config, [(self.topic, self.part)], self.log, stable=False)
        progress = self._progress(entry[(self.topic, self.part)])
        if progress is not None and progress.batch_id == self.job.batch_id:
            self._compare(progress, Digest())
        return self.stats

    def _progress(self, entry: _offsets.Committed | None) -> Progress | None:
        """A3: the part's committed progress (`entry`, its offset), checked against this batch."""
        tp = (self.topic, self.part)
        _offsets.check_stamps(self.config, {tp: entry})
        progress = Progress.of(entry)
        self.stats.committed_before = None if progress is None else progress.batch_id + 1
        if progress is None:
            return None
        if progress.batch_id > self.job.batch_id:
            raise NondeterministicBatchError(
                f"{self.where()}: part {self.part} already recorded batch {progress.batch_id}, a later one:"
                " this is not the Spark checkpoint the parts were written under (it was deleted or"
                " replaced). Nothing was written. Use a new app_id for a new checkpoint, or drop the"
                f" group's progress: `eos offsets reset --app {self.config.app_id} --topic {self.topic}"
                " --to earliest --drop-progress --execute` (its batches are then written again).",
                batch_id=self.job.batch_id,
                part=self.part,
            )
        first = progress.placement
        if progress.batch_id == self.job.batch_id and not same_placement(first, self.job.recorded):
            raise NondeterministicBatchError(
                f"{self.where()}: the batch's first run committed it placed {first.describe()},"
                f" this run places it {self.job.recorded.describe()}: a batch's re-run must keep its"
                " placement (the sink does, reading it before any part writes). Nothing was written for"
                " this part.",
                batch_id=self.job.batch_id,
                part=self.part,
            )
        return progress

    def _verify(self, progress: Progress, batches: Iterator[pa.RecordBatch]) -> None:
        """A4: the part is committed for this batch: write nothing, after checking that this run computed
        the same rows."""
        lost = _proof.aborted(self.config, self.tid, progress.stamp, progress.witnesses, self.log)
        if lost:
            raise CommitLostError(
                f"{self.where()}: the transaction that committed this part is not visible on {len(lost)} of"
                f" the {len(progress.witnesses)} partitions it wrote: {_proof.listed(lost)}. {_proof.CAUSE}"
                " eos stops rather than count the part as written; nothing of it was written again."
                f" {_proof.REPAIR.format(app=self.config.app_id)}To write"
                " the batch's part again (its outputs on the other partitions are then written twice), drop"
                f" its progress: `eos offsets reset --app {self.config.app_id}"
                f' --to \'{{"{self.topic}": {{"{self.part}": -2}}}}\' --drop-progress --execute`',
                topic=self.topic,
                partition=self.part,
                offset=self.job.batch_id + 1,
                lost=lost,
            )
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
        """A5, A6: every row of the part in one transaction (`PartTransaction`: the same commit steps as an
        input partition's), which also commits the part's progress. The rows go through the same `Writer`
        as an input partition's, each named by its index in the part (ROW_COLUMN)."""
        config, producer = self.config, self.producer
        _crash.point("before_produce")
        scope = PartitionScope(config, self.topic, self.part, self.job.batch_id, self.tid, self.log)
        transaction = PartTransaction(scope, producer)  # a kept producer's is open already (A2)
        transaction.where = self.where()
        writer = Writer(attrs.evolve(self.job, layout=self.layout), scope, _Stateless(producer))
        digest = Digest()
        try:
            for batch in batches:
                self._check_part(batch)
                hashes = self._hashes(batch)
                rows = _with_rows(batch, digest.rows)
                for at in range(0, rows.num_rows, _CHUNK):  # the age is checked between chunks
                    transaction.check_age()
                    writer.write(rows.slice(at, _CHUNK), transaction, may_stop=False)
                digest = digest.plus(hashes)
            self.stats.records_in = digest.rows
            producer.records.flush_and_check(self.topic, self.part)
            transaction.check_age()
            transaction.progress = Progress(self.job.batch_id, self.job.recorded, digest)
            seconds = transaction.commit()
        except (FatalError, TransactionAbortableError) as exc:
            raise transaction.outlived(exc) or exc from None  # 8e
        transaction.report(self.stats, seconds, self.job.functions.on_commit)

    def _check_part(self, batch: pa.RecordBatch) -> None:
        if PART_COLUMN not in batch.schema.names:
            return
        if not pc.all(pc.equal(batch.column(PART_COLUMN), self.part)).as_py():
            raise NondeterministicBatchError(
                f"{self.where()}: the task holds rows placed in another part: Spark did not keep the"
                " placement (eos_part) as its partitioning (a union, coalesce or repartition after"
                " eos.place: call it last, just before writeStream). Nothing of this part was written.",
                batch_id=self.job.batch_id,
                part=self.part,
            )

    def _hashes(self, batch: pa.RecordBatch) -> np.ndarray:
        if HASH_COLUMN in batch.schema.names:
            return batch.column(HASH_COLUMN).to_numpy(zero_copy_only=False).view(_U64)
        return row_hashes(batch, [n for n in batch.schema.names if n != PART_COLUMN])


class PartTransaction(Transaction):
    """A part's one transaction: it commits the part's progress (`Progress`: batch, placement, digest)
    with its witnesses, as the offset of the part's partition of the progress topic. It must fit in
    transaction_timeout_ms: a part has no offset to resume from."""

    progress: Progress | None = None
    #: how errors name the part ("batch N, part i")
    where: str = ""

    def offset_record(self, witnesses):
        part = self.scope.partition
        return self.progress.batch_id + 1, self.progress.metadata(self.config, part, witnesses, self.log)

    def check_age(self) -> None:
        """Abort before the broker would: at TIMEOUT_SHARE of transaction_timeout_ms."""
        if self.age() * 1000 >= TIMEOUT_SHARE * self.config.transaction_timeout_ms:
            raise self.too_slow(self.age(), None)

    def too_slow(self, seconds: float, exc: Exception | None) -> PartTooLargeError:
        """8e for a part: a part too large (or a process function too slow), not a zombie."""
        cause = "" if exc is None else f" ({exc})"
        return PartTooLargeError(
            f"{self.where}: its transaction has been open {seconds:.1f}s after {self.records} rows, past"
            f" {TIMEOUT_SHARE:.0%} of transaction_timeout_ms ({self.config.transaction_timeout_ms}){cause};"
            " it was aborted, nothing of it is visible. A part is written in one transaction: make batches"
            " smaller (maxOffsetsPerTrigger, maxFilesPerTrigger, rowsPerBatch), spread them over more parts"
            " (parts), or raise transaction_timeout_ms (at most the broker's transaction.max.timeout.ms).",
            batch_id=self.scope.batch_id,
            part=self.scope.partition,
        )


@attrs.define
class _Stateless:
    """A part's `Writer` target (`eos._core._writer.Target`): its producer, and no state."""

    producer: Any
    state: Any = None
    view: Any = attrs.field(factory=lambda: State({}))


def _with_rows(batch: pa.RecordBatch, first: int) -> pa.RecordBatch:
    """`batch` with ROW_COLUMN: each row's index in the part (first..), what names it where an input
    record's offset would."""
    rows = pa.array(np.arange(first, first + batch.num_rows, dtype=np.int64))
    return batch.append_column(ROW_COLUMN, rows)


def same_placement(first: RowPlacement, this: RowPlacement) -> bool:
    """Whether `this` run places rows as `first` did (a placement recorded before `by` was: by parts)."""
    return first.parts == this.parts and (first.by is None or this.by is None or first.by == this.by)


def row_hashes(batch: pa.RecordBatch, columns: list[str]) -> np.ndarray:
    """Each row's 64-bit hash where Spark did not add one (`format("eos")`): BLAKE2b of its values."""
    data = [batch.column(c).to_pylist() for c in columns]
    out = np.empty(batch.num_rows, dtype=_U64)
    for i, row in enumerate(zip(*data, strict=True)):
        out[i] = int.from_bytes(hashlib.blake2b(repr(row).encode(), digest_size=8).digest(), "little")
    return out


def run_parts(
    job: PartSpec, batches: Iterator[pa.RecordBatch], spark_partition: int = 0
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
            if part != spark_partition:
                raise NondeterministicBatchError(
                    f"batch {job.batch_id}, Spark partition {spark_partition}: holds rows placed in part"
                    f" {part}: Spark did not keep the placement as its partitioning (a union, coalesce or"
                    " repartition after eos.place: call it last, just before writeStream). Nothing of this"
                    " part was written.",
                    batch_id=job.batch_id,
                    part=part,
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
