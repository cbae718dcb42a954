"""The state API that `process(row, state)` receives: named key-value stores scoped to the row's
input topic-partition.

    def count(row, state):
        counts = state.store("counts")
        n = counts.get(row.key, 0) + 1
        counts.put(row.key, n)
        return eos.Output(value=f"{row.key}:{n}", key=row.key)

    eos.sink(config, process=count, stores={"counts": eos.StoreSpec(value_serde="json")})

`process_batch(batch, state)` reads and writes a whole Arrow batch's keys at once with `get_many` and
`put_many`.

Writes made while processing belong to the open transaction: they reach the changelog topic inside it
and the local store only once it commits (see `eos._store` and `eos._recovery`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

import attrs


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
    json.loads cost ~2 us each per call, a third of a stateful row's time in a `make bench` profile;
    the bytes are the same JSON either way."""

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


def _serde(value: str | Serde) -> Serde:
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


@attrs.frozen
class StoreSpec:
    """How one named store serializes its keys and values."""

    key_serde: Serde = attrs.field(default="str", converter=_serde)
    value_serde: Serde = attrs.field(default="json", converter=_serde)


class Store:
    """One named store of one input topic-partition, as `process` sees it."""

    def __init__(self, name: str, spec: StoreSpec, backend) -> None:
        self.name = name
        self._spec = spec
        self._backend = backend  # eos._store.PartitionStore

    def _key(self, key: Any) -> bytes:
        if isinstance(key, bytearray | memoryview):
            key = bytes(key)
        serde = self._spec.key_serde
        if isinstance(key, bytes) and isinstance(serde, StrSerde):
            # Kafka keys arrive as bytes: the str serde stores them as they are if keys() can read them back.
            try:
                key.decode("utf-8")
            except UnicodeDecodeError:
                raise TypeError(
                    f"store {self.name!r}: key {key!r} is not UTF-8 text; declare key_serde='bytes'"
                ) from None
            return key
        return serde.dumps(key)

    def get(self, key: Any, default: Any = None) -> Any:
        data = self._backend.get(self._key(key))
        return default if data is None else self._spec.value_serde.loads(data)

    def put(self, key: Any, value: Any) -> None:
        if value is None:
            raise ValueError(f"store {self.name!r}: use delete() rather than put(key, None)")
        self._backend.put(self._key(key), self._spec.value_serde.dumps(value))

    def get_many(self, keys: Iterable[Any], default: Any = None) -> list[Any]:
        """The values of `keys`, in their order (`default` where missing), in one read of the store:
        for `process_batch`, where one lookup per row would cost a SQLite query each."""
        loads = self._spec.value_serde.loads
        return [
            default if data is None else loads(data)
            for data in self._backend.get_many([self._key(k) for k in keys])
        ]

    def put_many(self, items: Mapping[Any, Any] | Iterable[tuple[Any, Any]]) -> None:
        """put() for each (key, value); a later item for the same key wins."""
        pairs = items.items() if isinstance(items, Mapping) else items
        dumps = self._spec.value_serde.dumps
        writes = []
        for key, value in pairs:
            if value is None:
                raise ValueError(f"store {self.name!r}: use delete() rather than put(key, None)")
            writes.append((self._key(key), dumps(value)))
        self._backend.put_many(writes)

    def delete(self, key: Any) -> None:
        self._backend.put(self._key(key), None)

    def __contains__(self, key: Any) -> bool:
        return self._backend.get(self._key(key)) is not None

    def keys(self) -> Iterator[Any]:
        for key in self._backend.keys():
            yield self._spec.key_serde.loads(key)

    def items(self) -> Iterator[tuple[Any, Any]]:
        for key, value in self._backend.items():
            yield self._spec.key_serde.loads(key), self._spec.value_serde.loads(value)


class State:
    """The stores of one input topic-partition."""

    def __init__(self, stores: dict[str, Store]) -> None:
        self._stores = stores

    def store(self, name: str = "default") -> Store:
        try:
            return self._stores[name]
        except KeyError:
            raise KeyError(f"no store named {name!r}; declared stores: {sorted(self._stores)}") from None

    def __getitem__(self, name: str) -> Store:
        return self.store(name)
