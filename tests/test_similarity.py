"""Tests of ensdiv.transfer: the N×N SAT matrix against per-pair loops, one-side scores, bad input."""

from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn as nn

from ensdiv.attacks import pgd
from ensdiv.data.registry import TensorSet
from ensdiv.errors import EnsdivError
from ensdiv.transfer import sat_from_fooled, sat_matrix, sat_one_side

ATTACK = {"eps": 0.5, "alpha": 0.1, "steps": 8}


def _linear(seed: int, c: int = 3) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(16, c)).eval()


def _data(model: nn.Module, n: int = 40) -> TensorSet:
    g = torch.Generator().manual_seed(0)
    x = torch.rand(n, 1, 4, 4, generator=g)
    with torch.no_grad():
        y = model(x).argmax(1)  # the first model is right on every image
    return TensorSet(x, y, "toy", ["a", "b", "c"])


def test_sat_from_fooled_matches_formula_loop():
    g = torch.Generator().manual_seed(1)
    fooled = torch.rand(4, 4, 30, generator=g) > 0.4
    correct = torch.rand(4, 30, generator=g) > 0.3
    two, one = sat_from_fooled(fooled, correct, eps=0.01)
    for a in range(4):
        for b in range(4):
            both = [i for i in range(30) if correct[a, i] and correct[b, i]]
            hits = sum(int(fooled[b, a, i]) + int(fooled[a, b, i]) for i in both)  # A(x_B)≠y + B(x_A)≠y
            expected = math.log(max(0.01, 100 * hits / (2 * len(both))))
            assert math.isclose(float(two[a, b]), expected, rel_tol=1e-9)
            rate = sum(int(fooled[a, b, i]) for i in both) / len(both)
            assert math.isclose(float(one[a, b]), math.log(max(0.01, 100 * rate)), rel_tol=1e-9)
    assert torch.allclose(two, two.T)


def test_matrix_matches_per_pair_attacks_and_identical_models_score_ln100():
    a = _linear(0)
    twin = copy.deepcopy(a)
    b = _linear(5)
    data = _data(a)
    res = sat_matrix([a, twin, b], data, subsample=None, attack_kwargs=ATTACK, names=["a", "twin", "b"])
    models = [a, twin, b]
    for s, src in enumerate(models):  # naive: attack each source, evaluate each target separately
        adv = pgd(src, data.x, data.y, seed=0, **ATTACK)
        for t, tgt in enumerate(models):
            with torch.no_grad():
                assert torch.equal(res.fooled[s, t], tgt(adv).argmax(1) != data.y)
    assert res.self_success[0] == 1.0
    assert math.isclose(float(res.scores[0, 1]), math.log(100), rel_tol=1e-9)
    assert float(res.scores[0, 1]) >= float(res.scores[0, 2])
    assert torch.allclose(res.scores, res.scores.T)
    assert list(res.frame().index) == ["a", "twin", "b"]


@pytest.mark.filterwarnings("ignore:Some pairs of models")
def test_one_side_without_reattacking_matches_full_matrix():
    a, b, c = _linear(0), _linear(1), _linear(2)
    data = _data(a)
    full = sat_matrix([a, b, c], data, subsample=None, attack_kwargs=ATTACK)
    one = sat_one_side(a, [b, c], data, subsample=None, attack_kwargs=ATTACK)
    assert torch.allclose(one, full.one_side[0, 1:])


def test_different_class_counts_is_one_sentence():
    data = _data(_linear(0))
    with pytest.raises(EnsdivError, match="different numbers of classes"):
        sat_matrix([_linear(0), _linear(1, c=4)], data, subsample=None, attack_kwargs=ATTACK)


