"""eos._core._worker: zipimporters leave sys.path_importer_cache; imports from the zip still work; `reset`
leaves a worker as a fresh one starts, every per-process cache of the executors' side empty."""

from __future__ import annotations

import importlib
import sys
import zipfile

from eos import _log
from eos._core import _rows, _worker
from eos._kafka import _changelog, _clients, _pool, _topics
from eos._registry import _decoders, _serializers


def test_trim_drops_the_archive_importers_and_imports_still_work(tmp_path, monkeypatch):
    archive = tmp_path / "lib.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zpkg/__init__.py", "")
        zf.writestr("zpkg/sub/__init__.py", "")
        zf.writestr("zpkg/sub/a.py", "X = 1\n")
        zf.writestr("zpkg/sub/b.py", "Y = 2\n")
    monkeypatch.syspath_prepend(str(archive))
    importlib.invalidate_caches()
    import zpkg.sub.a  # noqa: F401

    cached = [p for p in sys.path_importer_cache if p.startswith(str(archive))]
    assert str(archive) in cached and len(cached) > 1, "the zip and its directories have importers"
    assert _worker.trim_import_caches() >= len(cached)
    assert not [p for p in sys.path_importer_cache if p.startswith(str(archive))]
    importlib.invalidate_caches()  # what PySpark's worker does before every task: now nothing to re-read

    import zpkg.sub.b

    assert zpkg.sub.b.Y == 2
    for name in ("zpkg.sub.b", "zpkg.sub.a", "zpkg.sub", "zpkg"):
        sys.modules.pop(name, None)


def test_reset_empties_every_cache_the_worker_keeps():
    _pool._proven["app:in:0"] = "stamp"
    _clients._auth_failures[("x",)] = object()
    _changelog._ensured["changelog"] = object()
    _topics._known_parts[("b:9092", "app-eos-parts")] = 4
    _serializers._resolved.add(("subject",))
    _serializers._workers[("settings",)] = object()
    _decoders._deserializers[("settings",)] = object()
    _rows.row_type(("a", "b"))
    _log._configured = True  # noqa: SLF001 - what forget_setup clears
    _worker.reset()
    assert _pool.cached() == 0 and not _pool._proven
    assert not _clients._auth_failures and not _clients._admins and not _clients._consumers
    assert not _changelog._ensured and not _topics._known_parts
    assert not _serializers._resolved and not _serializers._workers and not _serializers._clients
    assert not _decoders._deserializers and not _decoders._readers
    assert _rows.row_type.cache_info().currsize == 0
