"""Null data for the claims about a few chosen models (Figs. 5–7): the page's own data with the effect removed.
(Figs. 3 and 4 compare categories of models: :mod:`~ensdiv.chapters.training_methods.model_groups`.)

- **No gain** (Figs. 5, 6). Per-image gains centred at zero, column by column, and the test images resampled
  (:func:`centred_gain_null`).
- **Loss and data carry nothing** (Fig. 5). For each high model the low-accuracy models' labels "another loss or
  data" / "the same" are permuted among them (each pool keeps its size), both first additions are chosen again
  on the validation split and scored on test (:func:`relabelled_additions_null`). A larger pool's best-of-more
  advantage stays in the null, so a check that only reflects it does not count.
- **The two compared models do not differ** (Figs. 6, 7). Their per-image results exchanged at random on every
  test image (:func:`swapped_null`, :func:`swapped_curves_null`).
- **Training differences carry nothing** (Fig. 7). The labels "trained differently" / "alike" permuted across the
  pairs (:func:`relabelled_sets_null`).

Each draw's estimates come from a bootstrap over the test images with one set of resamples for all draws, so the
draws differ only in what the null changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

import ensdiv as ed
from ensdiv.chapters.training_methods.analysis import loss_and_data, other_loss_or_data
from ensdiv.chapters.training_methods.population import Outputs, calibrated_probs

__all__ = ["addition_tables", "centred_gain_null", "first_additions_compared", "relabelled_additions_null",
           "relabelled_sets_null", "set_means",
           "swapped_curves_null", "swapped_null", "trained_differently"]


def _estimate(value: float, reps: np.ndarray, tag: str) -> Any:
    return ed.report.Estimate(float(value), np.asarray(reps, dtype=float), "evaluation samples", "bootstrap", tag)


def centred_gain_null(gain: np.ndarray, name: str, *, draws: int, seed: int, n_resamples: int) -> Any:
    """Null data for "the smallest gain is positive": ``gain`` ``(N, H)`` (per test image, per high model)
    centred at zero column by column, the images resampled on each draw; each draw's ``name`` is the smallest
    column mean with a bootstrap over the images.

    >>> g = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]] * 25)
    >>> null = centred_gain_null(g, "smallest", draws=20, seed=0, n_resamples=50)
    >>> len(null.draws), bool(abs(np.mean([d["smallest"].value for d in null.draws])) < 0.2)
    (20, True)
    """
    g = np.asarray(gain, dtype=float)
    g = g - g.mean(0, keepdims=True)
    n = g.shape[0]
    inner = ed.report.resample_indices(n, n_resamples=n_resamples, seed=[seed, 7])

    def make(rng: np.random.Generator) -> dict[str, Any]:
        d = g[ed.report.resample_indices(n, n_resamples=1, seed=rng)[0]]
        reps = d[inner].mean(1).min(-1)
        return {name: _estimate(d.mean(0).min(), reps, f"gain-null-{rng.integers(2 ** 62)}")}

    return ed.report.null_draws("every high model's gain centred at zero (no gain), test images resampled", make,
                                draws=draws, seed=seed)


def addition_tables(out: Outputs, temps: torch.Tensor, high: Sequence[str], low: Sequence[str]
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For every high model ``h`` and low model ``k``: the validation accuracy of the two-model ensemble ``(H, L)``,
    whether it is right on each test image ``(H, L, N)``, whether ``k`` was trained with another loss or on other
    data than ``h`` ``(H, L)`` (:func:`other_loss_or_data`), and the validation accuracy of ``h`` alone ``(H,)``."""
    pv, pt = calibrated_probs(out, temps, "val"), calibrated_probs(out, temps, "test")
    yv, yt = out.labels["val"], out.labels["test"]
    hi, lo = [out.index(h) for h in high], [out.index(k) for k in low]
    val = np.array([[float(((pv[i] + pv[j]).argmax(-1) == yv).double().mean()) for j in lo] for i in hi])
    test = np.stack([np.stack([((pt[i] + pt[j]).argmax(-1) == yt).numpy() for j in lo]) for i in hi])
    diverse = np.array([[other_loss_or_data(out, h, k) for k in low] for h in high])
    alone = np.array([float((pv[i].argmax(-1) == yv).double().mean()) for i in hi])
    return val, test, diverse, alone


