"""structlog set-up shared by the driver and the executors' Python workers.

Configured once per process, lazily, so importing eos changes nothing for an application that
configures structlog itself (set `EOS_LOG_CONFIGURE=0`). `EOS_LOG_LEVEL` sets the level,
`EOS_LOG_FORMAT=json` switches to one JSON object a line.

librdkafka's own log lines (`%4|1795347300.447|GETPID|rdkafka#producer-2| ...` on stderr otherwise) go
through the stdlib logger `eos.kafka` instead: every Kafka client eos builds gets it as confluent-kafka's
`logger` setting (see `kafka_logger`).
"""

from __future__ import annotations

import logging
import os
import sys

import structlog

_configured = False
#: eos configured structlog itself, so it also decides where librdkafka's lines go
_owns_setup = False

KAFKA_LOGGER = "eos.kafka"


def get_logger(**context: object) -> structlog.stdlib.BoundLogger:
    global _configured, _owns_setup
    if not _configured:
        _configured = True
        if os.environ.get("EOS_LOG_CONFIGURE", "1") != "0" and not structlog.is_configured():
            _owns_setup = True
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


def kafka_logger() -> logging.Logger:
    """The logger librdkafka writes through (confluent-kafka's `logger` client setting; the lines arrive
    on the thread that calls the client's poll()/flush()).

    Where eos configures logging, they become eos log events `librdkafka` at DEBUG (EOS_LOG_LEVEL=DEBUG
    shows them), save librdkafka's critical ones at ERROR: what they report at error or warning level is
    mostly what librdkafka retries by itself (a connection refused while a broker restarts, a coordinator
    still loading), and whatever it does not get past reaches eos as an error of the call it failed,
    which eos reports with what it was doing. An application that configures logging itself gets the
    records at librdkafka's own levels on `eos.kafka`, to route as it likes."""
    logger = logging.getLogger(KAFKA_LOGGER)
    get_logger()  # decides whether eos configures logging
    if _owns_setup and not any(isinstance(h, _ToEosLog) for h in logger.handlers):
        logger.addHandler(_ToEosLog())
        logger.setLevel(logging.DEBUG)  # librdkafka's `debug` lines too, when a client sets `debug`
        logger.propagate = False
    return logger


class _ToEosLog(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        # confluent-kafka logs ("%s [%s] %s", facility, client name, text)
        args = record.args if isinstance(record.args, tuple) and len(record.args) == 3 else None
        facility, client, text = args if args else ("", "", record.getMessage())
        log = get_logger(facility=facility, client=client, rdkafka_level=record.levelname.lower())
        (log.error if record.levelno >= logging.CRITICAL else log.debug)("librdkafka", message=text)


def forget_setup() -> None:
    """Decide again on next use whether to configure structlog (`eos._core._worker.reset`)."""
    global _configured
    _configured = False
