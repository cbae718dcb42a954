"""What the bench's modules share: the shape of the input every row reads, the commit interval of the eos
rows and the plain transactional loop, the log line and milliseconds for the report."""

from __future__ import annotations

import time

import attrs

import eos

PARTITIONS = 4
VALUE_BYTES = 100
KEYS = 10_000
#: eos's default, for the eos rows and the plain transactional loop alike
COMMIT_EVERY = attrs.fields(eos.Config).commit_every.default


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)
