"""The book as a reader sees it in a browser: a headless Chromium over a built book served on HTTP, and the
checks every page must pass (#32). Shared by ``test_book_browser.py`` (a small book built for the test) and
``book_pages_check.py`` (every page of the smoke book ``make test`` executes)."""

from __future__ import annotations

import contextlib
import functools
import http.server
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ensdiv.book import site


def known_console_error(message: str) -> bool:
    """Console errors that are not the book's: the browser's own request for a favicon the book does not have,
    and sphinx-thebe 0.3.1 under Sphinx 7.4 emitting its configuration script twice on every page ("Identifier
    'THEBE_JS_URL' has already been declared"; harmless: thebe is off). Anything else fails a test."""
    return "favicon.ico" in message or "'THEBE_JS_URL' has already been declared" in message


def browser():
    """A headless Chromium driver at 1300 px width, or a skip naming what is missing."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("Chromium and chromedriver are not installed (Debian: apt-get install chromium chromium-driver)")
    if site.mathjax_source() is None:
        pytest.skip("no local MathJax copy (make mathjax); offline, the CDN copy cannot render formulas")
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1300,900"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=webdriver.ChromeService(executable_path=driver), options=options)


@contextlib.contextmanager
def served(html_dir: Path) -> Iterator[str]:
    """Serve ``html_dir`` over HTTP on a free local port for the block; yields the base URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # no line per request in the test output
            pass

    handler = functools.partial(Quiet, directory=str(html_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def open_page(driver, url: str) -> None:
    """Load ``url`` and wait until the document and its images have loaded."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    wait = WebDriverWait(driver, 20)
    wait.until(lambda d: d.execute_script("return document.readyState") == "complete")
    wait.until(lambda d: d.execute_script("return [...document.images].every(i => i.complete)"))


#: Elements wider than their box: the page itself, a code cell's code, a cell's output (a wide table scrolls
#: inside its own box, ``div.output.text_html``, so its cell's output does not overflow).
_TOO_WIDE = """
const wide = e => e.scrollWidth > e.clientWidth + 1;
const out = [];
const main = document.querySelector('main');
if (main && wide(main)) out.push(`the page is ${main.scrollWidth}px wide in a ${main.clientWidth}px column`);
document.querySelectorAll('div.cell_input pre, div.cell_output').forEach(e => {
  const part = e.closest('div.cell_input') ? 'cell_input' : 'cell_output';
  if (wide(e)) out.push(`${part} ${e.scrollWidth}px in ${e.clientWidth}px: `
                        + (e.textContent || '').trim().split('\\n')[0].slice(0, 80));
});
return out;
"""


def reader_view_problems(driver, *, verdict_box: bool) -> list[str]:
    """What a reader of the open page would find wrong (#32): something wider than its column (code, an
    output, the page), an output showing a file path of the package or a raw warning raised in a cell (its
    ``/tmp/ipykernel_…`` path), images that did not load, and — when
    ``verdict_box`` — no verdict box, or one below the first code cell."""
    problems = list(driver.execute_script(_TOO_WIDE))
    outputs = " ".join(e.text for e in driver.find_elements("css selector", "div.cell_output"))
    for marker in ("/ensdiv/", "site-packages/", "ipykernel_"):
        if marker in outputs:
            at = outputs.index(marker)
            problems.append(f"an output shows a file path: ...{outputs[max(0, at - 60):at + 40]}...")
    widths = driver.execute_script("return [...document.images].map(i => [i.src, i.naturalWidth])")
    problems += [f"image not loaded: {src}" for src, w in widths if not w]
    if verdict_box:
        boxes = driver.find_elements("css selector", ".ensdiv-verdict")
        cells = driver.find_elements("css selector", "div.cell")
        if not boxes:
            problems.append("no verdict box")
        elif not boxes[0].text.startswith(("Verdict:", "Verdicts:")):
            problems.append(f"the verdict box reads {boxes[0].text[:60]!r}")
        elif cells and boxes[0].location["y"] >= cells[0].location["y"]:
            problems.append("the verdict box is below the first code cell")
    return problems


def formula_before_claims(driver) -> list[str]:
    """A page that teaches before it tests: a formula rendered by MathJax above its "Paper vs this run" heading."""
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        WebDriverWait(driver, 20).until(lambda d: d.find_elements("css selector", "main mjx-container"))
    except Exception:  # noqa: BLE001 - a timeout is the finding
        return ["no formula rendered (no MathJax output on the page)"]
    first = driver.find_elements("css selector", "main mjx-container")[0].location["y"]
    heads = [h for h in driver.find_elements("css selector", "main h2") if "Paper vs this run" in h.text]
    if heads and first >= heads[0].location["y"]:
        return ["the first formula is below 'Paper vs this run': the page tests before it teaches"]
    return []


def console_errors(driver) -> list[dict]:
    """The page's severe console messages that are the book's."""
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE" and not known_console_error(e["message"])]
