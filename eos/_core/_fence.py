"""Steps 1-3 of docs/protocol.md (A2-A3 for a part), the one fence of eos: for one transactional id, a
producer that has fenced every older attempt (a retry, a speculative copy, a zombie), and the committed
offset read after that fence. `Incarnation` (an input partition) and `PartTask` (a part) keep only their
policy: what the committed offset means, and when a kept producer proves it is current."""

from __future__ import annotations

import time

from eos._core._stats import PartitionStats
from eos._kafka import _offsets, _pool, _producer
from eos.config import Config
from eos.errors import OffsetsUnstableError

#: why a task replaces a kept producer that an open transaction of another attempt holds the offset for
UNSTABLE = "an open transaction holds the committed offset: fencing it with a fresh producer"
#: why a task replaces a kept producer that another producer committed after
STALE = "a newer producer committed this partition: replacing the kept one"


class Fence:
    """The producer one transactional id writes with, and the committed offset it read once fenced.

    A fresh producer's init_transactions fences, at a cost (docs/design.md, "A fresh producer's
    init_transactions"). A producer the worker kept from an earlier task fenced the others when it was
    initialised, unless a producer of another worker was initialised for the id since (Spark hands a
    partition's next task to whichever worker is free). The kept producer remembers the stamp of its
    last commit: another stamp committed means another producer committed since, so it is replaced at
    once. Its own stamp means nobody committed since, and one initialised without committing fences it
    at its first request (8d): a caller that can redo what it wrote by then (`trusts_own_commit`: an
    input partition's task, from its redo buffer) takes the kept producer as it is. Else the kept
    producer proves itself current at its first transactional call (`check_current`), which the caller
    makes when its policy allows (a part's rows come from an iterator that cannot be read twice)."""

    def __init__(
        self,
        config: Config,
        transactional_id: str | None,
        tp: tuple[str, int],
        stats: PartitionStats,
        log,
        trusts_own_commit: bool,
    ) -> None:
        self.config = config
        self.transactional_id = transactional_id
        self.tp = tp
        self.stats = stats
        self.log = log
        self.trusts_own_commit = trusts_own_commit
        self.producer: _producer.OutputProducer | None = None
        #: the producer was kept from an earlier task
        self.kept = False
        #: a kept producer that has yet to prove itself current (`check_current`)
        self.unchecked = False

    def start(self, reuse: bool) -> _offsets.Committed | None:
        """Steps 1-3 with the worker's kept producer (`reuse`) or a fresh one; the committed offset."""
        config = self.config
        if reuse:
            self.producer, self.kept = _pool.acquire(config, self.transactional_id)
            self.stats.producers_created += not self.kept
        else:
            self.producer, self.kept = _producer.OutputProducer(config, self.transactional_id), False
        if config.exactly_once and not self.producer.initialized:
            t = time.monotonic()
            self.producer.init_transactions(self.log, known_topic=self.tp[0])  # step 2
            self.stats.init_seconds += time.monotonic() - t
        kept = self.kept and config.exactly_once
        t = time.monotonic()
        try:
            entry = _offsets.committed_entries(config, [self.tp], self.log, wait=not kept).get(self.tp)
        except OffsetsUnstableError:
            if not kept:
                raise
            # A kept producer cannot end another attempt's open transaction (a worker killed between its
            # offsets and its commit holds the offset until transaction.timeout.ms); a fresh one's
            # init_transactions does.
            self.stats.offsets_seconds += time.monotonic() - t
            return self.replace(UNSTABLE)
        self.stats.offsets_seconds += time.monotonic() - t
        self.unchecked = False
        if kept:
            mine = self.producer.committed_stamp
            if mine is not None and (entry is None or entry.metadata != mine):
                return self.replace(STALE)
            self.unchecked = mine is None or not self.trusts_own_commit
        return entry

    def replace(self, why: str, exc: Exception | None = None) -> _offsets.Committed | None:
        """Steps 1-3 again with a fresh producer, whose init_transactions fences the others."""
        self.log.info(why, **({} if exc is None else {"error": str(exc)}))
        if self.producer is not None:
            _pool.discard(self.producer)
            self.producer = None
        self.stats.producers_replaced += 1
        return self.start(reuse=False)

    def check_current(self, unchanged: tuple[str, int, int, str]) -> None:
        """Step 2 (A2) for a kept producer without a commit of its own: it sends the committed offset,
        `unchanged` (topic, partition, offset, metadata), into a new transaction, which that call
        begins; a displaced producer is refused there (FencedError), before anything is written. The
        transaction's own offset later replaces it."""
        self.unchecked = False
        t = time.monotonic()
        self.producer.send_offsets([unchanged], _offsets.group_metadata(self.config), self.log)
        self.stats.check_seconds += time.monotonic() - t

    def release(self) -> None:
        """The task is done: the producer goes back to the worker's pool (one with a transaction still
        open is closed instead)."""
        if self.producer is not None:
            _pool.release(self.producer)
            self.producer = None

    def discard(self) -> None:
        """After an error: the producer is thrown away (its transaction dies with it)."""
        if self.producer is not None:
            _pool.discard(self.producer)
            self.producer = None
