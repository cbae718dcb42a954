"""The fenced code blocks of the Markdown pages (README.md, docs/**/*.md), for the test that runs their
Python blocks (tests/integration/test_docs_code.py), and the text rewrites that point a page's code at the
test broker, topics, app ids and checkpoints of one test run.

A block that cannot run in the suite says so on the line right before its fence:
`<!-- not run: <reason> -->`. A `--8<-- "path"` block includes a tested file (MkDocs' snippets) and is not run
here; its file must exist.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[2]

#: `<!-- not run: reason -->`; also matches the malformed ones (no colon, no reason), which the test refuses
NOT_RUN = re.compile(r"^\s*<!--\s*not\s+run\b:?\s*(?P<reason>.*?)\s*-->\s*$", re.IGNORECASE)
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[^\s`]*)")
_INCLUDE = re.compile(r'^\s*--8<--\s+"(?P<path>[^"]+)"\s*$')


@attrs.frozen
class Block:
    page: str  # the page's path from the repository root
    line: int  # 1-based line of the opening fence; the code starts on the next line
    lang: str
    code: str  # the block's lines, less the fence's indentation
    #: the reason of the `not run` marker right before the fence; "" for a marker without one; None: no marker
    not_run: str | None = None

    @property
    def includes(self) -> list[str]:
        """The files a `--8<-- "path"` block includes (empty for a block of code)."""
        lines = [line for line in self.code.splitlines() if line.strip()]
        found = [m["path"] for m in map(_INCLUDE.match, lines) if m]
        return found if found and len(found) == len(lines) else []


def pages() -> list[str]:
    """README.md and docs/**/*.md, less the generated reference pages (docs/reference/)."""
    docs = sorted(
        p for p in (ROOT / "docs").rglob("*.md") if "reference" not in p.relative_to(ROOT / "docs").parts
    )
    return ["README.md", *(str(p.relative_to(ROOT)) for p in docs)]


def blocks(page: str) -> list[Block]:
    """Every fenced block of `page`, in order."""
    lines = (ROOT / page).read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not closing.match(lines[j]):
            body.append(_dedent(lines[j], indent))
            j += 1
        marker = NOT_RUN.match(lines[i - 1]) if i > 0 else None
        found.append(
            Block(page, i + 1, opening["lang"].lower(), "\n".join(body), marker["reason"] if marker else None)
        )
        i = j + 1
    return found


def python_blocks(page: str) -> list[Block]:
    return [b for b in blocks(page) if b.lang in ("python", "py")]


def markers(page: str) -> list[tuple[int, str]]:
    """(line, text) of every `not run` marker of `page`, wherever it stands."""
    lines = (ROOT / page).read_text().splitlines()
    return [
        (n, line.strip()) for n, line in enumerate(lines, 1) if re.search(r"<!--\s*not\s+run", line, re.I)
    ]


def _dedent(line: str, indent: int) -> str:
    stripped = len(line) - len(line.lstrip(" \t"))
    return line[min(indent, stripped) :]


# -- names a page's code uses ----------------------------------------------------------------------------

_Q = r"""(?P<q>["'])(?P<name>[^"'\s]+)(?P=q)"""
#: a topic name in Python: `output_topic="x"`, `dead_letter_topic="x"`, `.option("topic", "x")`, ...
_TOPIC_ARGS = [
    re.compile(rf"\b(?:output_topic|dead_letter_topic)\s*=\s*{_Q}"),
    re.compile(r"""\.option\(\s*["'](?:topic|eos\.output\.topic|eos\.dead\.letter\.topic)["']\s*,\s*""" + _Q),
]
#: the list of topics given to `eos.read_stream(spark, config, [...])` (or `topics=[...]`)
_READ_LISTS = re.compile(r"\bread_stream\([^\[\)]*\[(?P<list>[^\]]*)\]")
_LIST_ITEM = re.compile(_Q)
_CREATED = re.compile(
    r"--create\b[^\n]*?--topic[ =](?P<name>[\w.-]+)|--topic[ =](?P<name2>[\w.-]+)[^\n]*--create\b"
)
_APP_IDS = [
    re.compile(rf"\bapp_id\s*=\s*{_Q}"),
    re.compile(r"""\.option\(\s*["']eos\.app\.id["']\s*,\s*""" + _Q),
]
#: a checkpoint: any `/tmp/ckpt...` literal, and any literal given as `checkpointLocation`
_CHECKPOINTS = [
    re.compile(r"""(?P<q>["'])(?P<name>/tmp/ckpt[^"']*)(?P=q)"""),
    re.compile(r"""\.option\(\s*["']checkpointLocation["']\s*,\s*""" + _Q),
]
_BOOTSTRAPS = ("127.0.0.1:9092", "localhost:9092")


@attrs.frozen
class PageNames:
    """The topics a page's code writes or reads, and which of them it reads."""

    topics: tuple[str, ...]
    read: tuple[str, ...]


def page_names(page_blocks: Iterable[Block]) -> PageNames:
    topics: dict[str, None] = {}
    read: dict[str, None] = {}
    for block in page_blocks:
        if block.lang == "bash":
            for m in _CREATED.finditer(block.code):
                topics[m["name"] or m["name2"]] = None
            continue
        if block.lang not in ("python", "py") or block.not_run is not None:
            continue
        for pattern in _TOPIC_ARGS:
            topics.update((m["name"], None) for m in pattern.finditer(block.code))
        for listed in _READ_LISTS.finditer(block.code):
            for m in _LIST_ITEM.finditer(listed["list"]):
                topics[m["name"]] = read[m["name"]] = None
    return PageNames(tuple(topics), tuple(read))


def rewrite(
    code: str,
    *,
    bootstrap: str,
    topic: Callable[[str], str],
    app_id: Callable[[str], str],
    checkpoint: Callable[[str], str],
    extra: Iterable[tuple[str, str]] = (),
) -> str:
    """`code` pointed at one test run: the broker, each topic, app id and checkpoint literal mapped by the
    functions given, then the `extra` (old, new) text replacements. Lines stay where they are."""
    for old in _BOOTSTRAPS:
        code = code.replace(old, bootstrap)
    topic, app_id, checkpoint = _once(topic), _once(app_id), _once(checkpoint)

    def sub(pattern: re.Pattern, name: Callable[[str], str], text: str) -> str:
        def one(m: re.Match) -> str:
            start, end = m.span("name")
            whole = m.group(0)
            return whole[: start - m.start()] + name(m["name"]) + whole[end - m.start() :]

        return pattern.sub(one, text)

    for pattern in _TOPIC_ARGS:
        code = sub(pattern, topic, code)
    code = _READ_LISTS.sub(lambda m: sub(_LIST_ITEM, topic, m.group(0)), code)
    for pattern in _APP_IDS:
        code = sub(pattern, app_id, code)
    for pattern in _CHECKPOINTS:
        code = sub(pattern, checkpoint, code)
    for old, new in extra:
        code = code.replace(old, new)
    return code


def _once(name: Callable[[str], str]) -> Callable[[str], str]:
    """`name`, leaving a name it returned as it is (two patterns may match the same literal)."""
    given: set[str] = set()

    def mapped(old: str) -> str:
        if old in given:
            return old
        new = name(old)
        given.add(new)
        return new

    return mapped
