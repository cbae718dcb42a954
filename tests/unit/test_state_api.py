"""eos.state: the serdes, StoreSpec, and the `Store` / `State` view that `process` receives, over a real
eos.state's PartitionStore (each backend, in tmp_path). No broker."""

from __future__ import annotations

import re

import pytest

import eos
from eos.state import SERDES, BytesSerde, JsonSerde, State, Store, StoreSpec, StrSerde
from eos.state._backends import KINDS
from eos.state._backends import backend as store_backend
from eos.state._sqlite import SqliteStore

# -- serdes --------------------------------------------------------------------------------------------


def test_bytes_serde_round_trip_and_buffer_types():
    serde = BytesSerde()
    assert serde.dumps(b"\x00\xffabc") == b"\x00\xffabc"
    assert serde.loads(b"\x00\xffabc") == b"\x00\xffabc"
    for buffer in (bytearray(b"xy"), memoryview(b"xy")):
        out = serde.dumps(buffer)
        assert type(out) is bytes
        assert out == b"xy"


@pytest.mark.parametrize("wrong", ["text", 1, None, ["a"]])
def test_bytes_serde_rejects_other_types(wrong):
    with pytest.raises(TypeError, match="bytes serde takes bytes"):
        BytesSerde().dumps(wrong)


def test_str_serde_round_trip_is_utf8():
    serde = StrSerde()
    assert serde.dumps("héllo ✓") == "héllo ✓".encode()
    assert serde.loads("héllo ✓".encode()) == "héllo ✓"
    assert serde.loads(serde.dumps("")) == ""


@pytest.mark.parametrize("wrong", [b"bytes", 1, None, 1.5])
def test_str_serde_rejects_other_types(wrong):
    with pytest.raises(TypeError, match="str serde takes str"):
        StrSerde().dumps(wrong)


@pytest.mark.parametrize(
    "value",
    [0, -7, 1.5, "text", None, True, [1, "two", None], {"n": 1, "nested": {"a": [1, 2]}}],
)
def test_json_serde_round_trip(value):
    serde = JsonSerde()
    assert serde.loads(serde.dumps(value)) == value


@pytest.mark.parametrize("value", [0, -7, 2**70, 1.5, -2.5e-3, 1e20, True, False, "12", "-", None])
def test_json_serde_fast_path_for_integers_writes_and_reads_the_same_json(value):
    import json

    serde = JsonSerde()
    data = serde.dumps(value)
    assert data == json.dumps(value, separators=(",", ":"), sort_keys=True).encode()
    back = serde.loads(data)
    assert back == value and type(back) is type(value)


def test_json_serde_is_compact_and_key_order_independent():
    serde = JsonSerde()
    assert serde.dumps({"b": 1, "a": [1, 2]}) == b'{"a":[1,2],"b":1}'
    assert serde.dumps({"a": 1, "b": 2}) == serde.dumps({"b": 2, "a": 1})


@pytest.mark.parametrize("wrong", [object(), {1, 2}, b"bytes"])
def test_json_serde_rejects_unserializable_values(wrong):
    with pytest.raises(TypeError):
        JsonSerde().dumps(wrong)


# -- StoreSpec -----------------------------------------------------------------------------------------


def test_store_spec_defaults_str_keys_and_json_values():
    spec = StoreSpec()
    assert isinstance(spec.key_serde, StrSerde)
    assert isinstance(spec.value_serde, JsonSerde)


@pytest.mark.parametrize(("name", "cls"), [("json", JsonSerde), ("str", StrSerde), ("bytes", BytesSerde)])
def test_store_spec_converts_serde_names(name, cls):
    spec = StoreSpec(key_serde=name, value_serde=name)
    assert isinstance(spec.key_serde, cls)
    assert isinstance(spec.value_serde, cls)
    assert spec.key_serde is SERDES[name]


def test_store_spec_keeps_a_serde_object():
    class Upper:
        def dumps(self, obj):
            return obj.upper().encode()

        def loads(self, data):
            return data.decode().lower()

    serde = Upper()
    spec = StoreSpec(value_serde=serde)
    assert spec.value_serde is serde


@pytest.mark.parametrize("name", ["pickle", "JSON", ""])
def test_store_spec_unknown_serde_name_raises(name):
    with pytest.raises(ValueError, match="unknown serde"):
        StoreSpec(value_serde=name)
    with pytest.raises(ValueError, match="unknown serde"):
        StoreSpec(key_serde=name)


class OnlyDumps:
    def dumps(self, obj):
        return b""


class NotCallable:
    dumps = b"x"
    loads = b"y"


@pytest.mark.parametrize("wrong", [object(), 42, OnlyDumps(), NotCallable()])
def test_store_spec_object_without_dumps_and_loads_raises(wrong):
    with pytest.raises(ValueError, match="is not a serde"):
        StoreSpec(value_serde=wrong)
    with pytest.raises(ValueError, match="is not a serde"):
        StoreSpec(key_serde=wrong)


