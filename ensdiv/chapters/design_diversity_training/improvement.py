"""An ensemble's improvement over its best member, image by image (Fig. 8 and Sec. 5.2's comparison of sub-network
ensembles with the heterogeneous zoo's).

- :func:`gain_over_best`: per ensemble and test image, the logit-averaged ensemble's correctness minus its best
  member's, so the mean over images is the ensemble's improvement and a bootstrap over the images resamples it;
- :func:`accuracy_spread`: how far the members' accuracies part (best minus mean), which bounds what a gain over
  the best member can be, so two families are compared only where their spreads are alike;
- :func:`mean_gain_null`: null data for the mean improvement held at a chosen value (0: no ensemble improves;
  a bound: the claim false), with the test images resampled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import ensdiv as ed
from ensdiv.chapters import design_diversity as dd
from ensdiv.errors import InvalidInputError

__all__ = ["gain_over_best", "accuracy_spread", "mean_gain_null"]


def _members(combos: Sequence[Sequence[int]], n_models: int) -> np.ndarray:
    cs = np.asarray([list(c) for c in combos], dtype=int)
    if cs.ndim != 2 or cs.size == 0 or cs.min() < 0 or cs.max() >= n_models:
        raise InvalidInputError(f"Ensembles are tuples of model indices below {n_models}, all of one size; got "
                                f"{len(cs)} of shape {cs.shape}.")
    return cs


def gain_over_best(logits: Any, labels: Any, combos: Sequence[Sequence[int]]) -> np.ndarray:
    """Per ensemble and test image, the logit-averaged ensemble's correctness minus that of its best member (the
    member with the highest accuracy on these images), in percentage points.

    Shape:
        ``logits`` ``(M, N, C)``, ``labels`` ``(N,)``, ``combos`` ``E`` tuples of member indices -> ``(E, N)``,
        each entry -100, 0 or 100.

    >>> import torch
    >>> z = torch.tensor([[[2., 0.], [2., 0.], [2., 0.]],    # model 0: right on images 0, 1 (the best, first)
    ...                   [[2., 0.], [0., 3.], [0., 3.]],    # model 1: right on images 0, 2
    ...                   [[0., 1.], [0., 3.], [0., 1.]]])   # model 2: right on image 2
    >>> gain_over_best(z, torch.tensor([0, 0, 1]), [(0, 1, 2)]).tolist()  # the average: right on images 0, 2
    [[0.0, -100.0, 100.0]]
    """
    right = dd.correct(logits, labels)
    cs = _members(combos, right.shape[0])
    best = cs[np.arange(len(cs)), right[cs].mean(-1).argmax(1)]
    return 100 * (dd.ensemble_correct(logits, labels, cs) - right[best])


def accuracy_spread(logits: Any, labels: Any, combos: Sequence[Sequence[int]]) -> float:
    """The mean over the ensembles of their best member's accuracy minus their members' mean accuracy (points).

    >>> import torch
    >>> z = torch.tensor([[[1., 0.], [1., 0.]], [[1., 0.], [0., 1.]], [[0., 1.], [0., 1.]]])  # 100, 50, 0 %
    >>> accuracy_spread(z, torch.tensor([0, 0]), [(0, 1), (1, 2)])  # (100 - 75 + 50 - 25) / 2
    25.0
    """
    acc = dd.correct(logits, labels).mean(-1)
    cs = _members(combos, acc.shape[0])
    return float(100 * (acc[cs].max(1) - acc[cs].mean(1)).mean())


def mean_gain_null(construction: str, gain: Any, *, name: str, shift: float, draws: int,
                   seed: int) -> ed.report.Null:
    """Null data for the mean improvement ``name`` over the ensembles: every ensemble's per-image gains (``(E, N)``,
    :func:`gain_over_best`) centred at zero and moved by ``shift`` (0: no ensemble improves; a bound: the claim
    false), so the mean improvement is ``shift``; each draw resamples the test images and carries its own bootstrap
    over them (``draws`` resamples), as the page's estimate does.

    Raises:
        InvalidInputError: ``gain`` is not ``(E, N)``.
    """
    gain = np.asarray(gain, dtype=float)
    if gain.ndim != 2 or gain.size == 0:
        raise InvalidInputError(f"The gains are one row per ensemble and one column per test image; got shape "
                                f"{gain.shape}.")
    centred = gain - gain.mean(1, keepdims=True) + shift

    def one(rng: np.random.Generator) -> dict[str, Any]:
        g = centred[:, ed.report.resample_indices(centred.shape[1], n_resamples=1, seed=rng)[0]]
        per_image = g.mean(0)
        drawn = ed.report.resample_indices(per_image.size, n_resamples=draws, seed=rng)
        return {name: ed.report.Estimate(float(per_image.mean()), per_image[drawn].mean(1))}

    return ed.report.null_draws(construction, one, draws=draws, seed=seed)
