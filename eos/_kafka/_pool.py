"""The producers a Python worker keeps between tasks: `init_transactions()` costs a coordinator round
trip and fences every older incarnation, so a producer is kept across batches in the same worker. A kept
producer may have been fenced meanwhile by another worker that took the same partition; the task
notices at its first transactional call and starts again with a fresh one (`eos/_core/_incarnation.py`).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import threading
from pathlib import Path

from eos._fs import private_directory
from eos._kafka._clients import producer_settings
from eos._kafka._producer import OutputProducer
from eos.config import Config

_lock = threading.Lock()
_cache: dict[tuple, OutputProducer] = {}
#: per transactional.id, the offset stamp this worker last saw commit (or read back whole): a task
#: starting from it need not read its witnesses back (`eos._kafka._witness`)
_proven: dict[str, str] = {}
_MAX_PROVEN = 10_000


def _cache_key(config: Config, transactional_id: str | None) -> tuple:
    settings = producer_settings(config, transactional_id)
    return tuple(sorted((k, str(v)) for k, v in settings.items())) + (config.operation_timeout_ms,)


def acquire(config: Config, transactional_id: str | None) -> tuple[OutputProducer, bool]:
    """The worker's producer for this transactional.id and whether it was kept from an earlier task."""
    key = _cache_key(config, transactional_id)
    with _lock:
        producer = _cache.pop(key, None)
    if producer is not None:
        return producer, True
    return OutputProducer(config, transactional_id), False


def release(producer: OutputProducer) -> None:
    """Keep a healthy producer (no open transaction) for the next task in this worker; beyond
    `max_producers_per_worker` producers, close the least recently used (each holds a librdkafka instance:
    threads, connections and buffers; one per input partition ever seen would grow without bound)."""
    if producer.in_transaction:
        discard(producer)
        return
    key = _cache_key(producer.config, producer.transactional_id)
    with _lock:
        closing = [_cache.pop(key, None)]
        _cache[key] = producer  # a dict keeps insertion order: the most recently used is last
        while len(_cache) > producer.config.max_producers_per_worker:
            closing.append(_cache.pop(next(iter(_cache))))
    for old in closing:
        if old is not None and old is not producer:
            discard(old)


def proven(transactional_id: str | None, stamp: str) -> None:
    """This worker saw the transaction stamped `stamp` commit, or read all of it back. Kept in memory
    and in a file the host's other Python workers read: Spark hands a partition's next task to any
    idle worker of the executor, which would otherwise read the witnesses back each time."""
    if transactional_id is None:
        return
    with _lock:
        _proven.pop(transactional_id, None)
        _proven[transactional_id] = stamp
        while len(_proven) > _MAX_PROVEN:
            _proven.pop(next(iter(_proven)))
    path = _proven_file(transactional_id)
    if path is None:
        return
    try:
        partial = path.with_name(f"{path.name}.{os.getpid()}")
        partial.write_text(stamp)
        os.replace(partial, path)
    except OSError:
        pass  # the host's other workers read the witnesses back instead


def is_proven(transactional_id: str | None, stamp: str | None) -> bool:
    if stamp is None or transactional_id is None:
        return False
    with _lock:
        if _proven.get(transactional_id) == stamp:
            return True
    path = _proven_file(transactional_id)
    try:
        return path is not None and path.read_text() == stamp
    except OSError:
        return False


def _proven_file(transactional_id: str) -> Path | None:
    """Where this host keeps the stamp a transactional id was last seen to commit (a directory only
    this user can write: a stamp found there skips a read-back)."""
    directory = private_directory("eos-proven")
    if directory is None:
        return None
    return directory / hashlib.sha256(transactional_id.encode()).hexdigest()[:32]


def cached() -> int:
    """How many producers this worker keeps."""
    with _lock:
        return len(_cache)


def discard(producer: OutputProducer) -> None:
    try:
        producer.close()
    except Exception:  # noqa: BLE001 - a broken producer is being thrown away anyway
        pass


@atexit.register
def clear() -> None:
    """Close every kept producer (at exit, and `eos._core._worker.reset`)."""
    with _lock:
        producers = list(_cache.values())
        _cache.clear()
        _proven.clear()
    for producer in producers:
        discard(producer)
