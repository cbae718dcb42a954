"""A fresh venv that borrows the test venv's libraries but not its eos (test_package, test_deploy)."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

_EOS_PREFIXES = ("eos_spark-", "__editable__.eos_spark", "__editable___eos_spark")


def _is_eos(name: str) -> bool:
    """Whether a site-packages entry is eos itself: the package, its metadata, or an editable install's
    finder (`make matrix`'s `pip-spark-*` combinations install eos's wheel into the test venv)."""
    return name == "eos" or name.startswith(_EOS_PREFIXES)


def _is_one_of(name: str, distributions: tuple[str, ...]) -> bool:
    """Whether a site-packages entry is one of `distributions`' packages or metadata (`py4j`,
    `py4j-0.10.9.9.dist-info`), not another distribution's whose name begins alike (`pyspark_client`)."""
    return any(name == d or name.startswith(f"{d}-") for d in distributions)


def fresh_venv(path: Path, leave_out: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """A venv at `path` (its python and site-packages) with a path file to a folder of links to the
    test venv's libraries, eos left out: pyspark, pyarrow and confluent-kafka without downloading them
    again, and no eos but the one a test installs or ships. `leave_out`: distributions left out too
    (their package, and their metadata: pip does not see them installed)."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
    python = path / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    libraries = path / "borrowed"
    libraries.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not _is_eos(entry.name) and not _is_one_of(entry.name, leave_out):
            (libraries / entry.name).symlink_to(entry)
    (Path(site) / "borrowed-from-test-venv.pth").write_text(f"{libraries}\n")
    return python, Path(site)
