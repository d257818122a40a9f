"""Fig. 1's evidence: component importances of the released matrix with a bootstrap over the models (the
claims' nulls are that bootstrap, centred at their bounds: :func:`ensdiv.report.centred_null`).

:func:`~ensdiv.chapters.attack_similarity.release.component_importance` keeps each pair's contribution to every
component's importance (``attrs["per_pair"]``). A component's importance is the mean of its column over the
pairs; the pairs share models, so a bootstrap over the pairs is too narrow. :func:`importance_estimates`
resamples the *models* instead: a resample weighs the pair (a, b) of distinct models by how often a and b were
drawn (a model drawn twice weighs twice; a model never pairs with its own copy). The regressor is not refitted
on a resample.

* :func:`pair_weights`, :func:`importance_estimates` — statistics of the importance vector, bootstrapped over
  the models.
* :func:`better_rank` — the better (smaller) rank of some components among all (1 = most important).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

import ensdiv as ed
from ensdiv.chapters.attack_similarity.intervals import new_group

__all__ = ["better_rank", "importance_estimates", "pair_weights"]


def pair_weights(pairs: Any, n_models: int, *, n_resamples: int, seed: int) -> np.ndarray:
    """``(R, P)`` weights of the pairs ``pairs`` (P, 2) of distinct models in ``n_resamples`` bootstrap resamples
    of the ``n_models`` models: the product of how often each of the two models was drawn.

    >>> w = pair_weights(np.array([[0, 1], [0, 2], [1, 2]]), 3, n_resamples=1, seed=0)
    >>> w.shape, bool(np.all(w >= 0))
    ((1, 3), True)
    """
    p = np.asarray(pairs, dtype=int)
    counts = ed.report.resample_counts(n_models, n_resamples=int(n_resamples), seed=seed)
    return counts[:, p[:, 0]] * counts[:, p[:, 1]]


def importance_estimates(per_pair: Any, pairs: Any, n_models: int,
                         statistics: Mapping[str, Callable[[np.ndarray], float]], *, n_resamples: int,
                         seed: int) -> dict[str, ed.report.Estimate]:
    """Statistics of the importance vector ``(K,)`` (the mean of ``per_pair`` (P, K) over the pairs), each on all
    pairs (the value) and on the pairs of ``n_resamples`` bootstrap resamples of the models, weighted by
    :func:`pair_weights` (the replicates, shared by every statistic: paired). Source ``"models"``.

    >>> per_pair = np.array([[1.0, 0.0], [3.0, 0.0], [2.0, 1.0]])
    >>> est = importance_estimates(per_pair, [[0, 1], [0, 2], [1, 2]], 3, {"first": lambda v: float(v[0])},
    ...                            n_resamples=20, seed=0)
    >>> est["first"].value, est["first"].source  # (1 + 3 + 2) / 3
    (2.0, 'models')
    """
    x = np.asarray(per_pair, dtype=float)
    w = pair_weights(pairs, n_models, n_resamples=n_resamples, seed=seed)
    total = w.sum(1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(total > 0, (w @ x) / np.where(total > 0, total, 1.0), np.nan)  # (R, K)
    full = x.mean(0)
    group = new_group("models")
    out = {}
    for name, fn in statistics.items():
        reps = np.array([fn(v) if np.all(np.isfinite(v)) else np.nan for v in means], dtype=float)
        out[name] = ed.report.Estimate(float(fn(full)), reps, "models", "bootstrap", group)
    return out


def better_rank(importance: Any, columns: Sequence[int]) -> float:
    """The better (smaller) rank among the components ``columns`` of an importance vector (1 = the most
    important; a tie takes the better rank).

    >>> better_rank(np.array([0.5, 0.1, 0.3, 0.2]), [1, 3])  # ranks 4 and 3
    3.0
    """
    v = np.asarray(importance, dtype=float)
    return float(min(1 + int((v > v[c]).sum()) for c in columns))
