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
