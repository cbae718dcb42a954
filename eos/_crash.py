"""Named crash points for fault-injection tests: SIGKILL of this very process at a protocol step
(the steps and faults of docs/protocol.md).

Armed only by `EOS_CRASH_AT=<point>[,<point>...]`, read once at import; unarmed, `point()` is a
constant-time no-op. With `EOS_CRASH_ONCE_DIR` set, each point fires once across all processes
(a marker file is created atomically before the kill), so the retried attempt runs through.

`EOS_PAUSE_AT=<point>` stops the process there instead (SIGSTOP to itself, once, its pid written to
`<EOS_CRASH_ONCE_DIR>/paused-<point>`), so a harness can resume it with SIGCONT after another attempt
has taken the partition over (a zombie) or after the transaction timeout has passed.

`EOS_ABORT_AT=before_commit` likewise makes `abort_point("before_commit")` raise an abortable
error, so the transaction is aborted and redone for real.

`EOS_SIGNAL_AT=<point>` makes the process tell a harness that it reached the point (once, the file
`<EOS_CRASH_ONCE_DIR>/reached-<point>`) and wait there until the harness creates `go-<point>`: so a
fault outside the process (a broker paused) lands exactly before the step that follows.
"""

from __future__ import annotations

import os
import signal
import time

POINTS = (
    "before_produce",  # F1: between steps 5 and 6, nothing produced
    "after_produce",  # F2: after 7b, outputs flushed, offsets not yet sent
    "after_send_offsets",  # F3: after 7c, offsets in the transaction, not committed
    "after_commit",  # F4: after 7d, before 7e: committed, local state not yet applied
    "during_restore",  # F6: in 4b, a state store half restored from its changelog, or its snapshot
    # downloaded and the store wiped, not yet in place
)
#: the points of `eos dlq replay --execute` (not a task's: `make chaos` does not arm them): before its
#: producer fences earlier runs, after a chunk's offsets are in its transaction, after it committed
REPLAY_POINTS = ("replay_before_fence", "replay_after_send_offsets", "replay_after_commit")
#: the point of `eos repair --execute`: its copies and the offset's new witnesses sent, not committed
REPAIR_POINTS = ("repair_before_commit",)

_ARMED = frozenset(p for p in os.environ.get("EOS_CRASH_AT", "").split(",") if p)
_PAUSE_ARMED = frozenset(p for p in os.environ.get("EOS_PAUSE_AT", "").split(",") if p)
_ABORT_ARMED = frozenset(p for p in os.environ.get("EOS_ABORT_AT", "").split(",") if p)
_SIGNAL_ARMED = frozenset(p for p in os.environ.get("EOS_SIGNAL_AT", "").split(",") if p)
#: how long a signalled point waits for its harness
_SIGNAL_WAIT_S = 120.0
_ONCE_DIR = os.environ.get("EOS_CRASH_ONCE_DIR")


def _first_time(marker: str) -> bool:
    """With EOS_CRASH_ONCE_DIR: True for exactly one caller across all processes."""
    if not _ONCE_DIR:
        return True
    try:
        fd = os.open(os.path.join(_ONCE_DIR, marker), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    return True


def point(name: str) -> None:
    if name in _SIGNAL_ARMED and _ONCE_DIR and _first_time(f"reached-{name}"):
        go, deadline = os.path.join(_ONCE_DIR, f"go-{name}"), time.monotonic() + _SIGNAL_WAIT_S
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.01)
    if name in _PAUSE_ARMED and _first_time(f"paused-{name}"):
        os.kill(os.getpid(), signal.SIGSTOP)
    if name in _ARMED and _first_time(f"crashed-{name}"):
        os.kill(os.getpid(), signal.SIGKILL)


def abort_point(name: str) -> None:
    if name in _ABORT_ARMED and _first_time(f"aborted-{name}"):
        from eos.errors import TransactionAbortableError

        raise TransactionAbortableError(f"injected abortable error at {name} (EOS_ABORT_AT)")
