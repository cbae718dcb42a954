"""structlog set-up shared by the driver and the executors' Python workers.

Configured once per process, lazily, so importing eos changes nothing for an application that
configures structlog itself (set `EOS_LOG_CONFIGURE=0`). `EOS_LOG_LEVEL` sets the level,
`EOS_LOG_FORMAT=json` switches to one JSON object a line.
"""

from __future__ import annotations

import logging
import os
import sys

import structlog

_configured = False


def get_logger(**context: object) -> structlog.stdlib.BoundLogger:
    global _configured
    if not _configured:
        _configured = True
        if os.environ.get("EOS_LOG_CONFIGURE", "1") != "0" and not structlog.is_configured():
            level = logging.getLevelName(os.environ.get("EOS_LOG_LEVEL", "INFO").upper())
            renderer = (
                structlog.processors.JSONRenderer()
                if os.environ.get("EOS_LOG_FORMAT") == "json"
                else structlog.dev.ConsoleRenderer(colors=False)
            )
            structlog.configure(
                processors=[
                    structlog.processors.add_log_level,
                    structlog.processors.TimeStamper(fmt="iso", utc=True),
                    renderer,
                ],
                wrapper_class=structlog.make_filtering_bound_logger(level if isinstance(level, int) else 20),
                logger_factory=structlog.PrintLoggerFactory(sys.stderr),
                cache_logger_on_first_use=True,
            )
    return structlog.get_logger("eos").bind(**context)


def forget_setup() -> None:
    """Decide again on next use whether to configure structlog (`eos._worker.reset`)."""
    global _configured
    _configured = False
