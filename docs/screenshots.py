"""The docs site as a reader sees it: the pages below of the built site (`make docs` first), shot by
headless Chromium at 1280 px wide, into docs/assets/screenshots/ (or `--out`).

    .venv/bin/python docs/screenshots.py [--out DIR] [--width 1280] [--height 1600]

Needs a `chromium` on PATH (Debian: `apt-get install -y chromium`). The site is served from `site/` on a
free local port for the shots only.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: (file name, page): the pages a newcomer reads first, and the references their errors lead to
PAGES = (
    ("home", ""),
    ("moving-a-query", "guide/moving-a-query/"),
    ("configuration", "reference/configuration/"),
    ("errors", "reference/errors/"),
    ("api", "reference/api/"),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "assets" / "screenshots")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=1600)
    args = parser.parse_args()
    site = ROOT / "site"
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not (site / "index.html").exists():
        sys.exit("no site/index.html: run `make docs` first")
    if browser is None:
        sys.exit("no chromium on PATH (Debian: apt-get install -y chromium)")
    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    args.out.mkdir(parents=True, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="eos-screenshots-")
    try:
        for name, page in PAGES:
            target = args.out / f"{name}.png"
            url = f"http://127.0.0.1:{server.server_port}/{page}"
            subprocess.run(
                [
                    browser,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    # no calls home (a closed network refuses them, slowly), no profile of the user's
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--no-first-run",
                    f"--user-data-dir={profile}",
                    "--hide-scrollbars",
                    f"--window-size={args.width},{args.height}",
                    f"--screenshot={target}",
                    url,
                ],
                check=True,
                capture_output=True,
                timeout=120,
            )
            print(f"{url} -> {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")
    finally:
        server.shutdown()
        shutil.rmtree(profile, ignore_errors=True)
    return 0


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


if __name__ == "__main__":
    sys.exit(main())
