"""Check the built site in headless Chromium: pages render, notebook pages show their figures.

Usage: ``python docs/check_pages.py docs/_build/html --screenshots DIR [--chromium PATH]``; one
PNG per checked page is saved in DIR (a build artefact, never committed).
"""

from __future__ import annotations

import argparse
import functools
import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.parse
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

#: Page -> (words its text must contain, the fewest images it must show loaded).
#: The notebook pages' figures are the output images of their cells.
PAGES = {
    "index.html": (["ONNX", "Gather", "gatherx.gather"], 0),
    "performance.html": (["Performance", "How each rule was chosen", "gatherx / best"], 1),
    "compilers.html": (["torch.jit.trace", "torch.export", "jax.export"], 0),
    "notebooks/01_tour.html": (["A tour of ONNX Gather"], 1),
    "notebooks/02_pytorch.html": (["PyTorch"], 2),
    "notebooks/03_jax.html": (["JAX"], 1),
    "notebooks/04_benchmark.html": (["Benchmark", "gatherx / best"], 2),
}
#: Chromium as root in a container: no sandbox, no GPU, nothing fetched behind our back.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars"]  # fmt: skip
WIDTH = 1280
MAX_HEIGHT = 9000

#: Loads the page in a same-origin iframe, waits for its images, and writes what it saw as
#: JSON into the DOM that ``--dump-dom`` prints.
PROBE = """<!doctype html><html><body><pre id="result">pending</pre>
<iframe id="page" src="{src}" style="width:{width}px;height:1000px"></iframe>
<script>
const frame = document.getElementById("page");
frame.addEventListener("load", () => {{
  const doc = frame.contentDocument;
  const settle = (tries) => {{
    const imgs = Array.from(doc.querySelectorAll("article img, .bd-article img, main img"));
    if (imgs.some((i) => !i.complete) && tries > 0) {{
      setTimeout(() => settle(tries - 1), 100);
      return;
    }}
    document.getElementById("result").textContent = JSON.stringify({{
      title: doc.title,
      text: doc.body.innerText,
      height: doc.documentElement.scrollHeight,
      outputs: doc.querySelectorAll(".cell_output").length,
      images: imgs.map((i) => ({{src: i.getAttribute("src"), width: i.naturalWidth,
                                 output: i.closest(".cell_output") !== null}})),
    }});
  }};
  settle(100);
}});
</script></body></html>"""


class _Handler(SimpleHTTPRequestHandler):
    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        if url.path != "/__probe__.html":
            super().do_GET()
            return
        page = urllib.parse.parse_qs(url.query)["page"][0]
        body = PROBE.format(src=html.escape("/" + page), width=WIDTH).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # a line per request would bury the report


def chromium(binary: str, *args: str) -> str:
    """Run Chromium once with a fresh profile; return its standard output."""
    with tempfile.TemporaryDirectory(prefix="gatherx-chromium-") as profile:
        result = subprocess.run(
            [binary, *FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    if result.returncode != 0:
        msg = f"chromium failed ({result.returncode}): {result.stderr[-2000:]}"
        raise RuntimeError(msg)
    return result.stdout


def check_page(binary: str, base: str, page: str, shots: Path) -> list[str]:
    """Problems found on one page (none: it passed); saves its screenshot."""
    words, min_images = PAGES[page]
    dom = chromium(binary, "--virtual-time-budget=20000", "--dump-dom",
                   f"{base}/__probe__.html?page={urllib.parse.quote(page)}")  # fmt: skip
    found = re.search(r'<pre id="result">(.*?)</pre>', dom, re.DOTALL)
    if found is None or found.group(1) == "pending":
        return [f"{page}: the page did not finish loading"]
    seen = json.loads(html.unescape(found.group(1)))
    problems = [f"{page}: text lacks {w!r}" for w in words if w not in seen["text"]]
    broken = [img["src"] for img in seen["images"] if img["width"] == 0]
    problems += [f"{page}: image {src} did not load" for src in broken]
    shown = [img for img in seen["images"] if img["width"] > 0]
    if page.startswith("notebooks/"):
        shown = [img for img in shown if img["output"]]
        if seen["outputs"] == 0:
            problems.append(f"{page}: no cell outputs (were the notebooks executed?)")
        if "Traceback" in seen["text"]:
            problems.append(f"{page}: a cell output shows a traceback")
    if len(shown) < min_images:
        problems.append(f"{page}: {len(shown)} image(s) shown, expected at least {min_images}")
    shot = shots / (page.replace("/", "_").removesuffix(".html") + ".png")
    height = min(MAX_HEIGHT, max(800, int(seen["height"])))
    chromium(binary, f"--window-size={WIDTH},{height}", "--virtual-time-budget=10000",
             f"--screenshot={shot}", f"{base}/{page}")  # fmt: skip
    if not shot.exists() or shot.stat().st_size == 0:
        problems.append(f"{page}: no screenshot was written")
    status = "ok" if not problems else "FAILED"
    print(f"{page}: {status}, {len(shown)} image(s), {seen['outputs']} cell output(s), "
          f"screenshot {shot} ({WIDTH}x{height})", flush=True)  # fmt: skip
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("html", type=Path, help="the built site (sphinx-build's output folder)")
    parser.add_argument("--screenshots", type=Path, required=True, help="folder for the PNGs")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    args = parser.parse_args(argv)
    args.screenshots.mkdir(parents=True, exist_ok=True)
    handler = functools.partial(_Handler, directory=str(args.html))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        problems = [p for page in PAGES for p in check_page(args.chromium, base, page,
                                                          args.screenshots)]  # fmt: skip
    finally:
        server.shutdown()
    for line in problems:
        print(f"FAIL {line}", file=sys.stderr)
    print(f"{len(PAGES)} pages checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
