"""Every notebook of the repository executes at smoke scale (checks code paths, not science)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ensdiv.book import page_run, run_notebooks
from ensdiv.book.run import NO_CLAIM_PAGES
from ensdiv.paths import project_root
from ensdiv.report import audit

NOTEBOOKS = sorted(
    p for p in (project_root() / "notebooks").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
)


#: Pages that do not yet teach before they test (an "## The idea" section with its formula and a worked example,
#: right under the title). The list only shrinks: a page that gains the section must leave it.
NOT_YET_TEACHING: frozenset[str] = frozenset({
})


def teaches(rel: str) -> bool:
    """Whether a page must open with its idea: every paper page that is not still pending (a page of measurements
    or a worked example, :data:`ensdiv.book.run.NO_CLAIM_PAGES`, is not a paper page)."""
    return rel not in NOT_YET_TEACHING and rel not in NO_CLAIM_PAGES


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[str(p.relative_to(project_root())) for p in NOTEBOOKS])
def test_source_has_no_outputs_and_follows_template(path):
    nb = json.loads(path.read_text())
    cells = nb["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), "stored with outputs"
    assert all(c.get("id") for c in cells), "a cell without an id (nbformat warns on every read)"
    params = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(params) == 1, "needs exactly one cell tagged `parameters`"
    assert "".join(params[0]["source"]).lstrip().startswith("scale = "), "first parameter must be `scale`"
    from papermill.translators import PythonTranslator

    from ensdiv.book import notebook_parameters

    declared = notebook_parameters(path)
    parsed = {p.name for p in PythonTranslator.inspect({"source": "".join(params[0]["source"])})}
    assert parsed == set(declared), "papermill cannot parse a parameter line (no '=' inside its comment)"
    text = "".join("".join(c["source"]) for c in cells)
    assert "Paper vs this run" in text
    assert cells[0]["cell_type"] == "markdown" and "".join(cells[0]["source"]).startswith("# ")
    rel = path.relative_to(project_root()).as_posix()
    idea = [i for i, c in enumerate(cells) if "".join(c["source"]).startswith("## The idea")]
    if rel in NOT_YET_TEACHING:
        assert not idea, "the page teaches now: remove it from NOT_YET_TEACHING"
    if not teaches(rel):
        return
    # teach before test: the idea with its formula right under the title (the verdict box goes above it), then a
    # worked example computed with the package, all before the parameters cell and the run
    assert idea == [1], "the page's first section after the title is '## The idea'"
    assert "$$" in "".join(cells[1]["source"]), "the idea states its formula as display math"
    assert cells[2]["cell_type"] == "code" and "ed." in "".join(cells[2]["source"]), "a worked example follows"
    assert cells.index(params[0]) > 2, "the idea and its example come before the run's parameters"


#: Pages whose claims are not yet on evidence (:func:`ensdiv.report.audit`: null data built from the run, the
#: claim's unit, evidence keys, one level). The chapter issues empty it; a page leaves it only by passing the
#: audit, and a listed page that passes must leave (the test below fails until it does). By chapter, and who
#: empties it: packed-ensembles and sed (their chapter issue), attack-similarity and training-methods (theirs),
#: design-diversity, synthesis and foundations (theirs).
PENDING_EVIDENCE: frozenset[str] = frozenset()
#: Pages that report measurements or facts (a worked example) rather than test a paper's claim.
NO_CLAIM = NO_CLAIM_PAGES  # the one list: the runner fails any other page that writes no claim


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[str(p.relative_to(project_root())) for p in NOTEBOOKS])
def test_notebook_runs_at_smoke_scale(path, tmp_path, monkeypatch):
    """The page runs at smoke scale, and its claim records pass :func:`ensdiv.report.audit` (or the page is
    still listed in :data:`PENDING_EVIDENCE`, and then it must still fail the audit)."""
    monkeypatch.setenv("ENSDIV_BUILD", str(tmp_path / "build"))
    # `make test` keeps the executed pages ($ENSDIV_TEST_BOOK): tests/book_pages_check.py renders them as a book
    # and opens every page in a browser, so the smoke book is checked without running a notebook twice
    kept = os.environ.get("ENSDIV_TEST_BOOK")
    out_root = Path(kept) / "executed" / "smoke" if kept else tmp_path / "executed"
    # the records are discarded: no page log in the kernel
    (res,) = run_notebooks([path], scale="smoke", out_root=out_root, force=True, progress=False, trace=False)
    assert res.status == "ok", res.error
    rel = path.relative_to(project_root()).as_posix()
    records = page_run(res.output, rel).records
    if rel in NO_CLAIM:
        return
    assert records, "the page records no claim"
    problems = [f"{r['item']}: {p}" for r in records for p in audit(r)]
    if rel in PENDING_EVIDENCE:
        assert problems, "the page passes the audit now: remove it from PENDING_EVIDENCE"
    else:
        assert not problems, "\n".join(problems)
