"""`eos --version`: the version of the eos package the command runs, on stdout, exit code 0."""

from __future__ import annotations

import subprocess
import sys

import pytest

import eos
from eos.cli import EXIT_OK, build_parser, main


def test_version_prints_the_package_version_and_exits_0(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == EXIT_OK
    out, err = capsys.readouterr()
    assert out == f"eos {eos.__version__}\n"
    assert err == ""


def test_version_needs_no_subcommand_and_no_broker():
    # the real entry point (python -m eos.cli is the `eos` script's program), with no broker to reach
    done = subprocess.run(
        [sys.executable, "-m", "eos.cli", "--version", "--bootstrap-server", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == EXIT_OK, done.stderr
    assert done.stdout.strip() == f"eos {eos.__version__}"


def test_version_is_in_the_help():
    assert "--version" in build_parser({}).format_help()
