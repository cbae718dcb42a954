"""The commands CommitLostError advises are ones `eos` accepts: parsed by its own parser, and not the
`--topic` with `--to JSON` combination it refuses."""

from __future__ import annotations

import re
import shlex

from eos import _names
from eos._core._incarnation import commit_lost as _lost
from eos._kafka import _offsets
from eos._scope import PartitionScope
from eos.cli._main import build_parser
from tests.support.configs import config


def _commands(text: str) -> list[list[str]]:
    return [shlex.split(c)[1:] for c in re.findall(r"`(eos [^`]+)`", text)]


def _accepted(argv: list[str]) -> None:
    args = build_parser({}).parse_args(["--bootstrap-server", "b:1", *argv])
    if args.command == "offsets":
        assert not (args.topic and isinstance(args.to, dict)), argv  # refused by `offsets reset`


def test_an_input_partitions_lost_commit_advises_commands_eos_accepts():
    cfg = config(processing_guarantee="exactly_once")
    scope = PartitionScope.of(cfg, "in", 3, 7)
    stamp = _offsets.stamp(cfg, witnesses={("out", 1): 5}, since=120)
    error = _lost(scope, _offsets.Committed(200, stamp), _offsets.fields(stamp), 4, (("out", 1, 5),))
    commands = _commands(str(error))
    assert [c[0] for c in commands] == ["repair", "offsets", "offsets"], str(error)
    for argv in commands:
        _accepted(argv)
    assert '{"in": {"3": 120}}' in str(error) and "out/1" in str(error)


def test_a_foreign_progress_offset_advises_dropping_that_parts_progress():
    cfg = config()
    topic = _names.parts_topic(cfg.app_id)
    message = _offsets._foreign_message(cfg, topic, 2, _offsets.Committed(5, "by someone else"))
    (argv,) = _commands(message)
    _accepted(argv)
    assert "--drop-progress" in argv and f'{{"{topic}": {{"2": -2}}}}' in argv
