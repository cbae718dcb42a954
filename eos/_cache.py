"""Where the fetched jars and the local broker's files live.

`make setup` fills it; `EOS_CACHE` moves it (the default is `.cache` beside the `eos` package,
which is the checkout's root for an editable install).
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    env = os.environ.get("EOS_CACHE")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent / ".cache"


def kafka_libs() -> Path:
    return cache_dir() / "kafka" / "libs"


def spark_jars_dir() -> Path:
    return cache_dir() / "spark-jars"
