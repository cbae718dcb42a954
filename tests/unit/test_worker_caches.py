"""eos._core._worker: zipimporters leave sys.path_importer_cache; imports from the zip still work."""

from __future__ import annotations

import importlib
import sys
import zipfile

from eos._core import _worker


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
