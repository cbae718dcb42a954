"""Every ```python block of README.md and docs/**/*.md (not the generated docs/reference/) run on the test
broker and Spark session, so that no code a user copies from the docs rots.

One case per page: a page is a tutorial, so its blocks run in order in one namespace, later blocks using the
names earlier ones defined. The namespace starts with `eos` imported, `spark` the suite's classic session, and
`eos.spark_session` returning that session (`eos.spark_session(remote=...)`: the suite's Spark Connect
session, switching the process to Connect mode as the real one does).

Before it runs, a page's code is pointed at this run (tests/support/mdcode.py): `127.0.0.1:9092` and
`localhost:9092` become the test broker; each topic the page names (`output_topic=`, `dead_letter_topic=`,
`.option("topic", ...)`, the list given to `eos.read_stream`, `kafka-topics.sh --create --topic` in its bash
blocks) gets a name of its own, created with 4 partitions, and seeded with a few records where the page
reads it; app ids get a suffix; checkpoints (`/tmp/ckpt...`, any `checkpointLocation` literal) go under
tmp_path. A block that starts a query gets a few new input records first, so that the query writes a batch.
After each block, every streaming query it started (and any the sessions still run) processes
what is available and stops; a query that failed fails the block.

A block that cannot run here says why on the line before its fence, `<!-- not run: <reason> -->`.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import traceback
import uuid
from pathlib import Path

import pytest

import eos
from eos import testing
from tests.support import mdcode
from tests.support.registry import Registry

PARTITIONS, PER_PARTITION = 4, 3

#: substitutions beyond the broker, topics, app ids and checkpoints, for what this suite's broker lacks
_NO_TLS = (
    '.option("kafka.security.protocol", "SASL_SSL")',
    '.option("kafka.security.protocol", "PLAINTEXT")',
)
_REGISTRY_URL = "https://registry:8081"
_REGISTRY_USER = "user:secret"  # the `basic.auth.user.info` the Schema Registry page shows
_SECRET_VARS = {"KAFKA_PASSWORD": "docs-test-secret"}  # read by the Security page's example

_RUN_PAGES = [p for p in mdcode.pages() if mdcode.python_blocks(p)]


def test_markers_have_reasons_and_includes_exist():
    """Across every page: each `not run` marker gives a reason and stands right before a Python block's
    fence; each `--8<--` Python block includes a file that exists."""
    problems = []
    for page in mdcode.pages():
        fences = {b.line - 1: b for b in mdcode.python_blocks(page)}
        for line, text in mdcode.markers(page):
            block = fences.get(line)
            if block is None:
                problems.append(f"{page}:{line}: {text!r} is not on the line right before a ```python fence")
            elif not block.not_run:
                problems.append(f"{page}:{line}: {text!r} gives no reason (<!-- not run: <reason> -->)")
        for block in mdcode.python_blocks(page):
            problems += [
                f"{page}:{block.line}: includes {path}, which does not exist"
                for path in block.includes
                if not (mdcode.ROOT / path).is_file()
            ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", _RUN_PAGES)
def test_page_code_runs(page, spark, bootstrap, tmp_path, request, monkeypatch):
    page_blocks = mdcode.blocks(page)
    python = [b for b in page_blocks if b.lang in ("python", "py")]
    unreasoned = [b.line for b in python if b.not_run == ""]
    assert not unreasoned, f"{page}: not-run markers without a reason before the blocks at lines {unreasoned}"

    run = uuid.uuid4().hex[:8]
    names = mdcode.page_names(page_blocks)
    for topic in names.topics:
        testing.create_topic(bootstrap, f"{topic}-{run}", PARTITIONS)
    sent = [0]

    def feed() -> None:  # PER_PARTITION more records in every partition of each topic the page reads
        for topic in names.read:
            testing.produce_sequence(bootstrap, f"{topic}-{run}", PARTITIONS, PER_PARTITION, start=sent[0])
        sent[0] += PER_PARTITION

    feed()
    checkpoints: dict[str, str] = {}

    def checkpoint(path: str) -> str:
        if path not in checkpoints:
            checkpoints[path] = str(
                tmp_path / f"ckpt{len(checkpoints)}-{re.sub(r'[^A-Za-z0-9]+', '-', path)}"
            )
        return checkpoints[path]

    extra = [_NO_TLS]
    if any(_REGISTRY_URL in b.code for b in python):
        user, password = _REGISTRY_USER.split(":")
        registry = Registry(users={user: password}).start()
        request.addfinalizer(registry.stop)
        extra.append((_REGISTRY_URL, registry.url))
    for var, value in _SECRET_VARS.items():
        if var not in os.environ:
            monkeypatch.setenv(var, value)
    _isolate_from_eos_variables(monkeypatch)

    sessions = {"classic": spark}

    def spark_session(app_name="eos", master=None, conf=None, remote=None):
        if remote is None:
            return spark
        sessions["connect"] = request.getfixturevalue("connect")  # skips where there is no Connect server
        monkeypatch.setenv("SPARK_LOCAL_REMOTE", "1")  # Connect mode, as eos.session._connect_mode() does
        monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
        return sessions["connect"]

    monkeypatch.setattr(eos, "spark_session", spark_session)
    started = _track_started_queries(monkeypatch)
    namespace = {"__name__": "docs_page", "eos": eos, "spark": spark}  # not importable: pickled by value

    ran, skipped, app_ids = [], [], {}
    try:
        for block in python:
            if block.not_run or block.includes:
                skipped.append(f"{block.line} ({block.not_run or 'includes ' + ', '.join(block.includes)})")
                continue
            code = mdcode.rewrite(
                block.code,
                bootstrap=bootstrap,
                topic=lambda t: f"{t}-{run}",
                app_id=lambda a: app_ids.setdefault(a, f"{a}-{run}"),
                checkpoint=checkpoint,
                extra=extra,
            )
            if ".start(" in code:  # new input, so the query it starts writes a batch (as a live stream does)
                feed()
            failure = None
            try:
                exec(compile("\n" * block.line + code, page, "exec"), namespace)  # markdown line numbers
                _settle(sessions.values(), started)
            except Exception as exc:  # noqa: BLE001 - any failure of a block fails the page, naming the block
                failure = _failure(page, block, exc)
            if failure:
                pytest.fail(failure, pytrace=False)
            ran.append(block.line)
    finally:  # a failed block, or a skip (no Connect server), leaves no query running for the next page
        _stop_all(sessions.values(), started)
        for app_id in app_ids.values():  # the state stores of a block that keeps the default state_dir
            shutil.rmtree(Path(tempfile.gettempdir(), "eos-state", app_id), ignore_errors=True)
    print(f"{page}: ran the blocks at lines {ran}; not run: {skipped or 'none'}")


def _isolate_from_eos_variables(monkeypatch) -> None:
    """The EOS_<setting> variables `Config.from_env` reads (a page calls it) are this test's business only."""
    from eos import config

    settings = {f"EOS_{name.upper()}" for name in config._SCALAR_FIELDS}
    groups = tuple(f"EOS_{group.upper()}_" for group in config._CLIENT_GROUPS)
    for var in list(os.environ):
        if var in settings or var.startswith(groups):
            monkeypatch.delenv(var)