# -- Store over a real PartitionStore ------------------------------------------------------------------


@pytest.fixture(
    params=[(kind, mode) for kind in KINDS for mode in (True, False)],
    ids=lambda p: f"{p[0]}-{'transactional' if p[1] else 'wipe'}",
)
def backend(request, tmp_path):
    kind, transactional = request.param
    store = store_backend(kind)(tmp_path / "in-0", "counts", transactional=transactional)
    store.open(lock_timeout_s=1)
    yield store
    store.close()


@pytest.fixture
def store(backend) -> Store:
    return Store("counts", StoreSpec(), backend)


def test_get_returns_default_for_a_missing_key(store):
    assert store.get("missing") is None
    assert store.get("missing", 0) == 0
    assert store.get("missing", default=[]) == []


def test_put_then_get_and_the_stored_bytes(store, backend):
    store.put("a", {"n": 1})
    assert store.get("a") == {"n": 1}
    assert backend.get(b"a") == b'{"n":1}'
    store.put("a", {"n": 2})
    assert store.get("a", "default") == {"n": 2}


def test_get_many_and_put_many_match_one_at_a_time(store, backend):
    store.put("committed", 1)
    backend.commit(1)
    store.put("pending", 2)
    store.delete("deleted-pending")
    keys = ["pending", "missing", "committed", "pending", "deleted-pending"]
    assert store.get_many(keys) == [store.get(k) for k in keys] == [2, None, 1, 2, None]
    assert store.get_many(keys, default=0) == [2, 0, 1, 2, 0]
    store.put_many({"a": 10, "committed": 11})
    store.put_many([("b", 20), ("b", 21)])  # a later item for the same key wins
    assert store.get_many(["a", "b", "committed"]) == [10, 21, 11]
    backend.commit(2)
    assert dict(store.items()) == {"a": 10, "b": 21, "committed": 11, "pending": 2}
    with pytest.raises(ValueError, match="delete"):
        store.put_many({"c": None})


def test_get_many_reads_in_as_few_queries_as_sqlite_allows(store, backend, monkeypatch):
    if backend.kind != "sqlite":
        pytest.skip("SQLite's variable limit")
    store.put_many({f"k{i}": i for i in range(2_500)})
    backend.commit(1)
    fresh = SqliteStore(backend.directory, "other", backend.transactional)  # nothing read yet
    fresh.db_path = backend.db_path
    fresh._connect()
    monkeypatch.setattr(fresh, "_max_variables", 1_000)
    queries = []
    fresh._db.set_trace_callback(queries.append)
    wanted = [f"k{i}" for i in range(2_500)] + ["absent"]
    assert Store("counts", StoreSpec(), fresh).get_many(wanted) == list(range(2_500)) + [None]
    assert len([q for q in queries if q.startswith("SELECT")]) == 3  # 2,501 keys, 1,000 per query
    fresh._db.close()


def test_committed_values_are_read_from_the_store_once_per_task(store, backend, monkeypatch):
    store.put_many({"a": 1, "gone": 2})
    backend.commit(1)
    store.delete("gone")
    backend.commit(2)
    reads = []
    read, read_many = backend._read, backend._read_many
    monkeypatch.setattr(backend, "_read", lambda key: reads.append([key]) or read(key))
    monkeypatch.setattr(backend, "_read_many", lambda keys: reads.append(keys) or read_many(keys))
    for _ in range(3):
        assert (store.get("a"), store.get("gone"), store.get("never")) == (1, None, None)
        assert store.get_many(["a", "gone", "never"]) == [1, None, None]
    assert reads == [[b"never"]], "only the never-written key was read"
    backend.wipe()  # a wipe (or a restore) forgets what was read
    assert store.get("a") is None
    backend.apply_restored([(b"a", b"7")], 5)
    assert store.get("a") == 7


def test_falsy_values_are_present(store):
    store.put("zero", 0)
    store.put("empty", [])
    assert store.get("zero", 5) == 0
    assert store.get("empty", 5) == []
    assert "zero" in store
    assert "empty" in store


def test_delete_pending_and_committed_keys(store, backend):
    store.put("committed", 1)
    backend.commit(1)
    store.put("pending", 2)
    store.delete("committed")
    store.delete("pending")
    store.delete("never-there")
    for key in ("committed", "pending", "never-there"):
        assert key not in store
        assert store.get(key, "gone") == "gone"
    backend.commit(2)
    assert "committed" not in store
    assert list(store.keys()) == []


def test_contains(store, backend):
    assert "a" not in store
    store.put("a", 1)
    assert "a" in store
    backend.commit(1)
    assert "a" in store
    assert "b" not in store


