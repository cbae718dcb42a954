"""Arrow columns handed to librdkafka in one call per chunk: no Python object per output record.

confluent-kafka's `produce()` costs a call and a `bytes` per record, and its `produce_batch` a dict per
record. librdkafka's own `rd_kafka_produce_batch` takes an array of `rd_kafka_message_t`, which NumPy
fills from an Arrow binary column's offsets without a loop. It runs on the `rd_kafka_t` that
confluent-kafka's `Producer` holds, so the records join that producer's open transaction and its
flush, commit and abort. Their delivery reports carry no confluent-kafka state and are dropped there:
this path is for transactional producers only, whose `commit_transaction()` fails when any record
was not delivered (the task then redoes the transaction record by record, naming the one refused).

The handle is not part of confluent-kafka's API: `handle()` reads it from the object, so it does so only
under a confluent-kafka version eos has run this path with (`TESTED_CONFLUENT_KAFKA`: make test's and
make matrix's; a release that moved the field would make the read below crash the worker, not fall back),
and uses it only when the library it resolves is the one confluent-kafka reports and the handle's opaque
is that very Producer (confluent-kafka sets it so). Anything else returns None and the caller keeps the
loop.
No compiler is needed: ctypes and NumPy. docs/design.md ("The produce path fed from Arrow") has the
measurements.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np
import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer, libversion, version
from confluent_kafka import cimpl as _cimpl

from eos._log import get_logger
from eos.records import is_bytes

#: records per rd_kafka_produce_batch call: a 720 KB message array, and the delivery reports served
#: between calls
CHUNK = 10_000
_RD_KAFKA_PRODUCER = 0
_PARTITION_UA = -1
_MSG_F_COPY = 0x2
#: produce_batch honours each message's partition
_MSG_F_PARTITION = 0x8
#: Kafka's murmur2 (Java's `Utils.murmur2`, librdkafka's `rd_murmur2`)
_M = np.uint32(0x5BD1E995)
_SEED = np.uint32(0x9747B28C)

#: rd_kafka_message_t on a 64-bit platform (rdkafka.h): err, rkt, partition, payload, len, key, key_len,
#: offset, _private
_MESSAGE = np.dtype(
    {
        "names": ["err", "rkt", "partition", "payload", "len", "key", "key_len", "offset", "private"],
        "formats": ["i4", "u8", "i4", "u8", "u8", "u8", "u8", "i8", "u8"],
        "offsets": [0, 8, 16, 24, 32, 40, 48, 56, 64],
        "itemsize": 72,
    }
)
#: where an empty (not null) value or key points when its column has no data buffer: librdkafka tells
#: a null key from an empty one by the pointer
_EMPTY = ctypes.create_string_buffer(1)
_EMPTY_ADDRESS = ctypes.addressof(_EMPTY)


#: confluent-kafka versions this path has run with: constraints.txt's (make test) and the pins of
#: tests/matrix.py (make matrix; its pip-spark rows got the newest); tests/unit/test_rdkafka_allowlist.py
#: keeps them in step. Add a version here once make matrix has run it.
TESTED_CONFLUENT_KAFKA = frozenset({"2.3.0", "2.12.1", "2.16.1"})


def _client_version() -> str:
    """The installed confluent-kafka's version (its Python package's, e.g. "2.12.1"): `version()` is
    ("2.3.0", 0x2030000) in 2.3, the text alone in 2.12."""
    found = version()
    return str(found[0] if isinstance(found, tuple) else found)


@functools.cache
def _tested(client_version: str) -> bool:
    """Whether `client_version` is one of TESTED_CONFLUENT_KAFKA; logs once per process why not."""
    if client_version in TESTED_CONFLUENT_KAFKA:
        return True
    get_logger("eos.producer").info(
        "arrow produce off",
        confluent_kafka=client_version,
        reason="eos reads librdkafka's handle from confluent-kafka's private object layout only under the"
        f" versions it has run that with ({', '.join(sorted(TESTED_CONFLUENT_KAFKA))}): one produce() per"
        " record instead",
    )
    return False


@functools.cache
def _library() -> ctypes.CDLL | None:
    """librdkafka as confluent-kafka's extension linked it (dlsym on the extension searches what it
    loaded), or None where that is not the library confluent-kafka reports."""
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        return None
    try:
        lib = ctypes.CDLL(_cimpl.__file__)
        lib.rd_kafka_version.restype = ctypes.c_int
        if lib.rd_kafka_version() != libversion()[1]:
            return None
        lib.rd_kafka_opaque.restype = ctypes.c_void_p
        lib.rd_kafka_opaque.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_type.restype = ctypes.c_int
        lib.rd_kafka_type.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_topic_new.restype = ctypes.c_void_p
        lib.rd_kafka_topic_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        lib.rd_kafka_topic_destroy.restype = None
        lib.rd_kafka_topic_destroy.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_produce_batch.restype = ctypes.c_int
        lib.rd_kafka_produce_batch.argtypes = [
            ctypes.c_void_p,
            ctypes.c_int32,
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_int,
        ]
    except (OSError, AttributeError) as exc:  # no such symbol, no loadable file
        get_logger("eos.producer").debug("arrow produce unavailable", reason=str(exc))
        return None
    return lib


def handle(producer: Producer) -> int | None:
    """The `rd_kafka_t *` of a confluent-kafka Producer, or None where it cannot be proven to be one.

    confluent-kafka's handle object starts with the Python object header and then `rk`; librdkafka's
    opaque of that `rk` is the Python object itself (confluent-kafka sets it for its callbacks)."""
    if not isinstance(producer, Producer) or not _tested(_client_version()):
        return None
    lib = _library()
    if lib is None:
        return None
    header = object.__basicsize__
    if type(producer).__basicsize__ < header + ctypes.sizeof(ctypes.c_void_p):
        return None
    rk = ctypes.c_void_p.from_address(id(producer) + header).value
    if not rk or lib.rd_kafka_opaque(rk) != id(producer) or lib.rd_kafka_type(rk) != _RD_KAFKA_PRODUCER:
        return None
    return rk


def fits(column) -> bool:
    """Whether a value or key column can be handed over as it is (binary or string, one chunk)."""
    if isinstance(column, pa.ChunkedArray) and column.num_chunks > 1:
        return False
    return isinstance(column, pa.Array | pa.ChunkedArray) and is_bytes(column.type)


def _one_array(column) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        return column.chunk(0) if column.num_chunks else pa.array([], column.type)
    return column


def _pointers(column: pa.Array, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """Address and length of each element start..stop of a binary/string column (0, 0 for a null)."""
    _, offsets_buffer, data = column.buffers()
    kind = (
        np.int64
        if pa.types.is_large_binary(column.type) or pa.types.is_large_string(column.type)
        else np.int32
    )
    first = column.offset + start
    offsets = np.frombuffer(offsets_buffer, dtype=kind, count=column.offset + stop + 1)[first:]
    base = data.address if data is not None and data.address else _EMPTY_ADDRESS
    lengths = np.diff(offsets).astype(np.uint64)
    addresses = offsets[:-1].astype(np.uint64) + np.uint64(base)
    if column.null_count:
        nulls = column.slice(start, stop - start).is_null().to_numpy(zero_copy_only=False)
        addresses[nulls] = 0
        lengths[nulls] = 0
    return addresses, lengths


def _pointers_at(column: pa.Array, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_pointers` of the elements at `rows` (ascending indices)."""
    if len(rows) == 0:
        return np.zeros(0, np.uint64), np.zeros(0, np.uint64)
    start, stop = int(rows[0]), int(rows[-1]) + 1
    addresses, lengths = _pointers(column, start, stop)
    return addresses[rows - start], lengths[rows - start]


