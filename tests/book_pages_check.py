"""Every page of the smoke book as a reader sees it (#32), after ``make test`` executed the notebooks.

``make test`` runs the unit tests and every notebook at smoke scale with ``$ENSDIV_TEST_BOOK`` set, so
``tests/test_notebooks.py`` keeps each executed page in ``$ENSDIV_TEST_BOOK/executed/smoke``. This file (not
collected by the first run: its name does not start with ``test_``) is then run on its own: it renders those
pages into a book (``ensdiv book --html-only``: nothing is executed twice) and opens every page in headless
Chromium at 1300 px: nothing wider than its column, no package file path in an output, a verdict box above
the first code cell of every page that tests a claim, and one badge per claim record on the claims page.
Skipped without ``$ENSDIV_TEST_BOOK``, Chromium or the local MathJax copy.
"""

from __future__ import annotations

import os
from pathlib import Path

import book_view
import pytest
from test_notebooks import teaches

from ensdiv.book import site, stamps, toc_notebooks
from ensdiv.paths import project_root


@pytest.fixture(scope="module")
def smoke_book():
    kept = os.environ.get("ENSDIV_TEST_BOOK")
    if not kept:
        pytest.skip("no $ENSDIV_TEST_BOOK: run through `make test`, which keeps the executed smoke pages")
    build = Path(kept)
    executed = build / "executed" / "smoke"
    root = project_root()
    notebooks = [nb.relative_to(root).as_posix() for nb in toc_notebooks()]
    missing = [nb for nb in notebooks if not (executed / nb).is_file()]
    assert not missing, f"pages not executed by tests/test_notebooks.py: {missing}"
    mp = pytest.MonkeyPatch()
    mp.setenv("ENSDIV_BUILD", str(build))
    mp.delenv("ENSDIV_REPOSITORY_URL", raising=False)
    try:
        _, index = site.build_book(scale="smoke", html_only=True)
    finally:
        mp.undo()
    pages = {nb: stamps.page_run(executed / nb, nb) for nb in notebooks}
    return index.parent, pages


def test_every_page_of_the_smoke_book_reads_well(smoke_book):
    html_dir, pages = smoke_book
    assert all(p.status == "ok" for p in pages.values()), [p.notebook for p in pages.values() if p.status != "ok"]
    others = sorted(p.relative_to(html_dir).as_posix() for p in (html_dir / "book").rglob("*.html")
                    if "_generated" not in p.parts)
    driver = book_view.browser()
    problems = {}
    try:
        with book_view.served(html_dir) as base:
            for nb, page in pages.items():
                book_view.open_page(driver, f"{base}/{Path(nb).with_suffix('.html').as_posix()}")
                found = book_view.reader_view_problems(driver, verdict_box=bool(page.records))
                if teaches(nb) and site.mathjax_source() is not None:  # offline: the local copy
                    found += book_view.formula_before_claims(driver)
                found += [e["message"][:200] for e in book_view.console_errors(driver)]
                if found:
                    problems[nb] = found
            for rel in others:  # prose, the claims page, the API reference
                book_view.open_page(driver, f"{base}/{rel}")
                found = book_view.reader_view_problems(driver, verdict_box=False)
                if rel == "book/claims.html":
                    badges = driver.find_elements("css selector", "main .ensdiv-badge")
                    records = sum(len(p.records) for p in pages.values())
                    if len(badges) != records:
                        found.append(f"{len(badges)} verdict badges for {records} claim records")
                if found:
                    problems[rel] = found
    finally:
        driver.quit()
    assert not problems, "\n".join(f"{page}: {'; '.join(found)}" for page, found in problems.items())
