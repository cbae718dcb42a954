"""Dead letters read back as the tests check them: read_committed to a marker, by the input record each
names."""

from __future__ import annotations

from eos import testing
from eos.testing import OutputRecord


def letters_by_input(
    bootstrap: str, dead_letters: str, source: str
) -> dict[tuple[int, int], list[OutputRecord]]:
    """The dead letters of `dead_letters`, by the (partition, offset) of the input record of `source` each
    names; none may hang in an open transaction, and each must name `source`."""
    letters, hanging = testing.read_topic(
        bootstrap, dead_letters, marker=testing.write_markers(bootstrap, dead_letters)
    )
    assert hanging == [], f"a transaction of {dead_letters} stays open: {hanging}"
    out: dict[tuple[int, int], list[OutputRecord]] = {}
    for letter in letters:
        headers = dict(letter.headers)
        assert headers["__eos.errors.topic"] == source.encode(), headers
        where = (int(headers["__eos.errors.partition"]), int(headers["__eos.errors.offset"]))
        out.setdefault(where, []).append(letter)
    return out
