"""Arrow columns handed to librdkafka in one call per chunk: no Python object per output record.

confluent-kafka's `produce()` costs a call and a `bytes` per record, and its `produce_batch` a dict per
record. librdkafka's own `rd_kafka_produce_batch` takes an array of `rd_kafka_message_t`, which NumPy
fills from an Arrow binary column's offsets without a loop. It runs on the `rd_kafka_t` that
confluent-kafka's `Producer` holds, so the records join that producer's open transaction and its
flush, commit and abort. Their delivery reports carry no confluent-kafka state and are dropped there:
this path is for transactional producers only, whose `commit_transaction()` fails when any record
was not delivered (the task then redoes the transaction record by record, naming the one refused).

The handle is not part of confluent-kafka's API: `handle()` reads it from the object and uses it only
when the library it resolves is the one confluent-kafka reports and the handle's opaque is that very
Producer (confluent-kafka sets it so). Anything else returns None and the caller keeps the loop.
No compiler is needed: ctypes and NumPy. docs/design.md ("The produce path fed from Arrow") has the
measurements.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np
import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer, libversion
from confluent_kafka import cimpl as _cimpl

from eos._log import get_logger
from eos.records import is_bytes

#: records per rd_kafka_produce_batch call: a 720 KB message array, and the delivery reports served
#: between calls
CHUNK = 10_000
_RD_KAFKA_PRODUCER = 0
_PARTITION_UA = -1
_MSG_F_COPY = 0x2

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
        get_logger().debug("arrow produce unavailable", reason=str(exc))
        return None
    return lib


def handle(producer: Producer) -> int | None:
    """The `rd_kafka_t *` of a confluent-kafka Producer, or None where it cannot be proven to be one.

    confluent-kafka's handle object starts with the Python object header and then `rk`; librdkafka's
    opaque of that `rk` is the Python object itself (confluent-kafka sets it for its callbacks)."""
    lib = _library()
    if lib is None or not isinstance(producer, Producer):
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

    def produce(self, topic: str, values, keys, start: int, stop: int) -> tuple[int, KafkaError | None]:
        """Enqueue records start..stop-1 to `topic` (the partitioner places each by its key). Returns how
        many from `start` on were enqueued, and the error of the first that was not: None when all were
        or when the queue was full (librdkafka then refuses every later record too: serve delivery
        reports and resume from there)."""
        values, keys = _one_array(values), None if keys is None else _one_array(keys)
        messages = np.zeros(stop - start, _MESSAGE)
        messages["partition"] = _PARTITION_UA
        messages["payload"], messages["len"] = _pointers(values, start, stop)
        if keys is not None:
            messages["key"], messages["key_len"] = _pointers(keys, start, stop)
        rkt = self._lib.rd_kafka_topic_new(self._rk, topic.encode(), None)
        if not rkt:
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG, f"topic {topic!r}"))
        try:
            enqueued = self._lib.rd_kafka_produce_batch(
                rkt, _PARTITION_UA, _MSG_F_COPY, messages.ctypes.data, len(messages)
            )
        finally:
            self._lib.rd_kafka_topic_destroy(rkt)
        if enqueued == len(messages):
            return enqueued, None
        failed = int(np.flatnonzero(messages["err"])[0])
        code = int(messages["err"][failed])
        return failed, None if code == KafkaError._QUEUE_FULL else KafkaError(code)