def partitions(keys, start: int, stop: int, count: int, unkeyed: int) -> np.ndarray:
    """The partition of each record start..stop-1 of `count`, as librdkafka's `murmur2_random`
    partitioner (eos's, and Java's default for keys) places it: a key by Kafka's murmur2, a null key
    (or no key column) to `unkeyed`, as its sticky partitioner sends a run of them to one partition.
    eos places the records itself so that it knows which partitions a transaction wrote to
    (`eos._kafka._witness`); librdkafka does not report it for a batch."""
    out = np.full(stop - start, unkeyed, np.int32)
    if keys is None:
        return out
    keys = _one_array(keys)
    _, offsets_buffer, data = keys.buffers()
    kind = (
        np.int64 if pa.types.is_large_binary(keys.type) or pa.types.is_large_string(keys.type) else np.int32
    )
    first = keys.offset + start
    offsets = np.frombuffer(offsets_buffer, dtype=kind, count=keys.offset + stop + 1)[first:].astype(np.int64)
    starts, lengths = offsets[:-1], np.diff(offsets)
    keyed = np.ones(stop - start, bool)
    if keys.null_count:
        keyed = ~keys.slice(start, stop - start).is_null().to_numpy(zero_copy_only=False)
    starts, lengths = starts[keyed], lengths[keyed]
    if data is None or not data.size or not len(starts):
        raw, base = np.zeros(8, np.uint8), 0
    else:  # only the chunk's bytes: a sliced column keeps its parent's whole buffer
        base, end = int(starts.min()), int((starts + lengths).max())
        raw = np.frombuffer(data, np.uint8)[base:end]
    hashes = _murmur2(raw, starts - base, lengths)
    out[keyed] = ((hashes & np.uint32(0x7FFFFFFF)) % np.uint32(count)).astype(np.int32)
    return out


