"""Build the documentation site, serve it, and screenshot three pages in headless Chromium, to see the site
as a reader does: the home page, the results overview (results/index.md) and the config reference.

    python scripts/docs_screenshots.py [OUTDIR] [--config mkdocs.yml]    # OUTDIR: outputs/docs-screenshots/

Needs `mkdocs` (pip install -e '.[docs]') and Chromium (Debian: apt-get install chromium). Prints the
screenshots' paths.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = {"index.png": "", "results.png": "results/", "config-reference.png": "reference/config/"}
WINDOW = "1280,2000"


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    sys.exit("docs_screenshots: no Chromium found; install it (Debian: apt-get install -y chromium)")


def build(config: Path, site: Path) -> None:
    """The site as `make docs` builds it (strict: a broken link fails here too), into `site`."""
    quiet = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}  # the plugins' banners
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-f", str(config),
                    "-d", str(site)], cwd=ROOT, check=True, env=quiet)


def serve(site: Path) -> http.server.ThreadingHTTPServer:
    """The built site over HTTP on a free port (file:// URLs break the theme's search and relative links)."""
    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # one line per request would bury the screenshot paths
        pass


def screenshot(browser: str, url: str, out: Path) -> None:
    subprocess.run([browser, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
                    f"--screenshot={out}", f"--window-size={WINDOW}", url],
                   check=True, capture_output=True, timeout=120)
    if not out.is_file():
        sys.exit(f"docs_screenshots: chromium wrote no {out}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", nargs="?", type=Path, default=ROOT / "outputs" / "docs-screenshots")
    parser.add_argument("--config", type=Path, default=ROOT / "mkdocs.yml", help="the mkdocs config to build")
    args = parser.parse_args(argv)
    out = args.outdir.resolve()
    out.mkdir(parents=True, exist_ok=True)
    browser = chromium()
    with tempfile.TemporaryDirectory(prefix="distil-site-") as site:
        build(args.config.resolve(), Path(site))
        server = serve(Path(site))
        try:
            for name, page in PAGES.items():
                url = f"http://127.0.0.1:{server.server_address[1]}/{page}"
                screenshot(browser, url, out / name)
                print(out / name)
        finally:
            server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
