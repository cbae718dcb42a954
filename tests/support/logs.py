"""A stand-in for eos's structlog logger where a test hands one in (`log=`) or replaces `get_logger`:
it records each event instead of rendering it."""

from __future__ import annotations

from typing import Any


class Log:
    """Records `(level, event, fields)`; calling it (as `get_logger(name, **context)`) binds `context` to
    every later event, as structlog's `bind` does."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []
        self.context: dict[str, Any] = {}

    def __call__(self, name: str = "eos", /, **context: Any) -> Log:
        self.context = context
        return self

    def _record(self, level: str, event: str, fields: dict[str, Any]) -> None:
        self.events.append((level, event, {**self.context, **fields}))

    def debug(self, event: str, **fields: Any) -> None:
        self._record("debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._record("info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._record("warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._record("error", event, fields)

    def said(self, event: str) -> bool:
        return any(e == event for _, e, _ in self.events)

    def at(self, level: str) -> list[dict[str, Any]]:
        """The events logged at `level`, each as its fields with `event`."""
        return [{"event": event, **fields} for lvl, event, fields in self.events if lvl == level]
