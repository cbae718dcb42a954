"""The Config the unit tests start from."""

from __future__ import annotations

from typing import Any

import eos


def config(**settings: Any) -> eos.Config:
    """A valid Config (bootstrap `b:1`: unit tests reach no broker, app `app`, output `out`) with
    `settings` on top."""
    return eos.Config(**{"bootstrap_servers": "b:1", "app_id": "app", "output_topic": "out", **settings})
