"""Notebooks speak the public API only, and every "Paper vs this run" goes through ``ed.report``.

A notebook may import ``ensdiv`` (as ``ed``), the public sub-packages of ``ensdiv`` by name, its own
chapter module (and that module's sub-modules) and the shared zoo; it may not reach into deep module
paths or private names. Checked with an ``ast`` walk over every code cell.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import ensdiv as ed
from ensdiv.paths import project_root

NOTEBOOKS = sorted(p for p in (project_root() / "notebooks").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
PUBLIC_SUBPACKAGES = {"metrics", "data", "models", "ensembles", "losses", "report", "train", "attacks", "transfer",
                      "analysis"}
SHARED_CHAPTER_MODULES = {"zoo"}


def _chapter(path: Path) -> str:
    return path.parent.name.replace("-", "_")


def _code(path: Path) -> ast.Module:
    nb = json.loads(path.read_text())
    src = "\n".join(
        "\n".join(line for line in "".join(c["source"]).splitlines() if not line.lstrip().startswith(("%", "!")))
        for c in nb["cells"] if c["cell_type"] == "code"
    )
    return ast.parse(src)


def _own(name: str, chapter: str) -> bool:
    """A chapter's own module (``design_diversity``, or a module of its second half such as
    ``design_diversity_training``) or the shared zoo."""
    return name in SHARED_CHAPTER_MODULES or name == chapter or name.startswith(chapter + "_")


def _allowed(module: str, chapter: str) -> bool:
    parts = module.split(".")
    if parts[0] != "ensdiv":
        return True
    if len(parts) == 1:
        return True
    if parts[1] == "chapters":
        return len(parts) == 2 or _own(parts[2], chapter)
    return False


def violations(tree: ast.Module, chapter: str) -> list[str]:
    """Every import of a non-public ensdiv module and every private attribute reached through ``ensdiv``."""
    bad, aliases = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("ensdiv"):
                    aliases.add(a.asname or a.name.split(".")[0])
                    if not _allowed(a.name, chapter) or (a.name != "ensdiv" and a.name.count(".") == 1
                                                         and a.name.split(".")[1] not in PUBLIC_SUBPACKAGES
                                                         and a.name.split(".")[1] != "chapters"):
                        bad.append(f"line {node.lineno}: import {a.name}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ensdiv"):
            mod = node.module
            for a in node.names:
                aliases.add(a.asname or a.name)
                if a.name.startswith("_"):
                    bad.append(f"line {node.lineno}: private name {a.name}")
            if mod == "ensdiv":
                for a in node.names:
                    if a.name not in PUBLIC_SUBPACKAGES and a.name != "chapters" and a.name not in ed.__all__:
                        bad.append(f"line {node.lineno}: from ensdiv import {a.name}")
            elif mod == "ensdiv.chapters":
                for a in node.names:
                    if not _own(a.name, chapter):
                        bad.append(f"line {node.lineno}: another chapter's module {a.name}")
            elif not _allowed(mod, chapter):
                bad.append(f"line {node.lineno}: from {mod} import ...")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in aliases:
                bad.append(f"line {node.lineno}: private attribute .{node.attr}")
    return bad


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[str(p.relative_to(project_root())) for p in NOTEBOOKS])
def test_notebook_uses_the_public_api_only(path):
    bad = violations(_code(path), _chapter(path))
    assert not bad, f"{path.name}: {bad}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[str(p.relative_to(project_root())) for p in NOTEBOOKS])
def test_paper_vs_this_run_goes_through_ed_report(path):
    if path.stem in ("benchmarks", "one_ensemble_every_measure", "measure_redundancy"):
        pytest.skip("the page reports measurements or a worked example's facts, not a paper's claim")
    text = path.read_text()
    assert "ed.report.claim(" in text, f"{path.name} states its verdict without ed.report.claim"


def test_every_page_closes_its_smoke_run_with_the_one_helper():
    """The closing "Smoke scale" line comes from ``ed.report.smoke_note`` on every page, so its wording is one
    sentence a reader learns once; a page printing its own is named."""
    own = [p.name for p in NOTEBOOKS if '"Smoke scale' in p.read_text() or "'Smoke scale" in p.read_text()]
    assert not own, f"pages printing their own smoke line: {own}"


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ("import ensdiv as ed\nfrom ensdiv.chapters import packed_ensembles as ch", []),
        ("from ensdiv.chapters.packed_ensembles import preset", []),
        ("from ensdiv.chapters import zoo\nfrom ensdiv import metrics", []),
        ("from ensdiv.metrics.diversity import disagreement", ["line 1: from ensdiv.metrics.diversity import ..."]),
        ("from ensdiv.chapters import attack_similarity", ["line 1: another chapter's module attack_similarity"]),
        ("import ensdiv.transfer.x", ["line 1: import ensdiv.transfer.x"]),
        ("import ensdiv as ed\ned.data.shifts._seed('a')", ["line 2: private attribute ._seed"]),
        ("from ensdiv import _private", ["line 1: private name _private", "line 1: from ensdiv import _private"]),
    ],
)
def test_the_checker_on_hand_made_cells(src, expected):
    assert violations(ast.parse(src), "packed_ensembles") == expected
