"""Process functions over Avro trades read by `value_deserializer` (tests/integration/test_decoders.py),
here because the workers import them by module (test modules are not importable there)."""

from __future__ import annotations

import eos


def describe(row, state):
    """Each trade as text: its reader-schema struct's fields (`venue` from the newer schema)."""
    trade = row.value
    return eos.Output(value=f"{trade['sym']}|{trade['qty']}|{trade['venue']}", key=trade["sym"])


def symbol(row, state):
    return eos.Output(value=row.value["sym"])