def _track_started_queries(monkeypatch) -> list:
    """Every StreamingQuery `writeStream...start()` returns (classic and Connect), to settle after a block."""
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    writers = [DataStreamWriter]
    try:
        from pyspark.sql.connect.streaming.readwriter import DataStreamWriter as ConnectWriter

        writers.append(ConnectWriter)
    except ImportError:  # no Connect client installed
        pass
    started: list = []
    for writer in writers:
        original = writer.start

        def start(self, *args, _original=original, **kwargs):
            query = _original(self, *args, **kwargs)
            started.append(query)
            return query

        monkeypatch.setattr(writer, "start", start)
    return started


def _queries(sessions, started) -> list:
    by_id = {q.id: q for q in started}
    for session in sessions:
        for query in session.streams.active:
            by_id.setdefault(query.id, query)
    return list(by_id.values())


def _settle(sessions, started) -> None:
    """Each query: process what is available, stop; raise what a query failed with."""
    queries = _queries(sessions, started)
    started.clear()
    failure = None
    for query in queries:
        try:
            if query.isActive:
                query.processAllAvailable()
            failure = failure or query.exception()
        except Exception as exc:  # noqa: BLE001 - the first failure is raised once every query stopped
            failure = failure or exc
        finally:
            _stop(query)
    if failure is not None:
        raise failure


def _stop_all(sessions, started) -> None:
    for query in _queries(sessions, started):
        _stop(query)
    started.clear()


def _stop(query) -> None:
    try:
        query.stop()
    except Exception:  # noqa: BLE001 - stopping after a failure: the failure is what is reported
        pass


def _failure(page: str, block: mdcode.Block, exc: BaseException) -> str:
    """The page, the block's line, the line of the page where it failed, and the exception: its first line,
    then the error lines it carries (a Spark exception wraps the Python error of a task deep in its text)."""
    frames = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == page]
    where = f" (failed at {page}:{frames[-1]})" if frames else ""
    lines = f"{type(exc).__name__}: {exc}".splitlines()
    errors = dict.fromkeys(line for line in lines[1:] if _ERROR_LINE.match(line))
    shown = [lines[0][:500], *list(errors)[:5]] if errors else lines[:25]
    return f"{page}: the ```python block at line {block.line}{where} raised\n" + "\n".join(shown)


#: a Python exception's last line in a traceback text: `eos.errors.ProcessError: process raised ...`
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception)\b.*:")
