"""What a Python worker keeps between tasks: every per-process cache eos has, listed here with the one
`reset` that tests use, and the trimming of PySpark's import caches that keeps a task's set-up cheap.

Caches of the executors' side (each lives beside the code that fills it; `reset` clears every one):
    eos._kafka._pool            kept producers, one per transactional.id (at most max_producers_per_worker),
                                and the stamps this worker saw commit
    eos._kafka._clients         admin and consumer clients per settings, and the admin's refused credentials
    eos._kafka._changelog       changelogs already checked, with their partition counts
    eos._kafka._topics          progress topics known to have enough partitions
    eos._registry._serializers  registry clients, subjects resolved, serializers per settings
    eos._registry._decoders     readers (with their writer schemas) and deserializers per settings
    eos._core._rows             the row views' field lookups per schema (an lru_cache, 64 schemas)
    eos._log                    whether structlog was set up

The driver's own (a StreamingQueryListener's runs, the metrics endpoint and its families) live in
`eos._spark._listener` and `eos._spark._metrics`, for the life of the driver's process.

PySpark's own import caches: before every task, its worker calls `importlib.invalidate_caches()`
(`setup_spark_files` in `pyspark/worker_util.py`). Spark's workers import pyspark from `pyspark.zip`,
and every zipimporter in `sys.path_importer_cache` then re-reads its whole archive directory, in pure
Python: there is one for each package directory ever imported from the zip (`pyspark.zip/pyspark/sql`,
...), each reading the same archive. `make bench` profiles showed it as the largest single cost of a
worker (docs/design.md, "PySpark's per-task import-cache reset").

`trim_import_caches` drops every cached zipimporter, those of the archives on `sys.path` included (those
alone still showed in a worker's profile). Nothing is lost: modules already imported stay in
`sys.modules`, and Python recreates an importer the next time something is imported from that archive or
directory.
"""

from __future__ import annotations

import sys
import zipimport

from eos import _log
from eos._core import _rows
from eos._kafka import _changelog, _clients, _pool, _topics
from eos._registry import _decoders, _serializers


def reset() -> None:
    """Close and forget everything this process keeps between tasks, as a fresh worker would start."""
    _pool.clear()
    _clients.clear()
    _changelog.forget_ensured()
    _topics.forget_parts_topics()
    _serializers.clear()
    _decoders.clear()
    _rows.forget_schemas()
    _log.forget_setup()


def trim_import_caches() -> int:
    """Drop zipimporters from sys.path_importer_cache; returns how many."""
    cache = sys.path_importer_cache
    stale = [path for path, finder in list(cache.items()) if isinstance(finder, zipimport.zipimporter)]
    for path in stale:
        cache.pop(path, None)
    return len(stale)
