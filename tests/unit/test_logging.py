"""eos's events are stdlib `logging` records under `eos`: the application's handlers, levels and
`dictConfig` govern them, eos's own stderr handler speaks only where no other handler would, and
`EOS_LOG_CONFIG` carries a configuration into processes the application's code never set up (the
executors' Python workers). Each case runs in a fresh interpreter: pytest's own handlers sit on the
root logger of this one."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap

import pytest

from eos import _log

EMIT = """
import logging, sys
from eos._log import get_logger
{before}
log = get_logger("eos.task", app_id="app-1", partition=3)
log.info("partition written", records=10, note="two words")
log.debug("hidden below INFO")
get_logger("eos.sink").warning("batch regrouped", batch_id=7)
{after}
"""


def _run(before: str = "", after: str = "", **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("EOS_LOG")}
    code = EMIT.format(before=textwrap.dedent(before), after=textwrap.dedent(after))
    return subprocess.run(
        [sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True, timeout=60
    )


def test_without_any_logging_setup_eos_prints_its_events_to_stderr_once():
    run = _run()
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 2, run.stderr
    assert "[info" in lines[0] and "partition written" in lines[0] and "[eos.task]" in lines[0]
    assert "app_id=app-1" in lines[0] and "records=10" in lines[0] and "two words" in lines[0]
    assert "[warning" in lines[1] and "batch regrouped" in lines[1] and "batch_id=7" in lines[1]


def test_eos_log_format_json_and_level():
    run = _run(EOS_LOG_FORMAT="json", EOS_LOG_LEVEL="debug")
    assert run.returncode == 0, run.stderr
    events = [json.loads(line) for line in run.stderr.splitlines()]
    assert [e["event"] for e in events] == ["partition written", "hidden below INFO", "batch regrouped"]
    assert events[0]["logger"] == "eos.task" and events[0]["partition"] == 3 and events[0]["level"] == "info"


def test_the_applications_handler_gets_every_event_and_eos_prints_nothing_itself():
    run = _run(
        before="""
        logging.basicConfig(stream=sys.stdout, format="%(name)s|%(levelname)s|%(message)s")
        """
    )
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""  # no second copy
    assert run.stdout.splitlines() == [
        "eos.task|INFO|partition written app_id=app-1 partition=3 records=10 note='two words'",
        "eos.sink|WARNING|batch regrouped batch_id=7",
    ]


def test_a_handler_configured_after_eos_first_logged_still_gets_the_rest():
    run = _run(
        after="""
        logging.basicConfig(stream=sys.stdout, format="%(message)s")
        get_logger("eos.task").info("restoring store", restored=5)
        """
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == "restoring store restored=5\n"
    assert len(run.stderr.splitlines()) == 2  # the two from before the application's set-up


def test_the_applications_level_for_eos_wins():
    run = _run(
        before="""
        logging.basicConfig(stream=sys.stdout, format="%(message)s")
        logging.getLogger("eos").setLevel(logging.WARNING)
        """
    )
    assert run.stdout == "batch regrouped batch_id=7\n", run.stderr


def test_structured_fields_reach_a_handler_as_record_eos():
    run = _run(
        before="""
        class Keep(logging.Handler):
            def emit(self, record):
                print(sorted(record.eos.items()))
        logging.getLogger().addHandler(Keep())
        """
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0] == str(
        sorted(
            {
                "event": "partition written",
                "app_id": "app-1",
                "partition": 3,
                "records": 10,
                "note": "two words",
            }.items()
        )
    )


def test_eos_log_configure_0_leaves_every_level_and_handler_to_the_application():
    run = _run(
        after="""
        print(logging.getLogger("eos").level, logging.getLogger("eos").handlers)
        """,
        EOS_LOG_CONFIGURE="0",
    )
    assert run.returncode == 0, run.stderr
    # Python's own last resort prints the warning, as for any library's
    assert run.stderr.splitlines() == ["batch regrouped batch_id=7"]
    assert run.stdout == "0 []\n"


def test_eos_log_config_applies_a_dictconfig_file(tmp_path):
    out = tmp_path / "eos.log"
    conf = tmp_path / "logging.json"
    conf.write_text(
        json.dumps(
            {
                "version": 1,
                "formatters": {"plain": {"format": "%(name)s %(levelname)s %(message)s"}},
                "handlers": {
                    "file": {"class": "logging.FileHandler", "filename": str(out), "formatter": "plain"}
                },
                "loggers": {"eos": {"level": "DEBUG", "handlers": ["file"]}},
            }
        )
    )
    run = _run(EOS_LOG_CONFIG=str(conf))
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    assert out.read_text().splitlines() == [
        "eos.task INFO partition written app_id=app-1 partition=3 records=10 note='two words'",
        "eos.task DEBUG hidden below INFO app_id=app-1 partition=3",
        "eos.sink WARNING batch regrouped batch_id=7",
    ]


def test_eos_log_formatter_in_a_dictconfig_renders_eos_lines(tmp_path):
    out = tmp_path / "eos.jsonl"
    conf = tmp_path / "logging.json"
    conf.write_text(
        json.dumps(
            {
                "version": 1,
                "formatters": {"eos": {"()": "eos.LogFormatter", "json": True}},
                "handlers": {
                    "file": {"class": "logging.FileHandler", "filename": str(out), "formatter": "eos"}
                },
                "root": {"handlers": ["file"]},
            }
        )
    )
    run = _run(EOS_LOG_CONFIG=str(conf))
    assert run.returncode == 0, run.stderr
    events = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(e["event"], e["level"], e["logger"]) for e in events] == [
        ("partition written", "info", "eos.task"),
        ("batch regrouped", "warning", "eos.sink"),
    ]


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"EOS_LOG_LEVEL": "loud"}, "EOS_LOG_LEVEL"),
        ({"EOS_LOG_CONFIG": "/nonexistent/logging.json"}, "EOS_LOG_CONFIG"),
        ({"EOS_LOG_CONFIG": "/nonexistent/logging.ini"}, "EOS_LOG_CONFIG"),
    ],
)
def test_a_bad_logging_variable_is_refused_by_name(env, named):
    run = _run(**env)
    assert run.returncode == 1
    assert f"invalid config {named!r}" in run.stderr, run.stderr


def test_librdkafka_records_render_as_eos_lines():
    record = logging.LogRecord(
        _log.KAFKA_LOGGER,
        logging.CRITICAL,
        __file__,
        1,
        "%s [%s] %s",
        ("FAIL", "rdkafka#producer-1", "down"),
        None,
    )
    line = _log.Formatter(json=True).format(record)
    shown = json.loads(line)
    assert shown["event"] == "librdkafka" and shown["facility"] == "FAIL" and shown["message"] == "down"
    assert shown["client"] == "rdkafka#producer-1" and shown["level"] == "critical"


def test_a_record_names_eos_s_call_site_not_structlog_s(caplog):
    caplog.set_level(logging.INFO, logger="eos")
    _log.get_logger("eos.task", a=1).info("here")  # this line
    (record,) = [r for r in caplog.records if r.name == "eos.task"]
    assert (record.filename, record.funcName) == (
        "test_logging.py",
        "test_a_record_names_eos_s_call_site_not_structlog_s",
    )
