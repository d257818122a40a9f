"""Every notebook of the repository executes at smoke scale (checks code paths, not science)."""

from __future__ import annotations

import json

import pytest

from ensdiv.chapters.runner import run_notebooks
from ensdiv.paths import project_root

NOTEBOOKS = sorted(
    p for p in (project_root() / "notebooks").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[str(p.relative_to(project_root())) for p in NOTEBOOKS])
def test_source_has_no_outputs_and_follows_template(path):
    nb = json.loads(path.read_text())
    cells = nb["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), "stored with outputs"
    params = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(params) == 1, "needs exactly one cell tagged `parameters`"
    assert "".join(params[0]["source"]).lstrip().startswith("scale = "), "first parameter must be `scale`"
    from papermill.translators import PythonTranslator

    from ensdiv.chapters.runner import notebook_parameters

    declared = notebook_parameters(path)
    parsed = {p.name for p in PythonTranslator.inspect({"source": "".join(params[0]["source"])})}
    assert parsed == set(declared), "papermill cannot parse a parameter line (no '=' inside its comment)"
    text = "".join("".join(c["source"]) for c in cells)
    assert "Paper vs this run" in text
    assert cells[0]["cell_type"] == "markdown" and "".join(cells[0]["source"]).startswith("# ")


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[str(p.relative_to(project_root())) for p in NOTEBOOKS])
def test_notebook_runs_at_smoke_scale(path, tmp_path, monkeypatch):
    monkeypatch.setenv("ENSDIV_BUILD", str(tmp_path / "build"))
    (res,) = run_notebooks([path], scale="smoke", out_root=tmp_path / "executed", force=True, progress=False)
    assert res.status == "ok", res.error
