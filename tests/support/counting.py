"""What a running count per key (examples/pipeline.py `count_per_key`, a `json` store named `counts`)
must leave in its changelog for `eos.testing.produce_sequence` input (keys k0..k96), recomputed from
the input alone."""

from __future__ import annotations

from collections.abc import Mapping

from eos.testing import parse_value, read_topic


def expected_final_counts(sent: Mapping[int, list[bytes]], keys: int = 97) -> dict[tuple[int, bytes], int]:
    """For `produce_sequence` input: the final count per (input partition, key)."""
    out: dict[tuple[int, bytes], int] = {}
    for partition, values in sent.items():
        for value in values:
            key = (partition, f"k{parse_value(value)[2] % keys}".encode())
            out[key] = out.get(key, 0) + 1
    return out


def final_state(bootstrap: str, changelog: str, timeout: float = 60) -> dict[tuple[int, bytes], bytes | None]:
    """The last committed value per (partition, key) of a changelog topic: the store's state."""
    records, _ = read_topic(bootstrap, changelog, timeout=timeout)
    state: dict[tuple[int, bytes], bytes | None] = {}
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        state[(r.partition, r.key)] = r.value
    return state


def changelog_mismatches(bootstrap: str, changelog: str, sent: Mapping[int, list[bytes]]) -> int:
    """Keys whose last committed count in the changelog differs from the recomputation from the
    input (`produce_sequence` input, a `json` count store), plus keys that should not exist."""
    expected = expected_final_counts(sent)
    state = final_state(bootstrap, changelog)
    return sum(1 for k, n in expected.items() if state.get(k) != str(n).encode()) + sum(
        1 for k in state if k not in expected
    )