def _picks(val: np.ndarray, diverse: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per high model, the index of the best low model (validation) of each kind, and which high models have
    both kinds (ties: the first)."""
    masked_d = np.where(diverse, val, -np.inf)
    masked_s = np.where(~diverse, val, -np.inf)
    both = diverse.any(1) & (~diverse).any(1)
    return masked_d.argmax(1), masked_s.argmax(1), both


def first_additions_compared(val: np.ndarray, test: np.ndarray, diverse: np.ndarray, *, names: Sequence[str],
                             inner: np.ndarray, tag: str) -> dict[str, Any]:
    """The test accuracy (%) of the best first addition of each kind, averaged over the high models that have
    both kinds, with a bootstrap over the test images (``inner``: ``(R, N)`` resampled indices); NaN estimates
    when no high model has both kinds."""
    d, s, both = _picks(val, diverse)
    if not both.any():
        return {n: _estimate(float("nan"), np.array([]), tag) for n in names}
    rows = np.flatnonzero(both)
    out = {}
    for name, pick in zip(names, (d, s), strict=True):
        per = 100 * test[rows, pick[rows]].astype(float).mean(0)  # (N,)
        out[name] = _estimate(per.mean(), per[inner].mean(1), tag)
    return out


def relabelled_additions_null(val: np.ndarray, test: np.ndarray, diverse: np.ndarray, *, names: Sequence[str],
                              draws: int, seed: int, n_resamples: int) -> Any:
    """Null data for "the best first addition with another loss or data beats the best one with the same": for
    each high model the kind labels of the low models permuted (pool sizes kept), both picks made again on the
    validation split, scored on test."""
    n = test.shape[-1]
    inner = ed.report.resample_indices(n, n_resamples=n_resamples, seed=[seed, 8])

    def make(rng: np.random.Generator) -> dict[str, Any]:
        shuffled = np.stack([rng.permutation(row) for row in diverse])
        return first_additions_compared(val, test, shuffled, names=names, inner=inner,
                                        tag=f"additions-null-{rng.integers(2 ** 62)}")

    return ed.report.null_draws("the low models' labels 'another loss or data' / 'the same' permuted for each "
                                "high model (pool sizes kept), both first additions chosen again on validation",
                                make, draws=draws, seed=seed)


# ---- Fig. 6: gains of combined features, features needed -------------------------------------------------
def swapped_null(per: dict[str, np.ndarray], a: str, b: str, *, draws: int, seed: int, n_resamples: int) -> Any:
    """Null data for "``a``'s mean per-image score exceeds ``b``'s" on the same test images: on every image the
    two pairs' scores exchanged with probability ½ (the two pairs then do not differ), each draw's means with a
    bootstrap over the images (one set of resamples for all draws).

    >>> null = swapped_null({"x": np.ones(40), "y": np.zeros(40)}, "x", "y", draws=30, seed=0, n_resamples=20)
    >>> bool(abs(np.mean([d["x"].value - d["y"].value for d in null.draws])) < 0.15)
    True
    """
    va, vb = np.asarray(per[a], dtype=float), np.asarray(per[b], dtype=float)
    n = va.size
    inner = ed.report.resample_indices(n, n_resamples=n_resamples, seed=[seed, 10])

    def make(rng: np.random.Generator) -> dict[str, Any]:
        swap = rng.random(n) < 0.5
        xa, xb = np.where(swap, vb, va), np.where(swap, va, vb)
        tag = f"swap-null-{rng.integers(2 ** 62)}"
        return {a: _estimate(xa.mean(), xa[inner].mean(1), tag), b: _estimate(xb.mean(), xb[inner].mean(1), tag)}

    return ed.report.null_draws(f"{a} and {b} exchanged at random on every test image", make, draws=draws, seed=seed)


def _needed(means: np.ndarray, target: np.ndarray, ks: np.ndarray, censored: float) -> np.ndarray:
    """The first k whose accuracy reaches the target, per row of ``means`` ``(R, K)``; NaN when it is reached at
    the smallest k (censored below), ``censored`` when never."""
    hit = means >= target[:, None]
    first = hit.argmax(1)
    out = np.where(hit.any(1), ks[first], censored).astype(float)
    out[hit.any(1) & (first == 0)] = np.nan
    return out


def swapped_curves_null(curves: dict[str, np.ndarray], a: str, b: str, target: np.ndarray, ks: np.ndarray,
                        censored: float, *, names: dict[str, str], draws: int, seed: int, n_resamples: int) -> Any:
    """Null data for "pair ``a`` needs fewer features than pair ``b``": the two pairs' per-image correctness
    curves ``(N, K)`` (on one grid ``ks``) exchanged image by image with probability ½, and the features needed
    recomputed on a bootstrap over the images (target resampled with them); keyed by ``names``."""
    ca, cb = (np.asarray(curves[k], dtype=float) for k in (a, b))
    t = np.asarray(target, dtype=float)
    n = t.size
    inner = ed.report.resample_indices(n, n_resamples=n_resamples, seed=[seed, 11])
    ks = np.asarray(ks, dtype=float)

    def make(rng: np.random.Generator) -> dict[str, Any]:
        swap = rng.random(n) < 0.5
        xa, xb = np.where(swap[:, None], cb, ca), np.where(swap[:, None], ca, cb)
        tag = f"curves-null-{rng.integers(2 ** 62)}"
        tr = t[inner].mean(1)
        out = {}
        for key, x in ((a, xa), (b, xb)):
            value = _needed(x.mean(0)[None], np.array([t.mean()]), ks, censored)[0]
            out[names[key]] = _estimate(value, _needed(x[inner].mean(1), tr, ks, censored), tag)
        return out

    return ed.report.null_draws(f"the curves of {a} and {b} exchanged at random on every test image", make,
                                draws=draws, seed=seed)


# ---- Fig. 7: pairs that differ in their training against pairs that do not -------------------------------------
def trained_differently(out: Outputs, a: str, b: str, category: dict[str, str]) -> bool:
    """Whether two models were trained differently in the sense of §4.7: another loss or other data
    (:func:`ensdiv.chapters.training_methods.analysis.loss_and_data`, read from the recipes); without recipes
    (paper scale), another category."""

    if a in out.recipes and b in out.recipes:
        return loss_and_data(out.recipes[a]) != loss_and_data(out.recipes[b])
    return category[a] != category[b]


def set_means(scores: np.ndarray, differs: np.ndarray, *, names: Sequence[str], inner: np.ndarray, tag: str
              ) -> dict[str, Any]:
    """The mean test score (%) over the pairs of each set (``differs`` True: ``names[0]``, else ``names[1]``), per
    test image averaged over the set's pairs, with a bootstrap over the images (``inner``); NaN estimates for an
    empty set. ``scores``: ``(P, N)`` per pair and test image."""
    out = {}
    for name, mask in zip(names, (differs, ~differs), strict=True):
        if not mask.any():
            out[name] = _estimate(float("nan"), np.array([]), tag)
            continue
        per = 100 * scores[mask].astype(float).mean(0)
        out[name] = _estimate(per.mean(), per[inner].mean(1), tag)
    return out


def relabelled_sets_null(scores: np.ndarray, differs: np.ndarray, *, names: Sequence[str], draws: int, seed: int,
                         n_resamples: int) -> Any:
    """Null data for "pairs trained differently score higher than pairs trained alike": the two labels permuted
    across the pairs (set sizes kept), each draw's set means with a bootstrap over the test images."""
    n = scores.shape[1]
    inner = ed.report.resample_indices(n, n_resamples=n_resamples, seed=[seed, 12])

    def make(rng: np.random.Generator) -> dict[str, Any]:
        return set_means(scores, rng.permutation(differs), names=names, inner=inner,
                         tag=f"sets-null-{rng.integers(2 ** 62)}")

    return ed.report.null_draws("the labels 'trained differently' / 'trained alike' permuted across the pairs "
                                "(set sizes kept)", make, draws=draws, seed=seed)
