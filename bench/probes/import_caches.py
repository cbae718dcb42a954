"""What PySpark's per-task `importlib.invalidate_caches()` costs a Python worker (`setup_spark_files` in
`pyspark/worker_util.py` calls it before every task), with the zipimporters a worker accumulates and
after `eos._core._worker.trim_import_caches` dropped them. No Spark runs: this process imports
`pyspark.worker` from the `pyspark.zip` and py4j zip that the pyspark package ships, as Spark's workers
do, which leaves one zipimporter per package directory it imported from.

    .venv/bin/python -m bench.probes.import_caches [--rounds 10]

Prints the milliseconds of one `invalidate_caches()`, median over `--rounds`, with every zipimporter
cached, with only those of the archives on `sys.path` (what the first trim kept), and after
`trim_import_caches()`.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
import zipimport
from importlib.util import find_spec
from pathlib import Path


def zip_importers() -> list[str]:
    return [
        path for path, finder in sys.path_importer_cache.items() if isinstance(finder, zipimport.zipimporter)
    ]


def invalidate_ms(rounds: int) -> float:
    took = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        importlib.invalidate_caches()
        took.append((time.perf_counter() - t0) * 1000)
    return statistics.median(took)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    if "pyspark" in sys.modules:
        raise SystemExit(
            "pyspark is already imported from the installed package; run this in a fresh process"
        )
    lib = Path(find_spec("pyspark").submodule_search_locations[0]) / "python" / "lib"
    archives = sorted(str(p) for p in lib.glob("*.zip"))
    sys.path[:0] = archives
    importlib.import_module("pyspark.worker")
    if not sys.modules["pyspark"].__file__.startswith(str(lib)):
        raise SystemExit(f"pyspark was not imported from {lib}")
    from eos._core._worker import trim_import_caches

    rows = [(f"all {len(zip_importers())} zipimporters", invalidate_ms(args.rounds))]
    for path in zip_importers():
        if path not in archives:
            del sys.path_importer_cache[path]
    rows.append((f"only the {len(zip_importers())} on sys.path", invalidate_ms(args.rounds)))
    trim_import_caches()
    rows.append((f"after trim_import_caches ({len(zip_importers())} left)", invalidate_ms(args.rounds)))
    print(f"importlib.invalidate_caches(), median of {args.rounds}")
    for what, ms in rows:
        print(f"{what:<36} {ms:7.2f} ms")


if __name__ == "__main__":
    main()
