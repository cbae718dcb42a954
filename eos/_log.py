"""eos's log events, through Python's standard `logging`, on the driver and in the executors' Python
workers alike.

Every event is a `logging.LogRecord` on a logger under `eos` (`eos.sink`, `eos.task`, `eos.session`,
`eos.producer`, `eos.kafka` for librdkafka's own lines): its message is the event and its fields
(`partition written app_id=... batch_id=3 ...`), and `record.eos` holds the fields as a dict for a
structured handler. structlog binds the context (app, partition, batch) and drops an event below the
logger's level before anything is rendered; eos never touches structlog's global configuration.

Unless `EOS_LOG_CONFIGURE=0`, eos, once per process, on first use:

- applies the file `EOS_LOG_CONFIG` names (`dictConfig` JSON, or `fileConfig` INI) — how a handler
  reaches the executors' Python workers, which never run the driver's `logging` set-up;
- sets the level of `eos` to `EOS_LOG_LEVEL` (or INFO where nothing set one), and of `eos.kafka` to
  CRITICAL where nothing set one (DEBUG with `EOS_LOG_LEVEL=DEBUG`): what librdkafka logs at error or
  warning level is mostly what it retries by itself, and what it does not get past reaches eos as the
  error of the call that failed;
- gives `eos` a last-resort handler that writes to stderr (`EOS_LOG_FORMAT=json`: one JSON object a
  line) only a record no other handler would get: once the application configures `logging`, its
  handlers print eos's events, and nothing prints them twice.
"""

from __future__ import annotations

import datetime
import json
import logging
import logging.config
import os
import sys
from typing import Any

import structlog

ROOT = "eos"
KAFKA_LOGGER = "eos.kafka"
#: the LogRecord attribute holding an event's fields
FIELDS = "eos"

_configured = False
_config_applied = False


def get_logger(name: str = ROOT, /, **context: object) -> structlog.stdlib.BoundLogger:
    """A logger for stdlib logger `name` (under `eos`) with `context` bound to every event."""
    if not _configured:
        _set_up()
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=[structlog.stdlib.filter_by_level, _to_record],
        wrapper_class=structlog.stdlib.BoundLogger,
        context_class=dict,
    ).bind(**context)


def kafka_logger() -> logging.Logger:
    """The logger librdkafka writes through (confluent-kafka's `logger` client setting; the lines
    arrive on the thread that calls the client's poll()/flush()), at librdkafka's own levels."""
    if not _configured:
        _set_up()
    return logging.getLogger(KAFKA_LOGGER)


def forget_setup() -> None:
    """Decide the levels again on next use (`eos._core._worker.reset`); a config file stays applied."""
    global _configured
    _configured = False


def _set_up() -> None:
    global _configured, _config_applied
    _configured = True
    if os.environ.get("EOS_LOG_CONFIGURE", "1") == "0":
        return
    path = os.environ.get("EOS_LOG_CONFIG")
    if path and not _config_applied:
        _config_applied = True
        _apply_config_file(path)
    root, kafka = logging.getLogger(ROOT), logging.getLogger(KAFKA_LOGGER)
    wanted = os.environ.get("EOS_LOG_LEVEL")
    if wanted:
        root.setLevel(_level(wanted))
    elif root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
    if kafka.level == logging.NOTSET:
        kafka.setLevel(logging.DEBUG if root.level <= logging.DEBUG else logging.CRITICAL)
    if not any(isinstance(h, _LastResort) for h in root.handlers):
        root.addHandler(_LastResort())


def _level(name: str) -> int:
    level = logging.getLevelName(name.strip().upper())
    if not isinstance(level, int):
        from eos.errors import ConfigError

        raise ConfigError(
            "EOS_LOG_LEVEL", f"{name!r} is not a level: DEBUG, INFO, WARNING, ERROR or CRITICAL"
        )
    return level


def _apply_config_file(path: str) -> None:
    from eos.errors import ConfigError

    try:
        if path.endswith(".json"):
            with open(path) as f:
                settings = json.load(f)
            settings.setdefault("disable_existing_loggers", False)
            logging.config.dictConfig(settings)
        else:
            logging.config.fileConfig(path, disable_existing_loggers=False)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, ImportError) as exc:
        raise ConfigError("EOS_LOG_CONFIG", f"cannot apply logging configuration {path}: {exc}") from None


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return value if value and not any(c.isspace() or c in "\"'=" for c in value) else repr(value)
    return repr(value)


def _to_record(logger: Any, method_name: str, event_dict: dict[str, Any]) -> tuple[tuple, dict]:
    """The event as the arguments of the stdlib logger's call: the text, and the fields as `record.eos`."""
    event = str(event_dict.pop("event", ""))
    call: dict[str, Any] = {k: event_dict.pop(k) for k in ("exc_info", "stack_info") if k in event_dict}
    text = " ".join([event, *(f"{k}={_shown(v)}" for k, v in event_dict.items())])
    call["extra"] = {FIELDS: {"event": event, **event_dict}}
    call["stacklevel"] = _callsite_level()
    return (text,), call


def _callsite_level() -> int:
    """The `stacklevel` that makes a record's file, line and function eos's call, not structlog's: the
    stdlib logger is called from structlog, one or more frames above eos's code."""
    frame, level = sys._getframe(3), 1  # _process_event's caller: structlog calling the stdlib logger
    while frame.f_back is not None and frame.f_back.f_globals.get("__name__", "").startswith("structlog"):
        frame, level = frame.f_back, level + 1
    return level + 1


class Formatter(logging.Formatter):
    """eos's line: time, level, logger, event and fields, as structlog's console renderer draws them
    (or one JSON object with `json=True`); a record that is not an eos event (librdkafka's, through
    `eos.kafka`) shows its message. Public as `eos.LogFormatter`, for a `dictConfig`:
    `{"()": "eos.LogFormatter", "json": true}`."""

    def __init__(self, json: bool | None = None) -> None:
        super().__init__()
        as_json = os.environ.get("EOS_LOG_FORMAT") == "json" if json is None else json
        self._render = (
            structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer(colors=False)
        )

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.datetime.fromtimestamp(record.created, tz=datetime.timezone.utc)
        line: dict[str, Any] = {
            "timestamp": stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        fields = getattr(record, FIELDS, None)
        if isinstance(fields, dict):
            line.update(fields)
        elif record.name == KAFKA_LOGGER and isinstance(record.args, tuple) and len(record.args) == 3:
            # confluent-kafka logs ("%s [%s] %s", facility, client name, text)
            facility, client, text = record.args
            line.update(event="librdkafka", facility=facility, client=client, message=text)
        else:
            line["event"] = record.getMessage()
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return str(self._render(None, record.levelname.lower(), line))


class _LastResort(logging.StreamHandler):
    """stderr (looked up at each record, as `logging.lastResort` does), for a record no other handler
    on its way up would get."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(Formatter())

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass

    def handle(self, record: logging.LogRecord) -> bool:
        logger: logging.Logger | None = logging.getLogger(record.name)
        while logger is not None:
            if any(h is not self for h in logger.handlers):
                return False
            if not logger.propagate:
                break
            logger = logger.parent
        return super().handle(record)
