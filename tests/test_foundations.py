"""The foundations chapter's evidence helpers: per-run scores and their image replicates against the library and a
naive loop, the two-stage bootstrap's value, and the null constructions of the corruptions and zoo pages."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ensdiv as ed
from ensdiv.chapters import foundations as ch


def _runs(seed: int = 0, s: int = 3, n: int = 200, c: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    y = torch.randint(0, c, (n,), generator=gen)
    z = torch.randn(s, n, c, generator=gen, dtype=torch.float64)
    z[:, torch.arange(n), y] += 1.0
    return z.softmax(-1), y


def test_run_scores_equal_the_library():
    probs, y = _runs()
    out = ch.run_replicates(probs, y, n_resamples=20, seed=0)
    for s in range(probs.shape[0]):
        assert out["acc"][0][s] == pytest.approx(100 * float(ed.metrics.accuracy(probs[s], y)))
        assert out["nll"][0][s] == pytest.approx(float(ed.metrics.nll(probs[s], y)))
        assert out["ece"][0][s] == pytest.approx(float(ed.metrics.ece(probs[s], y)), abs=1e-6)  # float32 inside
        assert out["acc"][1].shape == (3, 20)


def test_image_replicates_are_weighted_resamples():
    """A replicate is the score on a resample of the images: rebuilt here with a naive loop over the drawn
    images (the same multinomial weights, so the same resample), ECE included."""
    probs, y = _runs(1, s=1, n=60)
    out = ch.run_replicates(probs, y, n_resamples=5, seed=3)
    w = np.random.default_rng([3, 5]).multinomial(60, np.full(60, 1 / 60), size=5)
    for r in range(5):
        drawn = torch.from_numpy(np.repeat(np.arange(60), w[r]))
        p, t = probs[0][drawn], y[drawn]
        assert out["acc"][1][0, r] == pytest.approx(100 * float(ed.metrics.accuracy(p, t)))
        assert out["ece"][1][0, r] == pytest.approx(float(ed.metrics.ece(p, t)), abs=1e-6)  # float32 inside


def test_nested_estimate_is_the_mean_over_runs():
    points, reps = np.array([1.0, 2.0, 3.0]), np.array([[1.0] * 50, [2.0] * 50, [3.0] * 50])
    est = ch.nested_estimate(points, reps, seed=0, group="g")
    assert est.value == pytest.approx(2.0) and est.source == "seeds × test images"
    assert 1.0 <= est.replicates.min() and est.replicates.max() <= 3.0 and est.replicates.std() > 0


def test_swap_null_makes_the_two_sets_exchangeable():
    """Set A right everywhere, set B nowhere: swapped image by image, each draw's two relative accuracies sum to
    one (relative to a clean set right everywhere) and the difference is centred at zero."""
    null = ch.swap_null(np.ones(400), np.zeros(400), np.ones(400), names=("a", "b"), paired=True, draws=50,
                        n_resamples=20, seed=0)
    diffs = [d["a"].value - d["b"].value for d in null.draws]
    assert all(d["a"].value + d["b"].value == pytest.approx(1.0) for d in null.draws)
    assert abs(np.mean(diffs)) < 0.05
    pooled = ch.swap_null(np.ones(100), np.zeros(400), np.ones(400), names=("a", "b"), paired=False, draws=20,
                          n_resamples=10, seed=0)
    assert all(abs(d["a"].value - 0.2) < 0.15 for d in pooled.draws)  # 100 of the 500 pooled values are right


def test_swapped_groups_null_shuffles_group_means_image_by_image():
    """Each draw keeps the groups' total on every image (only their order changes), its gaps are centred at none,
    and a real gap of 14 points between two groups of these models is far out in its draws."""
    rng = np.random.default_rng(0)
    correct = (rng.random((6, 400)) < np.array([0.9, 0.88, 0.9, 0.7, 0.72, 0.8])[:, None]).astype(float)
    groups = {"a": [0, 1, 2], "b": [3, 4], "c": [5]}
    null = ch.swapped_groups_null(correct, groups, n_resamples=20, draws=200, seed=1)
    per_image = {g: 100 * correct[rows].mean(0) for g, rows in groups.items()}
    for d in null.draws[:5]:
        total = sum(d[f"{g}_mean"].value for g in groups)
        assert total == pytest.approx(sum(v.mean() for v in per_image.values()))
    gap = per_image["a"].mean() - per_image["b"].mean()
    null_gaps = np.array([d["a_mean"].value - d["b_mean"].value for d in null.draws])
    assert (1 + np.sum(null_gaps >= gap)) / 201 < 0.01
    assert abs(null_gaps.mean()) < 1.0  # centred at no gap
