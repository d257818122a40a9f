"""The package's shape: layers import only downwards, the library never imports the chapters, internal
imports sit at module level, and the registries are complete after ``import ensdiv``.

An ``ast`` walk over every module of ``ensdiv/`` (nothing is imported to check it).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "ensdiv"

# Lowest first. A module may import its own layer and the layers below it, never one above.
# ``store`` and ``config`` are foundations (data caches the sets it generates); ``losses`` sits below
# ``train`` because the training engine calls them; ``api`` is ``ensdiv/__init__.py`` (the flat
# namespace); ``chapters`` are the book's pages' pipelines and presets; ``book`` builds the book from them
# (``ensdiv run``/``ensdiv book``, stamps, the rendered site, the ``ensdiv`` command).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("errors", "seeding", "paths", "environment", "store", "config", "progress", "reads", "tracing",
              "bundles", "shards")),
    ("data", ("data",)),
    ("models", ("models",)),
    ("losses", ("losses",)),
    ("train", ("train",)),
    ("predict", ("predict", "workers")),
    ("metrics", ("metrics", "analysis")),
    ("ensembles", ("ensembles", "attacks")),
    ("transfer", ("transfer",)),
    ("report", ("report",)),
    ("api", ("__init__",)),
    ("chapters", ("chapters",)),
    ("book", ("book",)),
]
RANK = {top: i for i, (_, tops) in enumerate(LAYERS) for top in tops}
API = RANK["__init__"]
LIBRARY = [p for p in sorted(PKG.rglob("*.py")) if RANK.get(p.relative_to(PKG).parts[0].removesuffix(".py"), 0) < API]


def _top(path: Path) -> str:
    return path.relative_to(PKG).parts[0].removesuffix(".py")


def _targets(node: ast.AST) -> list[str]:
    """The ``ensdiv`` top-level modules an import statement reaches (``"__init__"`` for the namespace)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        if node.module == "ensdiv":  # from ensdiv import losses / from ensdiv import Recipe
            return [a.name if (PKG / a.name).exists() or (PKG / f"{a.name}.py").exists() else "__init__"
                    for a in node.names]
        names = [node.module]
    else:
        return []
    out = []
    for name in names:
        parts = name.split(".")
        if parts[0] == "ensdiv":
            out.append(parts[1] if len(parts) > 1 else "__init__")
    return out


def _imports(path: Path) -> list[tuple[ast.AST, str, bool]]:
    """(node, target top module, at module level?) for every internal import of ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    top_level = {id(n) for n in tree.body}
    for n in tree.body:  # imports inside a module-level try/if still count as module level
        if isinstance(n, ast.Try | ast.If):
            top_level |= {id(c) for c in ast.walk(n)}
    return [(n, t, id(n) in top_level) for n in ast.walk(tree) for t in _targets(n)]


def _all_modules() -> list[Path]:
    return sorted(PKG.rglob("*.py"))


def test_every_top_level_module_has_a_layer():
    tops = {_top(p) for p in _all_modules()}
    assert tops <= set(RANK), f"modules without a layer in tests/test_layers.py: {sorted(tops - set(RANK))}"


@pytest.mark.parametrize("path", _all_modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_no_module_imports_a_higher_layer(path):
    here = RANK[_top(path)]
    bad = [f"line {n.lineno}: ensdiv.{t}" for n, t, _ in _imports(path) if RANK[t] > here]
    assert not bad, f"{path.relative_to(PKG)} ({LAYERS[here][0]} layer) imports a higher layer: {bad}"


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: str(p.relative_to(PKG)))
def test_the_library_never_imports_the_chapters(path):
    bad = [n.lineno for n, t, _ in _imports(path) if t == "chapters"]
    assert not bad, f"{path.relative_to(PKG)} imports ensdiv.chapters at lines {bad}"


@pytest.mark.parametrize("path", _all_modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_internal_imports_are_at_module_level(path):
    # Function-level imports are kept for heavy optional third-party libraries only, never for ensdiv.
    bad = [n.lineno for n, _, top in _imports(path) if not top]
    assert not bad, f"{path.relative_to(PKG)} has function-level ensdiv imports at lines {bad}"


def test_layer_walk_catches_a_violation(tmp_path):
    """The checker itself: an import of a higher layer is seen, at module and at function level."""
    src = "from ensdiv.predict import predict\n\ndef f():\n    from ensdiv import chapters\n"
    mod = tmp_path / "x.py"
    mod.write_text(src)
    found = [(t, top) for _, t, top in _imports(mod)]
    assert found == [("predict", True), ("chapters", False)]


@pytest.mark.slow
def test_registries_are_complete_in_a_fresh_interpreter():
    code = (
        "import ensdiv as ed\n"
        "ed.get_dataset('pretrain/digits')\n"
        "assert 'pretrain/shapes' in dict(ed.list_datasets())\n"
        "assert {'resnet', 'single_small', 'packed_small', 'mimo_small', 'test_vit'} <= set(ed.list_models())\n"
        "import sys; assert 'ensdiv.chapters' not in sys.modules\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_the_contributing_guide_states_the_layers_in_this_order():
    guide = " ".join((PKG.parent / "CONTRIBUTING.md").read_text(encoding="utf-8").split())
    assert " → ".join(name for name, _ in LAYERS) in guide