def _murmur2(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Kafka's murmur2 of each byte string data[start:start+length], all rows at once."""
    with np.errstate(over="ignore"):
        h = _SEED ^ lengths.astype(np.uint32)
        blocks = lengths // 4
        data = data.astype(np.uint32)
        for j in range(int(blocks.max()) if len(blocks) else 0):
            rows = np.flatnonzero(blocks > j)
            at = starts[rows] + 4 * j
            k = data[at] | (data[at + 1] << 8) | (data[at + 2] << 16) | (data[at + 3] << 24)
            k = k * _M
            k ^= k >> np.uint32(24)
            k = k * _M
            h[rows] = (h[rows] * _M) ^ k
        tail = lengths % 4
        end = starts + blocks * 4
        for size, shift in ((3, 16), (2, 8), (1, 0)):
            rows = np.flatnonzero(tail >= size)
            h[rows] ^= data[end[rows] + size - 1] << np.uint32(shift)
        rows = np.flatnonzero(tail > 0)
        h[rows] = h[rows] * _M
        h ^= h >> np.uint32(13)
        h = h * _M
        h ^= h >> np.uint32(15)
    return h


class ArrowProducer:
    """Produces Arrow value/key columns through the librdkafka handle of one confluent-kafka Producer."""

    def __init__(self, producer: Producer, rk: int) -> None:
        self._producer = producer  # keeps the handle alive as long as this object
        self._rk = rk
        self._lib = _library()

    @classmethod
    def of(cls, producer: Producer) -> ArrowProducer | None:
        rk = handle(producer)
        return None if rk is None else cls(producer, rk)

    def produce(
        self, topic: str, values, keys, rows: np.ndarray, partitions: np.ndarray
    ) -> tuple[int, KafkaError | None]:
        """Enqueue the records at `rows` (indices into the columns, ascending) to `topic`, each to its
        partition in `partitions` (same length). Returns how many of `rows` were enqueued, and the error
        of the first that was not: None when all were or when the queue was full (librdkafka then
        refuses every later record too: serve delivery reports and resume from there)."""
        values, keys = _one_array(values), None if keys is None else _one_array(keys)
        messages = np.zeros(len(rows), _MESSAGE)
        messages["partition"] = partitions
        messages["payload"], messages["len"] = _pointers_at(values, rows)
        if keys is not None:
            messages["key"], messages["key_len"] = _pointers_at(keys, rows)
        rkt = self._lib.rd_kafka_topic_new(self._rk, topic.encode(), None)
        if not rkt:
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG, f"topic {topic!r}"))
        try:
            enqueued = self._lib.rd_kafka_produce_batch(
                rkt, _PARTITION_UA, _MSG_F_COPY | _MSG_F_PARTITION, messages.ctypes.data, len(messages)
            )
        finally:
            self._lib.rd_kafka_topic_destroy(rkt)
        if enqueued == len(messages):
            return enqueued, None
        failed = int(np.flatnonzero(messages["err"])[0])
        code = int(messages["err"][failed])
        return failed, None if code == KafkaError._QUEUE_FULL else KafkaError(code)
