"""Step 3b (and A4 for a part): a committed transaction read back before anything it covers is skipped.
Its offset's stamp names its witnesses (`eos._kafka._witness`); a worker that saw the transaction
commit, or read it back once, does not read it again."""

from __future__ import annotations

import time
from collections.abc import Mapping

from eos._kafka import _pool, _witness
from eos.config import Config


def aborted(
    config: Config,
    transactional_id: str | None,
    stamp: str | None,
    witnesses: Mapping[tuple[str, int], int],
    log,
) -> tuple[tuple[str, int, int], ...]:
    """The witnesses of the transaction stamped `stamp` that the broker aborted: () where every one is
    visible read_committed (or gone), or where this worker has seen the transaction commit."""
    if not witnesses or _pool.is_proven(transactional_id, stamp):
        return ()
    started = time.monotonic()
    verdict = _witness.invisible(config, witnesses, log)
    if verdict.aborted:
        log.error("committed transaction lost on some partitions", lost=list(verdict.aborted))
        return verdict.aborted
    _pool.proven(transactional_id, stamp)
    log.info(
        "committed transaction read back",
        partitions=len(witnesses),
        ms=round((time.monotonic() - started) * 1000, 1),
    )
    return ()


def listed(lost: tuple[tuple[str, int, int], ...]) -> str:
    """The lost partitions as an error names them."""
    return ", ".join(f"{t}/{p} (its records up to offset {o})" for t, p, o in lost)


#: what an error says of the broker's part in it
CAUSE = (
    "The broker committed it on the others and aborted it on these (read_uncommitted shows its records,"
    " then an abort): a transaction coordinator restarted before the controller fenced it can do this"
    " (docs/fault-runs.md)."
)

#: the first way on an error offers: the aborted records are still in the log (`eos repair`)
REPAIR = (
    "To copy exactly those records back, once, and go on: stop the query, run `eos repair --app {app}`"
    " (a dry run) then with --execute, and start the query again. "
)
