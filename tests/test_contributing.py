"""CONTRIBUTING.md's steps, followed on a copy of the project: ``ensdiv new-page`` writes a page that the book
finds, that runs at smoke scale and whose claim passes the audit; its bad inputs are one sentence each."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ensdiv.book.newpage import new_page
from ensdiv.errors import InvalidInputError, UnknownNameError
from ensdiv.paths import project_root

ROOT = project_root()


def _copy(tmp: Path) -> Path:
    """The parts of the project a page needs: the package, pyproject.toml and _toc.yml."""
    for name in ("pyproject.toml", "_toc.yml"):
        shutil.copy(ROOT / name, tmp / name)
    shutil.copytree(ROOT / "ensdiv", tmp / "ensdiv", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp


def _python(tmp: Path, code: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tmp), "ENSDIV_BUILD": str(tmp / "_build"),
           "ENSDIV_CACHE": str(tmp / "cache")}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=tmp, env=env, capture_output=True, text=True,
                          timeout=600)


_BUILD = """
import sys
from pathlib import Path
import ensdiv
from ensdiv.book import page_run, run_notebooks, toc_notebooks
from ensdiv.report import audit
root = Path.cwd()
assert Path(ensdiv.__file__).is_relative_to(root), ensdiv.__file__  # the copy's package, with the new preset
nb = root / sys.argv[1]
assert nb in toc_notebooks(root=root), "not in _toc.yml"
(res,) = run_notebooks([nb], scale="smoke", out_root=root / "_build" / "executed" / "smoke", root=root,
                       progress=False)
assert res.status == "ok", res.error
records = page_run(res.output, sys.argv[1]).records
assert len(records) == 1 and audit(records[0]) == [], audit(records[0])
print(records[0]["verdict"])
"""


@pytest.mark.kernel
def test_the_guides_steps_add_a_page_that_builds_at_smoke_and_passes_the_audit(tmp_path):
    tmp = _copy(tmp_path)
    made = _python(tmp, "from ensdiv.book.cli import main; raise SystemExit(main())", "new-page",
                   "foundations/toy_bagging", "--title", "A toy page: bagging")
    assert made.returncode == 0, made.stderr
    assert "Wrote " in made.stdout and "make dry-run" in made.stdout
    rel = "notebooks/foundations/toy_bagging.ipynb"
    cells = json.loads((tmp / rel).read_text())["cells"]
    # the book's template (tests/test_notebooks.py): title, the idea with display math, a worked example, then the
    # parameters; stored without outputs, every cell with an id
    assert "".join(cells[0]["source"]).startswith("# A toy page: bagging")
    assert "".join(cells[1]["source"]).startswith("## The idea") and "$$" in "".join(cells[1]["source"])
    assert cells[2]["cell_type"] == "code" and "ed." in "".join(cells[2]["source"])
    assert [i for i, c in enumerate(cells) if "parameters" in c["metadata"].get("tags", [])] == [3]
    assert all(c.get("id") and not c.get("outputs") for c in cells)
    assert '"foundations/toy_bagging"' in (tmp / "ensdiv/chapters/foundations.py").read_text()
    built = _python(tmp, _BUILD, rel)
    assert built.returncode == 0, built.stderr[-3000:]
    assert built.stdout.strip().splitlines()[-1] in ("holds", "does not hold", "inconclusive", "mixed",
                                                     "holds partly", "cannot decide", "not testable at this scale")


def test_new_page_refuses_bad_names_in_one_sentence_and_writes_nothing(tmp_path):
    tmp = _copy(tmp_path)
    before = (tmp / "_toc.yml").read_text()
    cases = [("sed", InvalidInputError, "A page is named '<chapter>/<stem>'"),
             ("biology/fig01", UnknownNameError, "chapter"),
             ("sed/Fig-5", InvalidInputError, "must be lower-case letters"),
             ("sed/tab01_unique", InvalidInputError, "exists already"),  # the notebook of an existing page
             ("sed/fig09_new", InvalidInputError, "needs a title")]
    (tmp / "notebooks/sed").mkdir(parents=True)
    (tmp / "notebooks/sed/tab01_unique.ipynb").write_text("{}")
    for name, error, words in cases:
        with pytest.raises(error, match=words):
            new_page(name, title="" if name == "sed/fig09_new" else "Fig. 9", root=tmp)
    assert (tmp / "_toc.yml").read_text() == before
    assert not (tmp / "notebooks/sed/fig09_new.ipynb").exists()
