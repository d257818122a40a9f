"""The chapters' one interface for evaluation sets: ``eval_set(cfg, role, *, n=None) -> TensorSet``."""

from __future__ import annotations

import inspect

import pytest
import torch

import ensdiv as ed
from ensdiv.chapters import design_diversity, design_diversity_training, foundations, packed_ensembles, sed

CHAPTERS = {"foundations": foundations, "packed-ensembles": packed_ensembles, "design-diversity": design_diversity,
            "design-diversity (training)": design_diversity_training, "sed": sed}


@pytest.mark.parametrize("name", list(CHAPTERS))
def test_every_chapter_has_the_same_eval_set_signature(name):
    params = inspect.signature(CHAPTERS[name].eval_set).parameters
    assert list(params) == ["cfg", "role", "n"]
    assert params["role"].default != inspect.Parameter.empty  # the page's main set by default
    assert params["n"].kind is inspect.Parameter.KEYWORD_ONLY and params["n"].default is None


def test_each_chapters_default_set_is_its_presets_test_images():
    cfg = foundations.preset("deep_ensemble_basics", "smoke", verbose=False)
    want = ed.get_dataset("fmnist/test").subset(cfg["test_subset"], seed=0)
    got = foundations.eval_set(cfg)
    assert torch.equal(got.x, want.x) and torch.equal(got.y, want.y)
    assert len(foundations.eval_set(cfg, n=7)) == 7
    pe = packed_ensembles.preset("fig06_07_alpha_gamma", "smoke", verbose=False)
    assert len(packed_ensembles.eval_set(pe)) == pe["test_subset"]
    assert len(packed_ensembles.eval_set(pe, "digits", n=5)) == 5
    dd = design_diversity.preset("fig07_trend_lines", "smoke", verbose=False, eval_images=12)
    assert torch.equal(design_diversity.eval_set(dd).y, design_diversity.eval_rows(dd, "clean")[0].y)
    sd = sed.preset("tab01_unique", "smoke", verbose=False)
    assert len(sed.eval_set(sd)) == sd["eval_subset"] and len(sed.eval_set(sd, n=9)) == 9


def test_an_unknown_role_is_one_sentence_naming_the_known_ones():
    """Bad input: a role the chapter does not have."""
    cfg = foundations.preset("deep_ensemble_basics", "smoke", verbose=False)
    with pytest.raises(ed.UnknownNameError, match="test"):
        foundations.eval_set(cfg, "clean")
    sd = sed.preset("tab01_unique", "smoke", verbose=False)
    with pytest.raises(ed.UnknownNameError, match="val"):
        sed.eval_set(sd, "vall")
    dd = design_diversity.preset("fig07_trend_lines", "smoke", verbose=False)
    with pytest.raises(ed.UnknownNameError):
        design_diversity.eval_set(dd, "fog")


def test_the_natural_hard_set_takes_no_image_count():
    """Bad input: ``n`` for SED's natural-hard set, which a committee's errors define (one sentence)."""
    sd = sed.preset("tab01_unique", "smoke", verbose=False)
    with pytest.raises(ed.InvalidInputError, match="takes no image count"):
        sed.eval_set(sd, "a", n=5)


def _own_resamplings(tree) -> list[int]:
    """Lines of calls that draw a bootstrap resample by hand: ``.multinomial(...)``, ``.integers(0, n, ...)``
    with a size (indices drawn with replacement) and ``.choice(..., replace=True)``."""
    import ast

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name, args = node.func.attr, node.args
            keywords = {k.arg: k.value for k in node.keywords}
            replace = keywords.get("replace")
            if (name == "multinomial"
                    or (name == "integers" and len(args) >= 3 and isinstance(args[0], ast.Constant)
                        and args[0].value == 0)
                    or (name == "choice" and isinstance(replace, ast.Constant) and replace.value is True)):
                lines.append(node.lineno)
    return lines


def test_no_chapter_draws_a_bootstrap_of_its_own():
    """Every resample with replacement in a chapter module or a notebook is drawn by ``ed.report``
    (``resample_indices``, ``resample_counts`` or a bootstrap built on them): the book's one bootstrap."""
    import ast
    import json

    from ensdiv.paths import project_root

    root = project_root()
    found = {}
    for path in sorted((root / "ensdiv" / "chapters").rglob("*.py")):
        hits = _own_resamplings(ast.parse(path.read_text(encoding="utf-8")))
        if hits:
            found[str(path.relative_to(root))] = hits
    for path in sorted((root / "notebooks").rglob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        code = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!")))
        hits = _own_resamplings(ast.parse(code))
        if hits:
            found[str(path.relative_to(root))] = hits
    assert not found, f"resamples drawn outside ed.report: {found}"
    # the detector itself: a hand-drawn resample of each form is found, an ordinary draw is not
    assert _own_resamplings(ast.parse("rng.integers(0, n, (r, n))\nrng.multinomial(n, p)\n"
                                      "rng.choice(x, 5, replace=True)")) == [1, 2, 3]
    assert _own_resamplings(ast.parse("rng.integers(2**31)\nrng.choice(x, 5, replace=False)")) == []
