"""MkDocs hook: the site's name carries eos's version (eos/_version.py, the one place it is written)."""

from __future__ import annotations

import runpy
from pathlib import Path

VERSION = runpy.run_path(str(Path(__file__).resolve().parents[1] / "eos" / "_version.py"))["__version__"]


def on_config(config, **kwargs):
    config.site_name = f"eos {VERSION}"
    return config
