"""docs/protocol.md's module map against the tree: every module of eos is named there, and every module
it names exists, so the map a reader follows is the code they will open."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _map() -> str:
    text = (ROOT / "docs" / "protocol.md").read_text()
    start = text.index("## Modules")
    return text[start : text.index("\n## ", start + 1)]


def test_every_module_is_on_the_map():
    text = _map()
    modules = [p for p in (ROOT / "eos").rglob("*.py") if p.name != "__init__.py" or p.parent.name == "eos"]
    missing = [
        str(p.relative_to(ROOT)) for p in modules if f"`{p.name}`" not in text and f"{p.name}`" not in text
    ]
    assert missing == [], f"docs/protocol.md's module map does not name {missing}"


def test_every_module_on_the_map_exists():
    named = re.findall(r"`(eos/[\w/]+\.py)`", _map())
    assert named, "the module map names no module by its path"
    gone = [path for path in named if not (ROOT / path).is_file()]
    assert gone == [], f"docs/protocol.md's module map names modules that do not exist: {gone}"
