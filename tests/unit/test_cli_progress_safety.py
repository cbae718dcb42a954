"""`eos offsets reset` and the progress topic of input_mode "any", without a broker: naming it without
--drop-progress, or --drop-progress without naming it, is refused (exit 2) before any broker call."""

from __future__ import annotations

import json

import pytest

from eos.cli import main
from eos.cli._base import EXIT_USAGE

#: nothing listens there: a command that got as far as the broker would fail with exit 4, not 2
NOWHERE = ["--bootstrap-servers", "127.0.0.1:9", "--timeout", "1"]


def reset(*args: str) -> int:
    return main([*NOWHERE, "offsets", "reset", "--app", "shop", *args])


@pytest.mark.parametrize(
    "args",
    [
        ["--to", "earliest", "--topic", "shop-eos-parts", "--execute"],
        ["--shift", "0", "--topic", "in", "--topic", "shop-eos-parts"],
        ["--to", json.dumps({"shop-eos-parts": {"0": -2}})],
        ["--to-datetime", "2026-01-01T00:00:00Z", "--topic", "shop-eos-parts"],
    ],
)
def test_naming_the_progress_topic_without_drop_progress_is_refused(capsys, args):
    assert reset(*args) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("eos: error: refused: 'shop-eos-parts' is the progress topic of input_mode 'any'")
    assert "Nothing was changed" in err and "add --drop-progress" in err
    assert "eos parts show --app shop" in err


@pytest.mark.parametrize("args", [["--to", "earliest"], ["--to", "earliest", "--topic", "in"]])
def test_drop_progress_without_the_progress_topic_is_refused(capsys, args):
    assert reset(*args, "--drop-progress") == EXIT_USAGE
    assert "--drop-progress applies to the progress topic only: name it with --topic shop-eos-parts" in (
        capsys.readouterr().err
    )
