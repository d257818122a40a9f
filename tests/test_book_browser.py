"""The book as its readers see it: a small book built by ``ensdiv book`` and opened in a headless browser.

One small book (the project's ``_config.yml``; a chapter landing page, one notebook page with a formula, an
image and two claims, a page that fails, and the generated claims page) is built once at ``cpu`` scale (its
notebooks are tiny). The first tests read the built HTML; the browser test (skipped without Chromium and
chromedriver, or without the local MathJax copy of ``make mathjax``) serves it over HTTP, opens every page
headless and checks: no console errors, every ``<img>`` loaded, formulas rendered by MathJax (no raw
``\\(`` left), and one row of the claims table per claim record.

The metrics page's teaching table is checked here too: each page it links calls the functions of its row.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import book_view
import nbformat
import pytest

from ensdiv.book import site, stamps

ROOT = Path(__file__).resolve().parent.parent
PAGE = "notebooks/sed/fig03_lambda_sweep"  # the sed chapter's key page (site.KEY_FIGURES)
# formatted like the book's notebooks (short lines): the reader-view check measures every code cell's width
CLAIM = ('no_effect = ed.report.Null("x set to y", [{{"x": 2}}] * 39)\n'
         'ed.report.claim(\n    paper="sed",\n    item="Fig. 3",\n    claim="{text}",\n'
         '    checks=[ed.report.less("x", "y", null=no_effect)],\n    ours={{"x": {x}, "y": 2}},\n'
         '    paper_values={{"x": 1, "y": 2}},\n    unit="released artefact",\n    scale=scale,\n'
         '    claim_id="{cid}",\n)')


def _notebook(path: Path, cells: list) -> None:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('scale = "cpu"')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [cells[0], params, *cells[1:]]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    """Build the small book once; returns (html folder, claim records)."""
    tmp = tmp_path_factory.mktemp("book")
    mp = pytest.MonkeyPatch()
    mp.setenv("ENSDIV_BUILD", str(tmp / "build"))
    mp.setenv("ENSDIV_CACHE", str(tmp / "cache"))
    mp.delenv("ENSDIV_REPOSITORY_URL", raising=False)
    src = tmp / "src"
    (src / "book").mkdir(parents=True)
    shutil.copy(ROOT / "_config.yml", src / "_config.yml")
    shutil.copy(ROOT / "book" / "references.bib", src / "book" / "references.bib")
    shutil.copytree(ROOT / "book" / "_static", src / "book" / "_static")  # the book's CSS: verdict box, badges
    (src / "_toc.yml").write_text("format: jb-book\nroot: book/sed\nchapters:\n- file: book/claims\n"
                                  f"- file: {PAGE}\n- file: notebooks/sed/broken\n")
    (src / "book" / "claims.md").write_text("# Claims at a glance\n\nplaceholder\n")
    (src / "book" / "sed.md").write_text(
        "# A chapter\n\nThe chapter's landing page, with math $\\lambda = 0.1$.\n\n"
        "## Where the claims stand\n\n```{include} _generated/sed.md\n```\n")
    md = nbformat.v4.new_markdown_cell
    code = nbformat.v4.new_code_cell
    _notebook(src / f"{PAGE}.ipynb", [
        md("# Fig. 3 — a tiny page\n\nThe ensemble averages $M$ members: $\\bar p = \\frac{1}{M}\\sum_m p_m$."),
        code("import matplotlib.pyplot as plt\nimport ensdiv as ed\n"
             "fig, ax = plt.subplots(figsize=(3, 2))\nax.plot([0, 1], [1, 0])\nplt.show()"),
        code(CLAIM.format(text="x is below y.", x=1, cid="a")),
        code(CLAIM.format(text="x is below y again.", x=3, cid="b")),
    ])
    _notebook(src / "notebooks" / "sed" / "broken.ipynb", [md("# Broken"), code('raise RuntimeError("broken page")')])
    results, index = site.build_book(scale="cpu", root=src)
    assert [r.status for r in results] == ["ok", "failed"], [r.error for r in results]
    records = list(stamps.page_run(tmp / "build" / "executed" / "cpu" / f"{PAGE}.ipynb", f"{PAGE}.ipynb").records)
    yield index.parent, records
    mp.undo()


@pytest.mark.kernel  # the small book's fixture runs its pages in kernels
def test_landing_page_shows_verdicts_thumbnail_and_failed_pages(book):
    html_dir, records = book
    landing = (html_dir / "book" / "sed.html").read_text()
    assert len(records) == 2
    assert "holds" in landing and "does not hold" in landing  # the two claims' verdicts
    assert "failed" in landing and "broken" in landing  # the page that did not run is listed as failed
    thumbs = re.findall(r'<img[^>]+src="([^"]*sed-key\.png)"', landing)
    assert thumbs and (html_dir / "book" / thumbs[0]).resolve().is_file()  # the key page's first image
    claims = (html_dir / "book" / "claims.html").read_text()
    assert "broken" in claims and "does not hold" in claims


@pytest.mark.kernel  # the small book's fixture runs its pages in kernels
def test_math_is_served_from_the_site_when_a_local_copy_exists(book):
    html_dir, _ = book
    page = (html_dir / PAGE).with_suffix(".html").read_text()
    scripts = re.findall(r'<script[^>]+src="([^"]*(?:mathjax|tex-mml-chtml)[^"]*)"', page)
    assert scripts, "the page with a formula loads no MathJax"
    if site.mathjax_source() is None:
        assert all(s.startswith("https://") for s in scripts)  # the CDN, Sphinx's default
    else:
        assert all("_static/mathjax/tex-mml-chtml.js" in s and "://" not in s for s in scripts)
        assert (html_dir / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").is_dir()


@pytest.mark.kernel  # the small book's fixture runs its pages in kernels
def test_pages_in_a_headless_browser(book):
    html_dir, records = book
    driver = book_view.browser()
    try:
        with book_view.served(html_dir) as base:
            for page in ("book/sed.html", f"{PAGE}.html", "book/claims.html"):  # index.html redirects to the first
                book_view.open_page(driver, f"{base}/{page}")
                widths = driver.execute_script("return [...document.images].map(i => [i.src, i.naturalWidth])")
                assert widths or page == "book/claims.html", page  # a thumbnail, a figure
                if page != "book/claims.html":  # the landing and notebook pages carry formulas
                    from selenium.webdriver.support.ui import WebDriverWait

                    WebDriverWait(driver, 20).until(lambda d: d.find_elements("css selector", "mjx-container"))
                    text = driver.find_element("css selector", "main").text
                    assert "\\(" not in text and "$" not in text, (page, text[:300])
                else:
                    rows = driver.find_elements("css selector", "main table tbody tr")
                    assert len(rows) == len(records) + 1  # one per claim record, and the failed page
                    badges = driver.find_elements("css selector", "main table .ensdiv-badge")
                    assert len(badges) == len(records) + 1  # a coloured verdict badge on every row
                # the reader's view (#32): nothing wider than its column, no file paths, the answer first
                problems = book_view.reader_view_problems(driver, verdict_box=page == f"{PAGE}.html")
                assert not problems, (page, problems)
                errors = book_view.console_errors(driver)
                assert not errors, (page, errors)
    finally:
        driver.quit()


@pytest.mark.kernel  # the small book's fixture runs its pages in kernels
def test_the_reader_view_check_can_fail(book, tmp_path):
    """The check finds what it looks for: a page with a code line and a printed line wider than the column, a
    package path and a raw cell warning in an output and no verdict box fails on each (the same page passes
    without them)."""
    driver = book_view.browser()
    html_dir, _ = book
    long = "x" * 400
    bad = (f'<html><head><link rel="stylesheet" href="_static/ensdiv.css"></head><body><main style="width:600px">'
           f'<div class="cell"><div class="cell_input"><pre style="white-space:pre">{long}</pre></div>'
           f'<div class="cell_output"><pre style="white-space:pre">{long}</pre>'
           "<pre>/home/u/ensdiv/chapters/sed.py:12: Warning</pre>"
           "<pre>/tmp/ipykernel_7/12.py:4: UserWarning: raw</pre></div></div></main></body></html>")
    (html_dir / "bad.html").write_text(bad)
    try:
        with book_view.served(html_dir) as base:
            book_view.open_page(driver, f"{base}/bad.html")
            problems = " | ".join(book_view.reader_view_problems(driver, verdict_box=True))
    finally:
        driver.quit()
        (html_dir / "bad.html").unlink()
    assert "cell_input" in problems and "cell_output" in problems, problems
    assert "file path" in problems and "no verdict box" in problems, problems
    assert "ipykernel_7/12.py:4: UserWarning" in problems, problems  # a raw warning raised in a cell


def test_metrics_teaching_table_links_pages_that_use_the_metrics():
    """Every row of the metrics page's table names functions that each linked notebook's code calls."""
    import ensdiv as ed

    text = (ROOT / "book" / "api" / "metrics.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| {py:func}")]
    assert len(rows) >= 10
    for row in rows:
        funcs = re.findall(r"ensdiv\.metrics\.(\w+)`", row)
        pages = re.findall(r"\{doc\}`/([^`]+)`", row)
        assert funcs and pages, row
        for name in funcs:
            assert name in ed.metrics.__all__, name
        for page in pages:
            nb = nbformat.read(ROOT / f"{page}.ipynb", as_version=4)
            code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
            missing = [f for f in funcs if not re.search(rf"\b{f}\(", code)]
            assert not missing, (page, missing)


def test_api_pages_list_every_public_callable():
    """Each API page's autosummary lists every public callable (``__all__``) of the modules it documents."""
    import importlib

    for page in sorted((ROOT / "book" / "api").glob("*.md")):
        for module, block in re.findall(r"\.\. currentmodule:: (\S+)\n(.*?)\.\. automodule::", page.read_text(),
                                        flags=re.S):
            mod = importlib.import_module(module)
            listed = set(re.findall(r"^   (\w+)$", block, flags=re.M))
            public = {n for n in getattr(mod, "__all__", []) if callable(getattr(mod, n))}
            assert public <= listed, (page.name, sorted(public - listed))
