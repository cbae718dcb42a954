"""Which PySpark this Python has: the full one (a JVM of its own, classic or Spark Connect sessions), a
Spark Connect client only (`pyspark-client`, Databricks Connect), or none.

eos declares no PySpark of its own (each flavour installs the same `pyspark` package under another
distribution name, and pip would put the full one over a client's files), so the first call that needs
Spark says which to install.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util

#: the distributions that install the `pyspark` package: two of them in one environment overwrite each
#: other's files (`pyspark-connect` only requires `pyspark`, and so is not among them)
DISTRIBUTIONS = ("pyspark", "pyspark-client", "databricks-connect")

INSTALL = (
    "pip install 'eos-spark[pyspark]' for the full PySpark (classic sessions, and Spark Connect servers"
    " and clients), or 'eos-spark[pyspark-client]' for a Spark Connect client only"
)


def require(classic: bool) -> None:
    """Raise ImportError, saying what to install, where this Python lacks the PySpark a session needs:
    any for a Spark Connect session to a server (`classic` False), the full one for a classic session or
    a Connect server started here (`remote="local"`), which run a JVM through Py4J."""
    if importlib.util.find_spec("pyspark") is None:
        raise ImportError(f"eos needs PySpark, and this Python has none: {INSTALL}", name="pyspark")
    if classic and importlib.util.find_spec("py4j") is None:
        raise ImportError(
            "this Python's PySpark is a Spark Connect client only (no JVM, no py4j): connect to a Spark"
            " Connect server with eos.spark_session(remote='sc://host:port') or SPARK_REMOTE, or install"
            " the full PySpark for a classic session or a local server (pip install 'eos-spark[pyspark]')",
            name="py4j",
        )


def installed() -> dict[str, str]:
    """The distributions of DISTRIBUTIONS installed here, with their versions."""
    found = {}
    for name in DISTRIBUTIONS:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def overlapping() -> str | None:
    """Why this Python's `pyspark` package may be a mix of two distributions' files, or None."""
    found = installed()
    if len(found) < 2:
        return None
    listed = ", ".join(f"{name} {version}" for name, version in found.items())
    return (
        f"more than one distribution installs the pyspark package here ({listed}): each overwrote the"
        " other's files; keep one (pip uninstall the others, then reinstall the one you keep)"
    )
