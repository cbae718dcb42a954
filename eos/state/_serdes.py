"""How a store turns keys and values into bytes: by name ("bytes", "str", "json") or any object with
`dumps` and `loads`."""

from __future__ import annotations

import json
from typing import Any, Protocol


class Serde(Protocol):
    def dumps(self, obj: Any) -> bytes: ...
    def loads(self, data: bytes) -> Any: ...


class BytesSerde:
    def dumps(self, obj: bytes) -> bytes:
        if isinstance(obj, bytearray | memoryview):
            return bytes(obj)
        if not isinstance(obj, bytes):
            raise TypeError(f"bytes serde takes bytes, not {type(obj).__name__}")
        return obj

    def loads(self, data: bytes) -> bytes:
        return data


class StrSerde:
    def dumps(self, obj: str) -> bytes:
        if not isinstance(obj, str):
            raise TypeError(f"str serde takes str, not {type(obj).__name__}")
        return obj.encode("utf-8")

    def loads(self, data: bytes) -> str:
        return data.decode("utf-8")


class JsonSerde:
    """Compact JSON with sorted keys. Integers (a count, a sum) take a fast path: json.dumps and
    json.loads were a third of a stateful row's time in a `make bench` profile (docs/design.md, "Store
    reads, and SQLite rather than RocksDB"); the bytes are the same JSON either way."""

    def dumps(self, obj: Any) -> bytes:
        if type(obj) is int:
            return b"%d" % obj
        return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode("utf-8")

    def loads(self, data: bytes) -> Any:
        if data[:1] in _INT_START:
            try:
                return int(data)
            except ValueError:
                pass  # a float or an exponent: JSON decides
        return json.loads(data)


_INT_START = frozenset(b"-0123456789"[i : i + 1] for i in range(11))


SERDES: dict[str, Serde] = {"bytes": BytesSerde(), "str": StrSerde(), "json": JsonSerde()}


def as_serde(value: str | Serde) -> Serde:
    """A serde named or given (the `StoreSpec` converter)."""
    if isinstance(value, str):
        try:
            return SERDES[value]
        except KeyError:
            raise ValueError(
                f"unknown serde {value!r}; use one of {sorted(SERDES)} or a Serde object"
            ) from None
    if not (callable(getattr(value, "dumps", None)) and callable(getattr(value, "loads", None))):
        raise ValueError(f"{value!r} is not a serde (it needs dumps and loads)")
    return value
