"""A stand-in for `confluent_kafka.Message` where unit tests play the broker (consumers, delivery
reports): the accessors eos calls, nothing else."""

from __future__ import annotations

from eos._names import INPUT_OFFSET_HEADER, OWNER_HEADER


class Message:
    """`input_offset`, `owner`: the changelog headers eos writes (None: not written)."""

    def __init__(
        self,
        offset,
        key=None,
        value=None,
        input_offset=None,
        error=None,
        *,
        topic="t",
        partition=0,
        owner=None,
    ) -> None:
        self._offset, self._key, self._value, self._error = offset, key, value, error
        self._topic, self._partition = topic, partition
        headers = [] if input_offset is None else [(INPUT_OFFSET_HEADER, str(input_offset).encode())]
        if owner is not None:
            headers.append((OWNER_HEADER, owner))
        self._headers = headers or None

    def topic(self):
        return self._topic

    def partition(self):
        return self._partition

    def offset(self):
        return self._offset

    def key(self):
        return self._key

    def value(self):
        return self._value

    def error(self):
        return self._error

    def headers(self):
        return self._headers
