"""on_error="dead_letter": which records of an input partition are dead, and what their dead letters carry.

A bad record (a `RecordError` with `poison` set) is found while its transaction is open; the task aborts
that transaction, adds the record here and writes the transaction's input again (`eos._core._task`), this time
with the record's dead letter instead of its outputs. So a dead letter commits in the same transaction
as the outputs of the records around it and their input offset: exactly once, like them. The aborted
attempt's state writes are dropped with it, so a `process` that raised halfway leaves nothing behind.

A dead letter is the input row as it reached the sink (its `key`, `value` and `headers` columns) with
headers naming the error, named as Kafka Streams names its dead letters' (KIP-1034), under `__eos.`.
"""

from __future__ import annotations

import json
import traceback
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from eos._core import _arrow
from eos._core._arrow import Layout
from eos._kafka import _translate
from eos.config import Config
from eos.errors import ProcessError, ProduceError, RecordError, TooManyDeadLettersError
from eos.records import Output, is_bytes

PREFIX = "__eos.errors."
#: the error's class: the user's exception where `process` raised, else eos's (ProduceError, ...)
EXCEPTION = PREFIX + "exception"
#: eos's class of the error (ProcessError, ProduceError)
KIND = PREFIX + "kind"
MESSAGE = PREFIX + "message"
#: the user's exception's traceback (at most STACKTRACE_BYTES), where `process` raised
STACKTRACE = PREFIX + "stacktrace"
TOPIC = PREFIX + "topic"
PARTITION = PREFIX + "partition"
OFFSET = PREFIX + "offset"
APP_ID = PREFIX + "app.id"
BATCH_ID = PREFIX + "batch.id"
#: where the value is left out (a pass-through value the broker refused as too large): its size
VALUE_BYTES = PREFIX + "value.bytes"

STACKTRACE_BYTES = 8192


class DeadLetters:
    """The dead records of one input partition in one batch, by input offset, and their bound."""

    def __init__(self, config: Config, topic: str, partition: int, batch_id: int) -> None:
        self.config = config
        self.topic = topic
        self.partition = partition
        self.batch_id = batch_id
        self.found: dict[int, RecordError] = {}

    @classmethod
    def of(cls, config: Config, topic: str, partition: int, batch_id: int) -> DeadLetters | None:
        return cls(config, topic, partition, batch_id) if config.on_error == "dead_letter" else None

    def add(self, exc: RecordError) -> None:
        """`exc`'s record is dead from now on; raises past the bound, or where its dead letter was refused."""
        if exc.offset in self.found:
            raise letter_refused(exc.reason, self.found[exc.offset].reason, **self._where(exc)) from exc
        if len(self.found) >= self.config.max_dead_letters_per_batch:
            count = len(self.found) + 1
            raise too_many(self.config, self.batch_id, count, exc.reason, **self._where(exc)) from exc
        self.found[exc.offset] = exc

    def _where(self, exc: RecordError) -> dict[str, Any]:
        """The input record an error of `exc`'s record names."""
        return {"topic": self.topic, "partition": self.partition, "offset": exc.offset}

    def split(self, rows: pa.RecordBatch, layout: Layout) -> tuple[pa.RecordBatch, pa.RecordBatch | None]:
        """`rows` without the dead ones, and the dead ones (None if there are none)."""
        if not self.found:
            return rows, None
        dead = pc.is_in(rows.column(layout.offset), value_set=pa.array(list(self.found), pa.int64()))
        if not pc.any(dead).as_py():
            return rows, None
        return rows.filter(pc.invert(dead)), rows.filter(dead)

    def letter(self, row: pa.RecordBatch, offset: int, passthrough: bool) -> Output:
        """The dead letter of the one-row batch `row` (input offset `offset`)."""
        exc = self.found[offset]
        # the exception `process` raised (or the OutputTypeError of what it returned); a refusal's own
        # cause is the client library's exception, which says less than eos's class
        cause = exc.__cause__ if isinstance(exc, ProcessError) else None
        fields = {name: _as_sent(row, name) for name in ("key", "value") if name in row.schema.names}
        value = fields.get("value")
        headers = _input_headers(row)
        headers += [
            (EXCEPTION, class_name(cause if cause is not None else exc)),
            (KIND, type(exc).__name__),
            (MESSAGE, exc.reason),
            (TOPIC, self.topic),
            (PARTITION, str(self.partition)),
            (OFFSET, str(offset)),
            (APP_ID, self.config.app_id),
            (BATCH_ID, str(self.batch_id)),
        ]
        if cause is not None:
            trace = "".join(traceback.format_exception(type(cause), cause, cause.__traceback__))
            headers.append((STACKTRACE, trace.encode("utf-8", "replace")[-STACKTRACE_BYTES:]))
        if passthrough and value is not None and _too_large(exc):
            size = len(value.encode("utf-8") if isinstance(value, str) else value)
            headers.append((VALUE_BYTES, str(size)))
            value = None
        return Output(
            value=value,
            key=fields.get("key"),
            headers=[(k, v.encode("utf-8") if isinstance(v, str) else v) for k, v in headers],
        )


def letter_refused(reason: str, first: str, *, topic: str, partition: int, offset: int) -> ProduceError:
    """The error where a bad record's dead letter was refused too (`reason`); `first`: its own error."""
    return ProduceError(
        f"the dead letter of this record was refused too ({reason}); its error was: {first}",
        topic=topic,
        partition=partition,
        offset=offset,
    )


def too_many(
    config: Config, batch_id: int, count: int, last: str, *, topic: str, partition: int, offset: int
) -> TooManyDeadLettersError:
    """The error of the `count`th bad record of an input partition in a batch, past the bound."""
    return TooManyDeadLettersError(
        f"{count} bad records in batch {batch_id} of input partition {topic}/{partition}, more than"
        f" max_dead_letters_per_batch ({config.max_dead_letters_per_batch}); the last: {last}",
        topic=topic,
        partition=partition,
        offset=offset,
    )


def _as_sent(row: pa.RecordBatch, name: str) -> bytes | str | None:
    """Column `name` of the one-row batch as a dead letter carries it: bytes or text as they are, any
    other type (the struct a Schema Registry serializer did not take) as JSON text."""
    value = row.column(name)[0].as_py()
    if value is None or is_bytes(row.schema.field(name).type):
        return value
    return json.dumps(value, default=str, ensure_ascii=False)


def _input_headers(row: pa.RecordBatch) -> list[tuple[str, bytes | None]]:
    index = row.schema.get_field_index("headers")
    if index < 0:
        return []
    try:
        return _arrow.headers_of(row.column(index))[0] or []
    except (KeyError, TypeError):  # a column named headers that is not Spark's Kafka headers
        return []


def class_name(exc: BaseException) -> str:
    module = type(exc).__module__
    return type(exc).__qualname__ if module == "builtins" else f"{module}.{type(exc).__qualname__}"


def _too_large(exc: RecordError) -> bool:
    return _translate.is_too_large(getattr(exc, "kafka_error", None))
