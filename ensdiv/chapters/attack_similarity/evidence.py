"""Evidence for the attack-similarity chapter's claims (issue #50): statistics of a set of models with a bootstrap
over the models, and null data that removes the effect by dealing models into random groups.

The released matrix's claims are about groups of models (clusters, base architectures): "pairs in the same group
are more similar", "the spectral features separate the groups", "the clusters follow base architecture". Each is
a statistic of the matrix and one labelling of its models. Its null is the same statistic with the labels dealt
at random among the models (groups of the same sizes): whatever the matrix, a random partition carries no
effect. A labelling made *from* the matrix (its own spectral clusters) is not tested against the matrix: the
groups tested here come from the component table (:func:`ensdiv.chapters.attack_similarity.release
.load_sat_release`).

* :func:`model_estimate` — one statistic of the models ``i``, with a bootstrap over the models. A resample keeps
  its duplicates (a model drawn twice weighs twice) and the statistics leave out the pairs of a model with its
  own copy. Keeping only a resample's distinct models narrows the interval: on the release, with the base
  architectures dealt at random, a within-minus-between contrast "passed" 12 % of 200 draws that way and 4.7 %
  of 300 with the duplicates kept.
* :func:`silhouette` — how well features separate groups, duplicates never compared with themselves.
* :func:`block_contrast` — mean similarity of pairs in the same group minus pairs in different groups.
* :func:`dealt_null` — a :class:`~ensdiv.report.Null` whose draws recompute statistics with the labels dealt at
  random (the same group sizes), each with its own model bootstrap.
* :func:`ensemble_rows` — one row of ensemble metrics per ensemble (Figs. 3 and 4).
* :func:`cluster_ensemble_table`, :func:`k_slope`, :func:`k_slopes` — Fig. 3: the change of an ensemble metric per
  extra cluster at equal mean and best member error (one statistic per metric), with a bootstrap over the models
  the ensembles are drawn from (:func:`ensdiv.report.member_weights`).
* :func:`partial_r`, :func:`partial_estimate` — Fig. 5: a correlation with teacher accuracy held fixed.
* :func:`pair_r` — Pearson r of two symmetric matrices over the pairs of distinct models of a resample.
* :func:`swapped_directions` — an asymmetric matrix with the two attack directions of each pair swapped at random.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import torch

import ensdiv as ed
from ensdiv.chapters import attack_similarity as _asim  # the package importing this module: read at call time
from ensdiv.chapters.attack_similarity.intervals import new_group
from ensdiv.errors import InvalidInputError

__all__ = [
    "COVARIATES",
    "ENSEMBLE_COLUMNS",
    "MIN_PARTIAL",
    "block_contrast",
    "cluster_ensemble_table",
    "dealt_null",
    "ensemble_rows",
    "k_slope",
    "k_slopes",
    "model_estimate",
    "model_estimates",
    "pair_ari",
    "pair_r",
    "partial_estimate",
    "partial_r",
    "pool_size",
    "silhouette",
    "swapped_directions",
]


def model_estimates(n_models: int, statistics: Mapping[str, Callable[[np.ndarray], float]], *,
                    n_resamples: int, seed: int) -> dict[str, ed.report.Estimate]:
    """Statistics of ``n_models`` models, each evaluated on all models (the value) and on the distinct models of
    ``n_resamples`` bootstrap resamples (the replicates, shared by every statistic: paired).

    Each statistic receives the resample's model indices, duplicates included (``np.arange(n_models)`` for the
    value); a statistic over pairs leaves out the pairs ``idx[a] == idx[b]``. A replicate where a statistic is
    undefined is NaN.

    >>> est = model_estimates(4, {"n": lambda i: float(len(set(i.tolist())))}, n_resamples=50, seed=0)
    >>> est["n"].value, est["n"].source, bool(est["n"].replicates.max() <= 4)
    (4.0, 'models', True)
    """
    if n_models < 2:
        raise InvalidInputError(f"A bootstrap over models needs at least two models, got {n_models}.")
    rng = np.random.default_rng(seed)
    draws = list(ed.report.resample_indices(n_models, n_resamples=int(n_resamples), seed=rng))
    full = np.arange(n_models)
    group = new_group("models")
    out = {}
    for name, fn in statistics.items():
        reps = np.array([fn(i) for i in draws], dtype=float)
        out[name] = ed.report.Estimate(float(fn(full)), reps, "models", "bootstrap", group)
    return out


def model_estimate(n_models: int, statistic: Callable[[np.ndarray], float], *, n_resamples: int,
                   seed: int) -> ed.report.Estimate:
    """:func:`model_estimates` of one statistic."""
    return model_estimates(n_models, {"s": statistic}, n_resamples=n_resamples, seed=seed)["s"]


def block_contrast(similarity: Any, labels: Any, idx: np.ndarray | None = None) -> float:
    """Mean similarity of the pairs of distinct models in the same group minus that of pairs in different groups,
    over the models ``idx`` (default: all; a bootstrap resample's duplicates weigh as often as they are drawn,
    and a model is never paired with its own copy); NaN where either kind of pair is missing.

    >>> s = np.array([[0, 3, 1, 1], [3, 0, 1, 1], [1, 1, 0, 2], [1, 1, 2, 0]], dtype=float)
    >>> block_contrast(s, [1, 1, 2, 2])  # within (3 + 2) / 2 = 2.5, between 1
    1.5
    """
    s = np.asarray(similarity, dtype=float)
    lab = np.asarray(labels)
    idx = np.arange(len(s)) if idx is None else np.asarray(idx)
    m, g = s[np.ix_(idx, idx)], lab[idx]
    same = g[:, None] == g[None, :]
    pair = idx[:, None] != idx[None, :]
    if not (same & pair).any() or not (~same & pair).any():
        return float("nan")
    return float(m[same & pair].mean() - m[~same & pair].mean())


def pair_ari(first: Any, second: Any, idx: np.ndarray | None = None) -> float:
    """Adjusted Rand index of two labellings of the models ``idx`` (default: all), counted over the pairs of
    distinct models: a bootstrap resample's duplicates weigh as often as drawn and a model is never paired with its
    own copy (a copy agrees with itself in every labelling, which would raise the index of random labels).
    With every model once it equals :func:`sklearn.metrics.adjusted_rand_score`; NaN when undefined.

    >>> round(pair_ari([1, 1, 2, 2, 3], [1, 1, 2, 3, 3]), 4)  # 10 pairs, 2 and 2 alike, 1 in both: 0.6 / 1.6
    0.375
    """
    a, b = np.asarray(first), np.asarray(second)
    idx = np.arange(len(a)) if idx is None else np.asarray(idx)
    upper = np.triu(np.ones((len(idx), len(idx)), dtype=bool), k=1) & (idx[:, None] != idx[None, :])
    x = (a[idx][:, None] == a[idx][None, :])[upper]
    y = (b[idx][:, None] == b[idx][None, :])[upper]
    pairs = x.size
    if pairs == 0:
        return float("nan")
    sx, sy = float(x.sum()), float(y.sum())
    expected = sx * sy / pairs
    top = (sx + sy) / 2 - expected
    return float((np.sum(x & y) - expected) / top) if top != 0 else float("nan")


def pair_r(first: Any, second: Any, idx: np.ndarray | None = None) -> float:
    """Pearson r of two (M, M) symmetric matrices over the pairs of distinct models of ``idx`` (default: all; a
    bootstrap resample's duplicates weigh as often as drawn, a model never paired with its own copy), NaN pairs
    left out; NaN with fewer than 4 pairs or a constant side.

    >>> a = np.array([[0, 1, 2, 3], [1, 0, 4, 5], [2, 4, 0, 6], [3, 5, 6, 0]], dtype=float)
    >>> round(pair_r(a, 2 * a + 1), 6), round(pair_r(a, -a, np.array([0, 0, 1, 2, 3])), 6)
    (1.0, -1.0)
    """
    x, y = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    idx = np.arange(len(x)) if idx is None else np.asarray(idx)
    upper = np.triu(np.ones((len(idx), len(idx)), dtype=bool), k=1) & (idx[:, None] != idx[None, :])
    a, b = x[np.ix_(idx, idx)][upper], y[np.ix_(idx, idx)][upper]
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    if a.size < 4 or np.std(a) == 0 or np.std(b) == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def silhouette(features: Any, labels: Any, idx: np.ndarray | None = None) -> float:
    """Mean silhouette of ``labels`` over the rows ``features[idx]`` (Euclidean distances), a row never compared
    with its own copy (bootstrap duplicates); NaN with fewer than two groups. A row's silhouette is
    ``(b - a) / max(a, b)``, ``a`` its mean distance to the other rows of its group, ``b`` the lowest mean
    distance to another group; 0 for a row alone in its group (as :func:`sklearn.metrics.silhouette_score`).

    >>> f = np.array([[0.0], [0.1], [1.0], [1.1]])
    >>> round(silhouette(f, [1, 1, 2, 2]), 4)  # rows 0, 3: (1.05 - 0.1) / 1.05; rows 1, 2: (0.95 - 0.1) / 0.95
    0.8997
    """
    x = np.asarray(features, dtype=float)
    lab = np.asarray(labels)
    idx = np.arange(len(x)) if idx is None else np.asarray(idx)
    g = lab[idx]
    groups = list(dict.fromkeys(g.tolist()))
    if len(groups) < 2:
        return float("nan")
    xi = x[idx]
    d = np.sqrt(np.maximum(((xi[:, None, :] - xi[None, :, :]) ** 2).sum(-1), 0.0))
    other = (idx[:, None] != idx[None, :]).astype(float)  # (n, n): never a row with its own copy
    onehot = (g[:, None] == np.array(groups, dtype=object)[None, :]).astype(float)  # (n, K)
    counts = other @ onehot  # (n, K): the other rows of each group
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, ((d * other) @ onehot) / np.maximum(counts, 1), np.nan)
    own = onehot.astype(bool)
    a = np.where(own, means, 0.0).sum(1)
    alone = (np.where(own, counts, 0.0).sum(1)) == 0
    b = np.nanmin(np.where(own, np.inf, np.where(np.isnan(means), np.inf, means)), axis=1)
    top = np.maximum(a, b)
    with np.errstate(invalid="ignore", divide="ignore"):
        scores = np.where(alone | ~np.isfinite(b) | (top <= 0), 0.0, (b - a) / np.where(top > 0, top, 1.0))
    return float(scores.mean())


def dealt_null(construction: str, labels: Any, make: Callable[[np.ndarray], Mapping[str, Any]], *,
               draws: int, seed: int) -> ed.report.Null:
    """Null data: ``labels`` dealt at random among the models (the same group sizes), ``make(dealt)`` giving the
    quantities of one draw (typically :func:`model_estimates` on the dealt labels).

    >>> null = dealt_null("dealt", [1, 1, 2, 2], lambda lab: {"first": float(lab[0])}, draws=3, seed=0)
    >>> len(null.draws), null.construction
    (3, 'dealt')
    """
    lab = np.asarray(labels)
    return ed.report.null_draws(construction, lambda rng: make(rng.permutation(lab)), draws=draws, seed=seed)


def swapped_directions(one_side: Any, rng: np.random.Generator) -> np.ndarray:
    """An asymmetric (M, M) matrix with the entries (a, b) and (b, a) of each pair swapped with probability ½:
    which attack direction is which carries no information any more (the diagonal is kept).

    >>> m = np.arange(9.0).reshape(3, 3)
    >>> out = swapped_directions(m, np.random.default_rng(0))
    >>> sorted([out[0, 1], out[1, 0]]) == [1.0, 3.0], float(out[1, 1])
    (True, 4.0)
    """
    m = np.array(one_side, dtype=float)
    n = len(m)
    flip = np.triu(rng.random((n, n)) < 0.5, k=1)
    flip = flip | flip.T
    return np.where(flip, m.T, m)


# ---- Fig. 3: ensembles drawn from k clusters, member accuracy as a covariate -------------------------------------
ENSEMBLE_COLUMNS = ("top-1 error (%)", "mean member error (%)", "best member error (%)", "ERR (%)", "all wrong (%)")
#: What an ensemble's error is compared at (:func:`k_slope`): its members' mean error *and* its best member's, so an
#: ensemble of unequal members (whose best member alone errs less) is not credited with its spread.
COVARIATES = ("mean member error (%)", "best member error (%)")


def cluster_ensemble_table(logits: Any, labels: Any, clusters: Any, *, max_members: int, n_draws: int,
                           seed: int) -> pd.DataFrame:
    """One row per random ensemble of Fig. 3 (:func:`~ensdiv.chapters.attack_similarity.draw_cluster_ensembles`
    for every size ``N = 2..max_members`` and every number of clusters ``k``): its size, ``k``, its top-1 error,
    the mean and best error of its members, its ERR (1 − error / mean member error) and the share of images every
    member gets wrong, in %, and its ``members`` (model indices). Ensembles average their members' logits.

    >>> logits = torch.tensor([[[2.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [0.0, 1.0]], [[1.0, 0.0], [1.0, 0.0]]])
    >>> t = cluster_ensemble_table(logits, torch.tensor([0, 1]), [1, 1, 2], max_members=2, n_draws=1, seed=0)
    >>> sorted(t["k"].tolist()), float(t["mean member error (%)"].min())  # models 0 + 1: (0 + 50) / 2
    ([1, 2], 25.0)
    """
    draw_cluster_ensembles = _asim.draw_cluster_ensembles
    clusters = np.asarray(clusters)
    rows = []
    for n in range(2, int(max_members) + 1):
        for k in range(1, min(n, len(set(clusters.tolist()))) + 1):
            combos = draw_cluster_ensembles(clusters, n, k, n_draws=n_draws, seed=seed + 100 * n + k)
            if len(combos) == 0:
                continue
            rows += [{"k": k, **r} for r in ensemble_rows(logits, labels, combos)]
    return pd.DataFrame(rows, columns=["N", "k", *ENSEMBLE_COLUMNS, "members"])


def ensemble_rows(logits: Any, labels: Any, combos: Any, *, ids: Any = None) -> list[dict[str, Any]]:
    """One dict per ensemble of ``combos`` (K, N) (mean of the members' logits): its size ``N``, the
    :data:`ENSEMBLE_COLUMNS` (top-1 error, mean member error, the best member's error, ERR = 1 − error / mean
    member error, NaN when the members make no error, and the share of images every member gets wrong; in %) and
    its ``members``: the ids of its models (``ids[i]`` for model ``i``; default the indices), which
    :func:`k_slopes` resamples.

    >>> logits = torch.tensor([[[2.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [0.0, 1.0]]])  # 2 models, 2 images
    >>> row = ensemble_rows(logits, torch.tensor([0, 1]), torch.tensor([[0, 1]]), ids=["a", "b"])[0]
    >>> [round(row[c], 1) for c in ("N", *ENSEMBLE_COLUMNS)], row["members"]
    ([2, 0.0, 25.0, 0.0, 100.0, 0.0], ('a', 'b'))
    """
    x = torch.as_tensor(logits).double()
    y = torch.as_tensor(labels).cpu()
    combos = torch.as_tensor(combos).long()
    if combos.numel() == 0:
        return []
    wrong = (x.argmax(-1) != y).double()  # (M, n)
    ens = (x[combos].mean(1).argmax(-1) != y).double().mean(-1)  # (K,)
    member = wrong[combos]  # (K, N, images)
    mean_member = member.mean((1, 2))
    best_member = member.mean(2).min(1).values
    with np.errstate(divide="ignore", invalid="ignore"):
        err = np.where(mean_member > 0, 1 - ens.numpy() / mean_member.numpy(), np.nan)
    n = int(combos.shape[1])
    names = list(range(x.shape[0])) if ids is None else list(ids)
    return [{"N": n, "top-1 error (%)": 100 * float(e), "mean member error (%)": 100 * float(m),
             "best member error (%)": 100 * float(b), "ERR (%)": 100 * float(r), "all wrong (%)": 100 * float(a),
             "members": tuple(names[i] for i in c)}
            for e, m, b, r, a, c in zip(ens, mean_member, best_member, err, member.prod(1).mean(-1),
                                        combos.tolist(), strict=True)]


def k_slope(table: pd.DataFrame, outcome: str, rows: np.ndarray | None = None) -> float:
    """The change of ``outcome`` per extra cluster ``k`` among ensembles of one size with the same mean *and* best
    member error (:data:`COVARIATES`): the coefficient of ``k`` in a least-squares fit of ``outcome`` on ``k``, the
    two member errors and one intercept per size ``N`` (over ``rows``, default all). NaN when ``k`` does not vary
    within a size or the fit is rank-deficient.

    >>> t = pd.DataFrame({"N": [2] * 6, "k": [1, 1, 1, 2, 2, 2],
    ...                   "mean member error (%)": [10.0, 12.0, 12.0, 10.0, 12.0, 12.0],
    ...                   "best member error (%)": [8.0, 8.0, 11.0, 8.0, 8.0, 11.0],
    ...                   "top-1 error (%)": [9.0, 10.0, 11.0, 7.0, 8.0, 9.0]})
    >>> round(k_slope(t, "top-1 error (%)"), 6)  # 2 points lower with k = 2 at equal member errors
    -2.0
    """
    n_col, k_col = table["N"].to_numpy(), table["k"].to_numpy(dtype=float)
    m_col, y_col = table[list(COVARIATES)].to_numpy(dtype=float), table[outcome].to_numpy(dtype=float)
    return _slope(n_col, k_col, m_col, y_col, rows)


def _slope(n_col: np.ndarray, k_col: np.ndarray, m_col: np.ndarray, y_col: np.ndarray,
           rows: np.ndarray | None, weights: np.ndarray | None = None) -> float:
    if rows is not None:
        n_col, k_col, m_col, y_col = n_col[rows], k_col[rows], m_col[rows], y_col[rows]
    ok = np.isfinite(y_col) & np.isfinite(m_col.reshape(len(y_col), -1)).all(1)
    if weights is not None:
        ok &= weights > 0
    n_col, k_col, m_col, y_col = n_col[ok], k_col[ok], m_col[ok], y_col[ok]
    if y_col.size == 0:
        return float("nan")
    design = np.column_stack([k_col, m_col, *[(n_col == n).astype(float) for n in np.unique(n_col)]])
    if np.linalg.matrix_rank(design) < design.shape[1]:
        return float("nan")
    if weights is not None:  # weighted least squares: each row counted as often as its weight
        root = np.sqrt(weights[ok])
        design, y_col = design * root[:, None], y_col * root
    coef, *_ = np.linalg.lstsq(design, y_col, rcond=None)
    return float(coef[0])


def k_slopes(table: pd.DataFrame, outcomes: Any, *, n_resamples: int, seed: int,
             strata: Mapping[Any, Any] | None = None) -> dict[str, ed.report.Estimate]:
    """:func:`k_slope` of each outcome, with a bootstrap over the **models** the ensembles are drawn from (source
    ``"models"``): in each resample an ensemble weighs the product of its members' draw counts
    (:func:`ensdiv.report.member_weights` over the table's ``members``; within ``strata`` when given), as if the
    ensembles were rebuilt from the resampled models. The replicates of all outcomes share the resamples; the
    test images and the models' training are not resampled.

    Raises:
        InvalidInputError: The table has no ``members`` column (which models each ensemble holds).
    """
    if "members" not in table:
        raise InvalidInputError("k_slopes resamples the models of each ensemble: the table needs its 'members' "
                                "column (ensemble_rows makes it).")
    members = table["members"].tolist()
    w = (ed.report.member_weights(members, n_boot=int(n_resamples), seed=seed, strata=strata) if members
         else np.zeros((0, 0)))
    group = new_group("models")
    out = {}
    cols = table["N"].to_numpy(), table["k"].to_numpy(dtype=float), table[list(COVARIATES)].to_numpy(dtype=float)
    for what in outcomes:
        y = table[what].to_numpy(dtype=float)
        reps = np.array([_slope(*cols, y, None, wb) if np.isfinite(wb).all() else np.nan for wb in w], dtype=float)
        out[what] = ed.report.Estimate(k_slope(table, what), reps, "models", "bootstrap", group)
    return out


def pool_size(table: pd.DataFrame) -> int:
    """How many distinct models the ensembles of ``table`` (its ``members`` column) are built from: the units a
    :func:`k_slopes` bootstrap resamples.

    >>> pool_size(pd.DataFrame({"members": [(0, 1), (1, 2)]}))
    3
    """
    return len({m for g in table["members"] for m in g})


# ---- Fig. 5: similarity and student accuracy with teacher accuracy held fixed -------------------------------------
#: Fewest teachers a partial correlation (one covariate) is computed on: with four, the residuals have one degree
#: of freedom and r is ±1 up to noise.
MIN_PARTIAL = 5


def partial_r(x: Any, y: Any, z: Any) -> float:
    """Pearson r of ``x`` and ``y`` after removing from each its least-squares line on ``z`` (the partial
    correlation given ``z``); NaN below :data:`MIN_PARTIAL` points or with a constant residual.

    >>> z = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    >>> round(partial_r(z + np.array([1, -1, 1, -1, 1, -1]), 2 * z + np.array([1, -1, 1, -1, 1, -1]), z), 4)
    1.0
    """
    x, y, z = (np.asarray(a, dtype=float).ravel() for a in (x, y, z))
    if x.size < MIN_PARTIAL:
        return float("nan")
    design = np.column_stack([np.ones_like(z), z])
    rx = x - design @ np.linalg.lstsq(design, x, rcond=None)[0]
    ry = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
    if np.std(rx) < 1e-12 or np.std(ry) < 1e-12:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def partial_estimate(x: Any, y: Any, z: Any, *, n_resamples: int, seed: int) -> ed.report.Estimate:
    """:func:`partial_r` with a bootstrap over the points (teachers: x, y, z resampled together); NaN (not
    computable) below :data:`MIN_PARTIAL` points."""
    x, y, z = (np.asarray(a, dtype=float).ravel() for a in (x, y, z))
    value = partial_r(x, y, z)
    if not np.isfinite(value):
        return ed.report.Estimate(float("nan"), np.array([]), "models", "bootstrap")
    rng = np.random.default_rng(seed)
    reps = []
    for i in ed.report.resample_indices(x.size, n_resamples=int(n_resamples), seed=rng):
        reps.append(partial_r(x[i], y[i], z[i]) if np.unique(i).size >= MIN_PARTIAL else np.nan)
    return ed.report.Estimate(value, np.array(reps, dtype=float), "models", "bootstrap", new_group("teachers"))