def test_empty_xab_gives_nan_with_warning_not_log0():
    a = _linear(0)
    data = _data(a)
    never = _linear(3)
    with torch.no_grad():  # always predicts class 2, which no image has
        never[1].weight.zero_()
        never[1].bias.copy_(torch.tensor([0.0, 0.0, 10.0]))
    data = TensorSet(data.x, torch.zeros_like(data.y), "toy", ["a", "b", "c"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = sat_matrix([a, never], data, subsample=None, attack_kwargs=ATTACK)
    assert any("X_AB is empty" in str(w.message) for w in caught)
    assert math.isnan(float(res.scores[0, 1])) and not torch.isinf(res.scores).any()


def test_empty_dataset_and_bad_models():
    empty = TensorSet(torch.zeros(0, 1, 4, 4), torch.zeros(0, dtype=torch.long), "empty", ["a", "b", "c"])
    with pytest.raises(EnsdivError, match="empty"):
        sat_matrix([_linear(0)], empty, subsample=None)
    with pytest.raises(EnsdivError, match="nn.Modules or ed.Recipes"):
        sat_matrix(["resnet"], _data(_linear(0)))
    with pytest.raises(EnsdivError, match="one name per model"):
        sat_matrix([_linear(0)], _data(_linear(0)), names=["a", "b"])


@pytest.mark.filterwarnings("ignore:Some pairs of models")
def test_recipes_are_cached_and_new_model_only_attacked_once(tmp_path):
    from ensdiv.store import Store
    from ensdiv.train import Recipe

    store = Store(tmp_path)
    r1 = Recipe.make(model="test_mlp", epochs=1, train_subset=64, seed=0, batch_size=32)
    r2 = r1.replace(seed=1)
    r3 = r1.replace(seed=2)
    kw = {"subsample": 16, "attack_kwargs": {"steps": 2, "eps": 0.1, "alpha": 0.05}, "store": store}
    first = sat_matrix([r1, r2], "fmnist/test", **kw)
    assert len(store.entries("sat-adv")) == 2 and len(store.entries("sat-matrix")) == 1
    again = sat_matrix([r1, r2], "fmnist/test", **kw)
    assert torch.equal(first.fooled, again.fooled)
    sat_matrix([r1, r2, r3], "fmnist/test", **kw)
    assert len(store.entries("sat-adv")) == 3  # only the new model was attacked


def test_trend_line_matches_numpy():
    import numpy as np

    from ensdiv.analysis import trend_line

    rng = np.random.default_rng(0)
    x = rng.random(40)
    y = 2 - 3 * x + 0.3 * rng.standard_normal(40)
    y[5] = np.nan
    out = trend_line(x, y, ci=0.9)
    keep = ~np.isnan(y)
    assert out["n"] == 39
    assert math.isclose(out["slope"], np.polyfit(x[keep], y[keep], 1)[0], rel_tol=1e-9)
    assert math.isclose(out["r"], np.corrcoef(x[keep], y[keep])[0, 1], rel_tol=1e-9)
    band = out["band"]
    assert (band["lower"] <= band["mean"]).all() and (band["mean"] <= band["upper"]).all()
    assert math.isnan(trend_line([1, 1, 1], [1, 2, 3])["r"])


def test_draw_cluster_ensembles_uses_exactly_k_clusters():
    from ensdiv.chapters.attack_similarity import draw_cluster_ensembles

    labels = [1, 1, 1, 2, 2, 3, 3, 3, 4]
    for size in (2, 3, 4):
        for k in range(1, size + 1):
            combos = draw_cluster_ensembles(labels, size, k, n_draws=20, seed=k)
            for row in combos.tolist():
                assert len(set(row)) == size and len({labels[i] for i in row}) == k
            if k == 1 and size == 4:
                assert combos.shape[0] == 0  # no single cluster has 4 models
            elif k > 1:
                assert combos.shape[0] == 20


def test_sat_clusters_gives_an_isolated_model_a_cluster_of_its_own():
    from ensdiv.chapters.attack_similarity import sat_clusters

    # two blocks of mutually similar models (1-2, 3-4) and model 5 with no positive score to or from anyone:
    # the blocks are the two clusters, by hand; model 5 is cluster 3, and a warning names it
    s = np.full((5, 5), -1.0)
    s[:2, :2] = s[2:4, 2:4] = 3.0
    s[4, :] = s[:, 4] = np.nan
    with pytest.warns(UserWarning, match=r"1 of 5 models share no positive SAT score.*\(4\)"):
        labels = sat_clusters(s, 2, n_init=5)
    assert labels.tolist() == [1, 1, 2, 2, 3]
    # a score one way is enough to place a model (the graph is symmetrised)
    s[4, 0] = 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sat_clusters(s, 2, n_init=5).tolist() in ([1, 1, 2, 2, 1], [1, 1, 2, 2, 2])


@pytest.mark.parametrize("placed", [False, True])
def test_sat_clusters_when_little_graph_is_left(placed):
    # every model isolated (a dry run's random models: every score undefined): three clusters of one; or a single
    # pair placed, which K = 2 splits in two, and the third model alone
    from ensdiv.chapters.attack_similarity import sat_clusters

    s = np.full((3, 3), np.nan)
    if placed:
        s[0, 1] = 1.0
    with pytest.warns(UserWarning, match=f"{1 if placed else 3} of 3 models.*cluster of its own"):
        assert sat_clusters(s, 2, n_init=3).tolist() == [1, 2, 3]


def test_model_family_of_a_paper_zoo_recipe_and_an_unknown_architecture():
    from ensdiv.chapters.attack_similarity import model_family
    from ensdiv.chapters.zoo import zoo_recipes
    from ensdiv.errors import UnknownNameError

    paper, cpu = zoo_recipes("paper", ["arch/deit", "arch/resnet"]), zoo_recipes("cpu", ["arch/deit", "arch/resnet"])
    assert [model_family(r) for r in paper.values()] == [model_family(r) for r in cpu.values()] == ["ViT", "ResNet"]
    with pytest.raises(UnknownNameError, match="Unknown zoo architecture 'resnet34'"):
        model_family(cpu["arch/resnet"].replace(model="resnet34"))
