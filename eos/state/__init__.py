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
and the local store only once it commits.

The package, in the order a task uses it:
    _api.py        State, Store, StoreSpec: the public view of a partition's stores
    _serdes.py     Serde and the named serdes
    _partition.py  PartitionState: all stores of one input partition for one task; where recovery is
                   decided (clean / unclean / roll forward) and what a commit or an abort does to them
    _changelog.py  the changelog topics: creation and checks, and the restore loop that reads them
    _store.py      PartitionStore: one store's lock, checkpoint file, open writes and read cache
    _sqlite.py     SqliteStore: its data in a SQLite file (the default `state_store`)
    _rocksdb.py    RocksStore: its data in RocksDB (the `rocksdb` extra)
    _backends.py   the backends by name
The names of topics and files are `eos._names`'s.
"""

from eos.state._api import State, Store, StoreSpec
from eos.state._serdes import SERDES, BytesSerde, JsonSerde, Serde, StrSerde

__all__ = ["SERDES", "BytesSerde", "JsonSerde", "Serde", "State", "Store", "StoreSpec", "StrSerde"]
