"""What `process` and `process_batch` see of state: `State`, its named `Store`s, and `StoreSpec`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs

from eos.state._serdes import BytesSerde, Serde, StrSerde, as_serde


@attrs.frozen
class StoreSpec:
    """How one named store serializes its keys and values.

    Parameters:

    - `key_serde`: how keys become bytes: "str" (the default: text as UTF-8; a bytes key, as Kafka keys
      arrive, is stored as it is where it is UTF-8 text), "bytes" (bytes as they are), "json", or any
      object with `dumps(obj) -> bytes` and `loads(data) -> obj` methods.
    - `value_serde`: how values become bytes, with the same choices; default "json" (compact JSON with
      sorted keys).
    """

    key_serde: Serde = attrs.field(default="str", converter=as_serde)
    value_serde: Serde = attrs.field(default="json", converter=as_serde)


class Store:
    """One named store of one input topic-partition, as `process` sees it.

    eos builds the stores; a function gets one from its `state` (`state.store("counts")`).

    Parameters:

    - `name`: the store's name, as the sink's `stores` declares it.
    - `spec`: its `eos.StoreSpec`, whose serdes turn keys and values into bytes.
    - `backend`: the store's data for this input partition and its writes not yet committed, kept in
      SQLite or RocksDB as the `state_store` setting says.
    """

    def __init__(self, name: str, spec: StoreSpec, backend) -> None:
        self.name = name
        self._spec = spec
        self._backend = backend  # eos.state._store.PartitionStore
        #: bytes keys are stored as they are by the bytes serde, and by the str serde once they are
        #: checked to be UTF-8 text: the per-row path of `process` with a Kafka key
        self._bytes_key = isinstance(spec.key_serde, BytesSerde)
        self._text_key = isinstance(spec.key_serde, StrSerde)

    def _key(self, key: Any) -> bytes:
        if type(key) is not bytes:  # a Kafka key is: the per-row path of `process` skips this
            if key is None:
                raise TypeError(
                    f"store {self.name!r}: a key cannot be None (a Kafka record without a key has row.key"
                    " None): decide in process what such a row does, skip it (return None) or give it a key"
                )
            if not isinstance(key, bytes | bytearray | memoryview):
                return self._spec.key_serde.dumps(key)
            key = bytes(key)
        if self._text_key:
            # Kafka keys arrive as bytes: the str serde stores them as they are if keys() can read them back.
            try:
                key.decode("utf-8")
            except UnicodeDecodeError:
                raise TypeError(
                    f"store {self.name!r}: key {key!r} is not UTF-8 text; declare key_serde='bytes'"
                ) from None
            return key
        return key if self._bytes_key else self._spec.key_serde.dumps(key)

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
    """The stores of one input topic-partition.

    eos builds it and hands it to `process` and `process_batch` as their `state`.

    Parameters:

    - `stores`: the partition's `eos.Store`s by name; `store(name)` (or `state[name]`) returns one.
    """

    def __init__(self, stores: dict[str, Store]) -> None:
        self._stores = stores

    def store(self, name: str = "default") -> Store:
        try:
            return self._stores[name]
        except KeyError:
            raise KeyError(f"no store named {name!r}; declared stores: {sorted(self._stores)}") from None

    def __getitem__(self, name: str) -> Store:
        return self.store(name)