def test_keys_and_items_merge_committed_rows_and_pending_writes(store, backend):
    for key, value in {"a": 1, "b": 2, "c": 3}.items():
        store.put(key, value)
    backend.commit(3)
    store.put("b", 20)  # pending overrides committed
    store.delete("c")  # pending delete hides committed
    store.put("d", 4)  # pending only
    store.put("e", 5)
    store.delete("e")  # pending put then pending delete
    items = list(store.items())
    assert dict(items) == {"a": 1, "b": 20, "d": 4}
    assert len(items) == 3  # each key once
    keys = list(store.keys())
    assert sorted(keys) == ["a", "b", "d"]
    assert len(keys) == 3
    assert all(isinstance(k, str) for k in keys)


def test_keys_and_items_after_commit_and_rollback(store, backend):
    store.put("a", 1)
    backend.commit(1)
    store.put("b", 2)
    store.delete("a")
    backend.commit(2)
    assert dict(store.items()) == {"b": 2}
    if backend.transactional:  # in wipe mode an aborted write stays until the wipe
        store.put("c", 3)
        backend.rollback()
        assert dict(store.items()) == {"b": 2}


def test_put_none_raises_and_writes_nothing(store, backend):
    store.put("a", 1)
    backend.commit(1)
    with pytest.raises(ValueError, match="delete"):
        store.put("a", None)
    with pytest.raises(ValueError, match="delete"):
        store.put("new", None)
    assert backend.pending == {}
    assert store.get("a") == 1
    assert "new" not in store


def test_bytes_and_str_keys_name_the_same_stored_key(store, backend):
    store.put("k", 1)
    assert store.get(b"k") == 1
    assert b"k" in store
    assert bytearray(b"k") in store
    assert store.get(memoryview(b"k")) == 1
    store.put(b"k", 2)
    assert store.get("k") == 2
    assert list(backend.pending) == [b"k"]
    assert list(store.keys()) == ["k"]
    store.delete(bytearray(b"k"))
    assert "k" not in store


def test_bytes_key_serde(backend):
    store = Store("raw", StoreSpec(key_serde="bytes", value_serde="bytes"), backend)
    store.put(b"\x00\xff", b"v")
    store.put(bytearray(b"b"), b"w")
    assert store.get(b"\x00\xff") == b"v"
    assert dict(store.items()) == {b"\x00\xff": b"v", b"b": b"w"}
    with pytest.raises(TypeError):
        store.put("text", b"v")
    with pytest.raises(TypeError):
        store.put(b"k", "text")


def test_json_key_serde_round_trips_non_string_keys(backend):
    store = Store("j", StoreSpec(key_serde="json"), backend)
    store.put(7, "seven")
    store.put(["a", 1], "pair")
    assert store.get(7) == "seven"
    assert backend.get(b"7") == b'"seven"'
    assert sorted(store.keys(), key=repr) == [7, ["a", 1]]


def test_str_value_serde_rejects_other_types(backend):
    store = Store("s", StoreSpec(value_serde="str"), backend)
    store.put("a", "text")
    assert backend.get(b"a") == b"text"
    with pytest.raises(TypeError):
        store.put("b", 1)
    assert "b" not in store


def test_str_key_serde_rejects_non_str_non_bytes_keys(store):
    with pytest.raises(TypeError):
        store.put(1, "v")


def test_a_key_the_str_serde_cannot_list_is_refused_up_front_and_the_bytes_serde_takes_it(backend):
    """A bytes key that is not UTF-8 would be stored but could not be listed back as text."""
    store = Store("counts", StoreSpec(), backend)
    with pytest.raises(TypeError, match=r"store 'counts': key b'\\xff\\xfe' is not UTF-8.*key_serde='bytes'"):
        store.put(b"\xff\xfe", 1)
    assert list(store.keys()) == [] and list(store.items()) == []
    raw = Store("raw", StoreSpec(key_serde="bytes"), backend)
    raw.put(b"\xff\xfe", 1)
    assert list(raw.keys()) == [b"\xff\xfe"] and list(raw.items()) == [(b"\xff\xfe", 1)]


# -- State ---------------------------------------------------------------------------------------------


def test_state_store_by_name(backend):
    counts = Store("counts", StoreSpec(), backend)
    default = Store("default", StoreSpec(), backend)
    state = State({"counts": counts, "default": default})
    assert state.store("counts") is counts
    assert state["counts"] is counts
    assert state.store() is default


def test_state_unknown_store_raises_key_error_naming_declared_stores(backend):
    state = State(
        {"counts": Store("counts", StoreSpec(), backend), "seen": Store("seen", StoreSpec(), backend)}
    )
    with pytest.raises(
        KeyError, match=re.escape("no store named 'nope'; declared stores: ['counts', 'seen']")
    ):
        state.store("nope")
    with pytest.raises(KeyError, match="declared stores"):
        state["nope"]
    with pytest.raises(KeyError, match=re.escape("no store named 'default'")):
        state.store()


@pytest.mark.parametrize("name", ["", "two words", "a/b", "x" * 101, 7])
def test_a_store_name_that_cannot_name_a_topic_and_a_file_is_refused(name):
    from eos._core._spec import Functions

    with pytest.raises(eos.ConfigError, match="store name"):
        Functions.of(lambda row, state: None, None, {name: "json"})
