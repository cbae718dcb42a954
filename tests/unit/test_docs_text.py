"""The documentation is text for eos' users, not an engineering log: README.md and the pages under docs/
(not docs/reference/*.md, which docs/gen_reference.py writes, nor docs/changelog.md) name no commit
hash, no issue of eos' own tracker, no test function and no "this machine". A figure says where it
comes from by eos version, date, hardware and the command that measures it again; a test is named by
its file (`tests/integration/test_sink.py`). Upstream references stay: a link to another project's
issue (`[librdkafka#4849](https://github.com/confluentinc/librdkafka/issues/4849)`), KAFKA- and
SPARK- ids. Nothing inside a URL is checked."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# generated from the code (docs/gen_reference.py), and the changelog, which includes CHANGELOG.md
SKIPPED = {DOCS / "changelog.md"}
SKIPPED_DIRS = {DOCS / "reference"}

URL = re.compile(r"https?://\S+")
# 7 to 40 lowercase hex digits standing alone: a commit hash when it holds a letter and a digit
# (2000000 is a number, "defaced" a word)
HEX = re.compile(r"\b[0-9a-f]{7,40}\b")
# "issue 25", or "#25" standing alone (not Spark's `key#8` in a plan, an HTML entity or `librdkafka#4849`)
ISSUE = re.compile(r"\bissue\s+#?\d+|(?<![\w&#/])#\d+\b", re.IGNORECASE)
THIS_MACHINE = re.compile(r"\bthis machine\b", re.IGNORECASE)
# a test function; a test file (`tests/unit/test_x.py`) is fine
TEST_NAME = re.compile(r"\btest_[a-z0-9_]+\b(?!\.py)")


class Finding(NamedTuple):
    line: int
    kind: str
    match: str


def pages() -> list[Path]:
    found = [ROOT / "README.md"]
    for path in sorted(DOCS.rglob("*.md")):
        if path in SKIPPED or any(folder in path.parents for folder in SKIPPED_DIRS):
            continue
        found.append(path)
    return [path for path in found if path.exists()]


def _outside(urls: list[tuple[int, int]], match: re.Match[str]) -> bool:
    start, end = match.span()
    return not any(url_start <= start and end <= url_end for url_start, url_end in urls)


def findings(text: str) -> list[Finding]:
    """What in `text` reads as an engineering log, by line (1-based)."""
    out: list[Finding] = []
    for number, line in enumerate(text.splitlines(), start=1):
        urls = [match.span() for match in URL.finditer(line)]
        outside_urls = partial(_outside, urls)
        for match in HEX.finditer(line):
            token = match.group()
            if outside_urls(match) and re.search(r"[a-f]", token) and re.search(r"\d", token):
                out.append(Finding(number, "commit hash", token))
        # an issue of another project is linked to it on the same line (github.com/<owner>/<repo>/issues)
        if "github.com/" not in line:
            out.extend(
                Finding(number, "issue number", match.group())
                for match in ISSUE.finditer(line)
                if outside_urls(match)
            )
        out.extend(
            Finding(number, '"this machine"', match.group())
            for match in THIS_MACHINE.finditer(line)
            if outside_urls(match)
        )
        out.extend(
            Finding(number, "test function name", match.group())
            for match in TEST_NAME.finditer(line)
            if outside_urls(match)
        )
    return out


@pytest.mark.parametrize("page", pages(), ids=lambda path: str(path.relative_to(ROOT)))
def test_the_page_carries_no_engineering_log(page):
    name = page.relative_to(ROOT)
    problems = findings(page.read_text(encoding="utf-8"))
    assert not problems, (
        f"{name} reads as an engineering log (say a figure's eos version, date, hardware and command; name a"
        " test by its file):\n" + "\n".join(f"{name}:{f.line}: {f.kind}: {f.match}" for f in problems)
    )


def test_the_pages_are_found():
    names = {str(path.relative_to(ROOT)) for path in pages()}
    assert {"README.md", "docs/design.md", "docs/protocol.md", "docs/cli.md"} <= names
    assert not any(name.startswith("docs/reference/") for name in names)
    assert "docs/changelog.md" not in names


@pytest.mark.parametrize(
    "line, kind",
    [
        ("Then: 2a37402 (2026-11-22), init of a fresh producer", "commit hash"),
        ("before (376a46a's parent) and after", "commit hash"),
        ("a full hash 0123456789abcdef0123456789abcdef01234567 too", "commit hash"),
        ("Since issue 25 the tasks look at the data", "issue number"),
        ("as Issue #25 asked", "issue number"),
        ("fixed in (#25)", "issue number"),
        ("Measured on this machine (400,000 records)", '"this machine"'),
        ("the test: `test_a_kept_producer_aborts`", "test function name"),
        ("pytest tests/integration/test_sink.py::test_pipeline_output_equals_input", "test function name"),
    ],
)
def test_the_check_finds(line, kind):
    assert [f.kind for f in findings(line)] == [kind]


@pytest.mark.parametrize(
    "line",
    [
        "2,000,000 records at 2000000 per trigger on 2026-11-22, eos 0.1.0",
        "a digest `5d0824…`, a word like defaced or deadbeef",
        "[librdkafka#4849](https://github.com/confluentinc/librdkafka/issues/4849): an abort",
        "librdkafka issue 4849 (https://github.com/confluentinc/librdkafka/issues/4849)",
        "see https://example.com/commit/2a37402abc and https://example.com/test_page",
        "KAFKA-14402 and SPARK-49461",
        "*(1) Scan ExistingRDD[key#8,value#9,offset#16L]",
        "`tests/integration/test_realtime_mode.py` and tests/unit/test_docs_text.py",
        "the machine the command runs on",
    ],
)
def test_the_check_lets_pass(line):
    assert findings(line) == []


def test_the_readme_stays_short():
    """The README is the front page: the rest belongs to the guide (docs/)."""
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= 250, f"README.md has {lines} lines: move detail to docs/ (at most 250)"


SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+$")


def _split_tables(text: str) -> list[int]:
    """Lines where a table goes on after a blank line without a header of its own: Markdown ends the table
    at the blank line and shows the rest as raw pipes."""
    lines = [*text.splitlines(), ""]
    return [
        i + 2
        for i in range(1, len(lines) - 2)
        if not lines[i].strip()
        and lines[i - 1].startswith("|")
        and lines[i + 1].startswith("|")
        and not SEPARATOR.match(lines[i + 2].strip())
    ]


def test_no_table_is_split_by_a_blank_line():
    assert _split_tables("| a | b |\n|---|---|\n| 1 | 2 |\n\n| 3 | 4 |\n") == [5]
    assert _split_tables("| a |\n|---|\n| 1 |\n\n| b |\n|---|\n| 2 |\n") == []
    found = {
        str(p.relative_to(ROOT)): _split_tables(p.read_text())
        for p in [ROOT / "README.md", *DOCS.rglob("*.md")]
    }
    assert not {k: v for k, v in found.items() if v}, "a blank line inside a table"


#: characters of code the docs site's content column shows at 1280 px beside both sidebars; a longer
#: line is cut off behind a scroll bar
CODE_COLUMNS = 84
#: blocks that show what a command printed: kept as printed, they scroll
VERBATIM = {"text", "console", "log"}
FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)")


def long_code_lines(text: str, limit: int = CODE_COLUMNS) -> list[int]:
    """Lines (1-based) of code a reader copies (Python, bash, JSON, no language given...) longer than
    `limit`: not the blocks of VERBATIM output."""
    found, fence, language = [], None, ""
    for number, line in enumerate(text.splitlines(), start=1):
        match = FENCE.match(line)
        if match and fence is None:
            fence, language = match.group(1), match.group(2)
        elif match and match.group(1).startswith(fence) and not line.strip()[len(match.group(1)) :]:
            fence = None
        elif fence is not None and language not in VERBATIM and len(line) > limit:
            found.append(number)
    return found


def test_no_code_line_is_wider_than_the_content_column():
    assert long_code_lines("```python\n" + "x" * 85 + "\n```\n" + "y" * 90) == [2]
    assert long_code_lines("```text\n" + "x" * 85 + "\n```\n```\n" + "z" * 85 + "\n```") == [5]
    assert long_code_lines("    ```bash\n    " + "x" * 84 + "\n    ```") == [2]
    found = {
        str(p.relative_to(ROOT)): long_code_lines(p.read_text())
        for p in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    }
    found = {k: v for k, v in found.items() if v}
    assert not found, f"code lines over {CODE_COLUMNS} characters (wrap them): {found}"


def test_the_api_page_documents_every_exported_name():
    """docs/reference/api.md lists its names by hand, grouped by use: a name added to `eos.__all__` must
    get a place there (an exception class: the generated Errors page has every one)."""
    import eos

    page = (DOCS / "reference" / "api.md").read_text()
    errors = (DOCS / "reference" / "errors.md").read_text()
    missing = [
        name
        for name in eos.__all__
        if f"::: eos.{name}\n" not in page
        and f"`eos.{name}`" not in page
        and not (isinstance(getattr(eos, name), type) and issubclass(getattr(eos, name), BaseException))
    ]
    assert not missing, f"not on docs/reference/api.md: {missing}"
    assert not [
        n
        for n in eos.__all__
        if isinstance(getattr(eos, n), type)
        and issubclass(getattr(eos, n), BaseException)
        and f"## `{n}`" not in errors
    ]


def test_the_api_page_describes_every_parameter():
    """Each parameter (or attrs field) of a name docs/reference/api.md renders is named in backticks in
    its docstring, which the page shows as written. Config's settings are on the Configuration page."""
    import inspect

    import eos

    page = (DOCS / "reference" / "api.md").read_text()
    undescribed = {}
    for name in re.findall(r"^::: eos\.(\w+)", page, re.M):
        obj = getattr(eos, name)
        if obj is eos.Config or not callable(obj):
            continue
        try:
            parameters = inspect.signature(obj).parameters
        except (TypeError, ValueError):
            continue
        doc = obj.__doc__ or ""
        if inspect.isclass(obj) and obj.__init__ is not object.__init__:
            doc += obj.__init__.__doc__ or ""
        missing = [
            p
            for p, parameter in parameters.items()
            if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD) or p == "options"
            if not re.search(rf"`{p}[`=:(]", doc)
        ]
        if missing:
            undescribed[name] = missing
    assert not undescribed, f"parameters the API page does not describe: {undescribed}"
