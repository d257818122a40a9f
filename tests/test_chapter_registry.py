"""One list of chapters: :data:`ensdiv.chapters.CHAPTERS`. The other places that name chapters (the report's
``PAPERS``, which the report layer keeps because it may not import the chapters; the landing pages' key figures;
the notebook folders; the table of contents; each chapter's presets) are checked against it here, so a chapter
added or renamed in one place and not the others fails one test naming the place."""

from __future__ import annotations

import inspect

import pytest

import ensdiv as ed
from ensdiv.book import site, toc_notebooks
from ensdiv.chapters import CHAPTERS, list_presets
from ensdiv.paths import project_root

ROOT = project_root()


def test_the_report_knows_the_same_chapters():
    assert sorted(ed.report.PAPERS) == sorted(CHAPTERS)


def test_every_page_of_the_book_belongs_to_a_registered_chapter_and_every_chapter_has_pages():
    folders = {nb.relative_to(ROOT).parts[1] for nb in toc_notebooks()}
    assert folders == set(CHAPTERS)
    assert set(site.KEY_FIGURES) <= set(CHAPTERS)
    for slug in CHAPTERS:  # every chapter but the foundations has a landing page of its own
        assert slug == "foundations" or (ROOT / "book" / f"{slug}.md").is_file(), slug


def test_every_page_has_a_preset_of_its_chapter_and_every_preset_a_page():
    pages = {nb.relative_to(ROOT / "notebooks").with_suffix("").as_posix() for nb in toc_notebooks()}
    presets = set(list_presets())
    assert pages <= presets, sorted(pages - presets)
    assert presets <= pages, sorted(presets - pages)


def test_every_chapter_has_the_same_preset_signature():
    sig = {slug: str(inspect.signature(mod.preset)) for slug, mod in CHAPTERS.items()}
    assert len(set(sig.values())) == 1, sig


@pytest.mark.slow
def test_each_chapter_module_is_listed_under_its_own_slug():
    """The package names each chapter's modules without importing them (:data:`ensdiv.chapters.SLUGS`); every
    module's own ``SLUG`` must agree, and importing the package imports no chapter."""
    import subprocess
    import sys

    from ensdiv import chapters

    for slug, names in chapters.SLUGS.items():
        for name in names:
            assert getattr(chapters, name).SLUG == slug, (slug, name)
    code = ("import sys, ensdiv.chapters; print(sorted(m for m in sys.modules if m.startswith('ensdiv.chapters.')"
            " and not m.endswith('._presets')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
