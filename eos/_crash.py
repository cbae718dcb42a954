"""Named crash points for fault-injection tests: SIGKILL of this very process at a protocol step.

Armed only by `EOS_CRASH_AT=<point>[,<point>...]`, read once at import; unarmed, `point()` is a
constant-time no-op. With `EOS_CRASH_ONCE_DIR` set, each point fires once across all processes
(a marker file is created atomically before the kill), so the retried attempt runs through.
"""

from __future__ import annotations

import os
import signal

POINTS = (
    "before_produce",  # F1: processing started, nothing produced
    "after_produce",  # F2: outputs produced (and flushed), offsets not yet sent
    "after_send_offsets",  # F3: offsets in the transaction, not committed
    "after_commit",  # F4: committed, local state not yet flushed/checkpointed
)

_ARMED = frozenset(p for p in os.environ.get("EOS_CRASH_AT", "").split(",") if p)
_ONCE_DIR = os.environ.get("EOS_CRASH_ONCE_DIR")


def point(name: str) -> None:
    if name not in _ARMED:
        return
    if _ONCE_DIR:
        try:
            fd = os.open(os.path.join(_ONCE_DIR, f"crashed-{name}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)
