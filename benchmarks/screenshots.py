"""Screenshots of the rendered book as a reader sees it: three paper pages and the README, in headless Chromium.

Not a timing: a record of what a reader opens (the "pages that teach" work asks for it). The pages come from a
book already rendered (by default the smoke book ``make test`` keeps in ``_build/test-book``: its
``_build/html``); the README is rendered here with markdown-it (the parser the book's MyST uses) into a bare
page with the book's width. Each screenshot is the top ``--height`` pixels of the page at 1300 px, the first
screens a reader sees. Run::

    python benchmarks/screenshots.py [--html _build/test-book/_build/html] [--height 2400]

Writes ``benchmarks/results/screenshot-<name>.png``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import book_view  # noqa: E402

#: The three paper pages: one per kind of claim (a trained-method comparison, a released-data check, a claim
#: about groups of models), each with its teaching section above the claim.
PAGES = {
    "pe-table1": "notebooks/packed-ensembles/tab01_efficient_ensembles.html",
    "sed-table3": "notebooks/sed/tab03_detection.html",
    "tm-fig05": "notebooks/training-methods/fig05_greedy_low_accuracy.html",
}

_README_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>README</title>
<style>body{{font-family:sans-serif;max-width:900px;margin:2em auto;line-height:1.5}}
pre{{background:#f5f5f5;padding:.6em;overflow:auto}}code{{background:#f5f5f5}}</style></head>
<body>{body}</body></html>"""


def readme_html(folder: Path) -> Path:
    """README.md rendered to ``folder/README.html``."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark").enable("table").render((ROOT / "README.md").read_text())
    out = folder / "README.html"
    out.write_text(_README_PAGE.format(body=body))
    return out


def shoot(driver, url: str, out: Path, height: int) -> None:
    book_view.open_page(driver, url)
    full = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1300, min(int(full), height))
    driver.save_screenshot(str(out))
    print(f"{out.relative_to(ROOT)}: {min(int(full), height)} of {full} px")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--html", type=Path, default=ROOT / "_build" / "test-book" / "_build" / "html")
    ap.add_argument("--height", type=int, default=2400)
    args = ap.parse_args()
    results = ROOT / "benchmarks" / "results"
    driver = book_view.browser()
    try:
        with book_view.served(args.html) as base:
            for name, page in PAGES.items():
                shoot(driver, f"{base}/{page}", results / f"screenshot-{name}.png", args.height)
        with tempfile.TemporaryDirectory() as tmp, book_view.served(Path(tmp)) as base:
            readme_html(Path(tmp))
            shoot(driver, f"{base}/README.html", results / "screenshot-readme.png", args.height)
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
