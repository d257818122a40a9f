"""Null data and cheap intervals for the design-diversity claims (:mod:`ensdiv.report`'s evidence rule).

A check counts only when it fails on null data built from this run's data with the effect removed. The pages of
this chapter compare per-image accuracies of a few evaluation sets (Fig. 4, Table 2, Table i) and correlations
over ensembles that share members (Figs. 5-7, 9, Table 1); these helpers build both kinds of null draw without a
fresh ``scipy`` bootstrap per draw:

- :func:`bootstrap_counts` draws the test-image resamples once (a multinomial count per image), and
  :func:`mean_estimates` turns per-image columns into estimates of statistics *of their means* with one matrix
  product, so a null draw (the columns changed) costs one product, not a new resampling;
- :func:`permute_rows` exchanges what the effect is about (the sets an image was scored on, two models) within
  each image;
- :func:`member_null` re-runs :func:`ensdiv.chapters.design_diversity.member_estimates` (the bootstrap over the
  members the ensembles share) on columns a page rebuilds per draw, and :func:`swap_within` is the paired
  permutation of two measures compared against one outcome;
- :func:`sweep_estimates` and :func:`sweep_nulls` are Figs. 5-6's statistics of an ensemble sweep (each diversity
  measure's correlation with the improvement, the share of ensembles below their best member) and their nulls;
- :func:`member_effects` and :func:`shuffled_residuals` keep what each member brings to every pair it is in (a
  model's gradient scale in every attribution score it takes part in) and shuffle only what is left, so a null
  built with them keeps that artefact and removes the pair-by-pair agreement.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

import ensdiv as ed
from ensdiv.chapters import design_diversity as _dd  # the package importing this module: read at call time
from ensdiv.errors import InvalidInputError

__all__ = ["bootstrap_counts", "mean_estimates", "permute_rows", "member_null", "swap_within", "adjusted_r2",
           "member_effects", "member_weights", "shuffled_residuals", "weighted_null", "SWEEP_COLUMNS",
           "sweep_estimates", "sweep_nulls", "deal_maps"]

_GROUPS = itertools.count()


def bootstrap_counts(n: int, *, n_boot: int, seed: int) -> np.ndarray:
    """How often each of ``n`` test images is drawn in each of ``n_boot`` resamples with replacement:
    ``(n_boot, n)`` (float32, each row sums to ``n``).

    >>> c = bootstrap_counts(5, n_boot=3, seed=0)
    >>> c.shape, c.sum(1).tolist()
    ((3, 5), [5.0, 5.0, 5.0])
    """
    return ed.report.resample_counts(int(n), n_resamples=int(n_boot), seed=[seed, 11], dtype=np.float32)


def mean_estimates(columns: Mapping[str, Any], statistics: Mapping[str, Callable[[Mapping[str, Any]], Any]],
                   counts: np.ndarray, *, source: str = "evaluation samples") -> dict[str, ed.report.Estimate]:
    """Estimates of statistics of per-image columns' *means*, from one resampling of the images (``counts``).

    Args:
        columns: ``{name: (N,) array}`` (per-image correctness, equitability, ...).
        statistics: ``{quantity: f(means)}``; ``means`` maps every column name to its mean (a float for the
            point value, a ``(B,)`` array of resampled means for the replicates), so ``f`` uses numpy
            operations that work on both (``np.minimum``, ``/``).
        counts: ``(B, N)`` from :func:`bootstrap_counts`.
        source: What the resampling randomises.

    Returns:
        ``{quantity: Estimate}`` of one group (paired replicate by replicate).

    >>> cols = {"a": np.array([1.0, 0, 1, 1]), "b": np.array([0.0, 0, 1, 0])}
    >>> est = mean_estimates(cols, {"a - b": lambda m: m["a"] - m["b"]}, bootstrap_counts(4, n_boot=50, seed=0))
    >>> est["a - b"].value, est["a - b"].replicates.shape
    (0.5, (50,))
    """
    names = list(columns)
    x = np.stack([np.asarray(columns[k], dtype=np.float64).ravel() for k in names], axis=1)  # (N, K)
    n = x.shape[0]
    point = {k: np.float64(v) for k, v in zip(names, x.mean(0), strict=True)}  # numpy: x / 0 is inf, not an error
    reps = (counts.astype(np.float64) @ x) / n  # (B, K)
    boot = {k: reps[:, i] for i, k in enumerate(names)}
    group = f"dd-images-{next(_GROUPS)}"
    out = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for q, f in statistics.items():
            out[q] = ed.report.Estimate(float(f(point)), np.asarray(f(boot), dtype=float), source, "bootstrap", group)
    return out


def permute_rows(rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``rows`` ``(K, N)`` with each column's K entries permuted at random (independently per column): the K
    sets (or models) an image was scored on made exchangeable, image by image.

    >>> r = permute_rows(np.array([[1, 1, 1], [0, 0, 0]]), np.random.default_rng(0))
    >>> r.sum(0).tolist()  # each image keeps its values, only their order changes
    [1, 1, 1]
    """
    rows = np.asarray(rows)
    order = np.argsort(rng.random(rows.shape), axis=0)
    return np.take_along_axis(rows, order, axis=0)


def member_null(construction: str, members: Sequence[Sequence[int]],
                make: Callable[[np.random.Generator], Mapping[str, Any]],
                statistics: Mapping[str, Callable[[Mapping[str, np.ndarray]], float]], *, draws: int, n_boot: int,
                seed: int, source: str = "ensemble members") -> ed.report.Null:
    """A :class:`ensdiv.report.Null` whose every draw rebuilds the columns over ensembles (``make(rng)``) and
    re-estimates ``statistics`` with the bootstrap over the ensembles' members (``n_boot`` resamples)."""
    member_estimates = _dd.member_estimates

    def one(rng: np.random.Generator) -> dict[str, Any]:
        cols = make(rng)
        return member_estimates(members, cols, dict(statistics), n_boot=n_boot, seed=int(rng.integers(2**31)),
                                source=source)

    return ed.report.null_draws(construction, one, draws=draws, seed=seed)


def member_weights(members: Sequence[Sequence[int]], *, n_boot: int, seed: int) -> np.ndarray:
    """The weight of every ensemble in each of ``n_boot`` resamples of the members the ensembles share: ``(B, E)``
    (:func:`ensdiv.report.member_weights`, seeded ``[seed, 12]``). One resampling serves every draw of a null
    whose columns change and whose ensembles do not.

    >>> w = member_weights([(0, 1), (0, 2), (1, 2)], n_boot=4, seed=0)
    >>> w.shape, bool((w >= 0).all())
    ((4, 3), True)
    """
    return ed.report.member_weights(members, n_boot=int(n_boot), seed=[seed, 12])


def _weighted(kind: str, w: np.ndarray, x: np.ndarray, y: np.ndarray | None) -> np.ndarray:
    """A weighted statistic per row of ``w`` (``(B, E)`` or ``(E,)``): ``"pearson"`` of ``x`` and ``y``,
    ``"mean"`` of ``x``; NaN where fewer than 4 ensembles weigh in (as the member bootstrap)."""
    w = np.atleast_2d(w)
    n = w.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = w @ x / n
        if kind == "mean":
            out = mx
        else:
            my = w @ y / n
            cxy = w @ (x * y) / n - mx * my
            cxx = w @ (x * x) / n - mx * mx
            cyy = w @ (y * y) / n - my * my
            out = cxy / np.sqrt(np.clip(cxx, 0, None) * np.clip(cyy, 0, None))
    return np.where(n >= 4, out, np.nan)


def weighted_null(construction: str, members: Sequence[Sequence[int]],
                  make: Callable[[np.random.Generator], Mapping[str, Any]],
                  statistics: Mapping[str, tuple[str, ...]], *, draws: int, n_boot: int, seed: int,
                  source: str = "ensemble members") -> ed.report.Null:
    """A :class:`ensdiv.report.Null` over ensembles that share members, fast: every draw rebuilds the columns
    (``make(rng)``) and estimates each statistic — ``("pearson", x, y)``: Pearson's r of two columns, or
    ``("mean", x)``: a column's mean — with one resampling of the members for all draws
    (:func:`member_weights`), as a weighted statistic (the same as the member bootstrap's repeated rows)."""
    members = [tuple(int(m) for m in g) for g in members]
    w = member_weights(members, n_boot=n_boot, seed=seed)
    ones = np.ones(len(members))

    def one(rng: np.random.Generator) -> dict[str, Any]:
        cols = {k: np.asarray(v, dtype=float) for k, v in make(rng).items()}
        group = f"dd-members-null-{next(_GROUPS)}"
        out = {}
        for name, (kind, *c) in statistics.items():
            x, y = cols[c[0]], (cols[c[1]] if kind == "pearson" else None)
            value = float(_weighted(kind, ones, x, y)[0])
            out[name] = ed.report.Estimate(value, _weighted(kind, w, x, y), source, "bootstrap", group)
        return out

    return ed.report.null_draws(construction, one, draws=draws, seed=seed)


def member_effects(values: Any, members: Sequence[Sequence[int]]) -> np.ndarray:
    """The part of a pair score that its members explain: the least-squares fit of ``values`` (one per pair) on one
    effect per member, ``a_i + a_j`` for the pair ``(i, j)`` (a model that scales every score it takes part in,
    as its gradient scale does an attribution score).

    Raises:
        InvalidInputError: ``values`` and ``members`` of different lengths.

    >>> members = [(0, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 3)]
    >>> a = np.array([1.0, 2.0, 3.0, 4.0])
    >>> member_effects([a[i] + a[j] for i, j in members], members).round(6).tolist()  # exactly additive: itself
    [3.0, 4.0, 5.0, 5.0, 6.0, 7.0]
    """
    y = np.asarray(values, dtype=float).ravel()
    if y.size != len(members):
        raise InvalidInputError(f"member_effects needs one value per pair, got {y.size} values for "
                                          f"{len(members)} pairs.")
    ids = sorted({m for g in members for m in g})
    col = {m: i for i, m in enumerate(ids)}
    design = np.zeros((y.size, len(ids)))
    for e, g in enumerate(members):
        for m in g:
            design[e, col[m]] += 1.0
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    return design @ coef


def shuffled_residuals(values: Any, members: Sequence[Sequence[int]], rng: np.random.Generator) -> np.ndarray:
    """``values`` with its members' effects kept (:func:`member_effects`) and the residuals permuted at random
    over the pairs: null data for "two scores agree pair by pair" that keeps what each model brings to all of its
    pairs (the residual permutation of Freedman and Lane).

    >>> members = [(0, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 3)]
    >>> v = np.array([3.0, 4.0, 5.0, 5.0, 6.0, 7.0]) + np.array([1, -1, 0, 0, 1, -1]) * 0.1
    >>> fitted = member_effects(v, members)
    >>> out = shuffled_residuals(v, members, np.random.default_rng(0))
    >>> bool(np.allclose(np.sort(out - fitted), np.sort(v - fitted)))  # the members' part kept, residuals dealt
    True
    """
    y = np.asarray(values, dtype=float).ravel()
    fitted = member_effects(y, members)
    return fitted + rng.permutation(y - fitted)


def swap_within(a: Any, b: Any, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two measures over the same ensembles, each standardised (z-scores), swapped at random ensemble by
    ensemble: a correlation of either with an outcome then has the same distribution as the other's (the
    paired permutation of "measure ``a`` correlates more strongly than ``b``")."""
    za, zb = (np.asarray(v, dtype=float) for v in (a, b))
    za = (za - np.nanmean(za)) / (np.nanstd(za) or 1.0)
    zb = (zb - np.nanmean(zb)) / (np.nanstd(zb) or 1.0)
    flip = rng.random(za.shape) < 0.5
    return np.where(flip, zb, za), np.where(flip, za, zb)


def adjusted_r2(y: Any, groups: Any = None, x: Any = None) -> float:
    """Adjusted R² of ``y`` explained by a categorical ``groups`` (one-way ANOVA) or a numeric ``x`` (OLS), by
    least squares (fast enough to refit inside a bootstrap of a null).

    >>> round(adjusted_r2([1.0, 2, 3, 4, 5], x=[1.0, 2, 3, 4, 6]), 4)  # statsmodels' OLS rsquared_adj: 0.964
    0.964
    >>> adjusted_r2([1.0, 1, 3, 3], groups=["a", "a", "b", "b"])
    1.0
    """
    y = np.asarray(y, dtype=float)
    n = y.size
    if groups is not None:
        levels, codes = np.unique(np.asarray(list(groups)).astype(str), return_inverse=True)
        design = (codes[:, None] == np.arange(1, len(levels))[None, :]).astype(float)
    else:
        design = np.asarray(x, dtype=float)[:, None]
    design = np.column_stack([np.ones(n), design])
    k = np.linalg.matrix_rank(design) - 1
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    ss_res = float(np.sum((y - design @ coef) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    if ss_tot == 0 or n - k - 1 <= 0:
        return float("nan")
    return float(1.0 - (ss_res / (n - k - 1)) / (ss_tot / (n - 1)))


#: the columns of an ensemble sweep (:func:`ensdiv.chapters.design_diversity.diversity_sweep`) Figs. 5-6 read
SWEEP_COLUMNS = ("attribution_diversity", "oracle_disagreement", "improvement")

#: Figs. 5-6's statistics over a sweep's ensembles: each diversity measure's Pearson r with the ensemble's
#: improvement over its best member, and the share of ensembles below that member; as member-bootstrap
#: statistics (``f(columns)``) and as :func:`weighted_null` specifications
SWEEP_STATISTICS = {
    "r_attribution": (lambda c: _dd.pearson(c["attribution_diversity"], c["improvement"]),
                      ("pearson", "attribution_diversity", "improvement")),
    "r_disagreement": (lambda c: _dd.pearson(c["oracle_disagreement"], c["improvement"]),
                       ("pearson", "oracle_disagreement", "improvement")),
    "share_below_zero": (lambda c: float(np.mean(c["improvement"] < 0)), ("mean", "below")),
}


def _sweep_columns(sweep: Any) -> dict[str, np.ndarray]:
    missing = [k for k in ("members", *SWEEP_COLUMNS) if k not in sweep]
    if missing:
        raise InvalidInputError(f"The sweep has no column {missing[0]!r}; it needs members and "
                                f"{', '.join(SWEEP_COLUMNS)} (ensdiv.chapters.design_diversity.diversity_sweep).")
    return {k: np.asarray(sweep[k], dtype=float) for k in SWEEP_COLUMNS}


def sweep_estimates(sweep: Any, *, n_resamples: int, seed: int) -> dict[str, ed.report.Estimate]:
    """Figs. 5-6's statistics of one sweep (a frame or mapping with ``members`` and :data:`SWEEP_COLUMNS`, one row per
    ensemble), each with its bootstrap over the members the ensembles share
    (:func:`ensdiv.chapters.design_diversity.member_estimates`, paired).

    Raises:
        InvalidInputError: a column missing, in one sentence.
    """
    cols = _sweep_columns(sweep)
    return _dd.member_estimates(list(sweep["members"]), cols, {k: f for k, (f, _) in SWEEP_STATISTICS.items()},
                                n_boot=n_resamples, seed=seed)


def deal_maps(members: Sequence[Sequence[int]], n_models: int, values: Any, rng: np.random.Generator) -> np.ndarray:
    """A score of every ensemble's members' attribution maps (``values``, one per ensemble of ``members``) after
    the ``n_models`` models' maps are dealt to one another at random (one permutation from ``rng``): each ensemble
    takes the score of the ensemble its members' dealt maps form. The members' maps stay maps of trained models; only
    which model they belong to is drawn.

    >>> deal_maps([(0, 1), (0, 2), (1, 2)], 3, np.array([10., 20., 30.]), np.random.default_rng(0))
    array([20., 30., 10.])

    Raises:
        InvalidInputError: ``members`` does not hold every ensemble of its size of the ``n_models`` models.
    """
    where = {tuple(sorted(int(m) for m in c)): i for i, c in enumerate(members)}
    deal = rng.permutation(n_models)
    try:
        dealt = [where[tuple(sorted(deal[list(c)]))] for c in members]
    except KeyError:
        raise InvalidInputError("The ensembles do not hold every ensemble of their size, so the attribution maps "
                                "cannot be dealt among the models.") from None
    return np.asarray(values)[dealt]


def sweep_nulls(sweep: Any, n_models: int, *, draws: int, seed: int,
                which: Sequence[str] = ("maps", "improvements", "signs")) -> dict[str, ed.report.Null]:
    """Null data of Figs. 5-6's statistics over one sweep, each through one resampling of the members for all its
    draws (:func:`weighted_null`, ``draws`` draws and resamples):

    - ``"maps"`` (``seed``): each of the ``n_models`` models' attribution maps dealt to another model at random, so an
      ensemble takes the attribution diversity of the ensemble its dealt members form: r_attribution's null;
    - ``"improvements"`` (``seed + 1``): the improvements permuted among the ensembles: r_disagreement's;
    - ``"signs"`` (``seed + 2``): each improvement's sign flipped at random: share_below_zero's.

    Raises:
        InvalidInputError: a column missing, an unknown null, or a dealt ensemble the sweep does not hold.
    """
    cols = _sweep_columns(sweep)
    combos = [tuple(int(m) for m in c) for c in sweep["members"]]

    def maps(rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {**cols, "attribution_diversity": deal_maps(combos, n_models, cols["attribution_diversity"], rng)}

    def improvements(rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {**cols, "improvement": rng.permutation(cols["improvement"])}

    def signs(rng: np.random.Generator) -> dict[str, np.ndarray]:
        flip = rng.random(len(combos)) < 0.5
        return {"below": np.where(flip, -1, 1) * cols["improvement"] < 0}

    nulls = {"maps": ("each model's attribution maps dealt to another model at random", maps, "r_attribution"),
             "improvements": ("the ensembles' improvements permuted among the ensembles", improvements,
                              "r_disagreement"),
             "signs": ("each ensemble's improvement with its sign flipped at random", signs, "share_below_zero")}
    unknown = [w for w in which if w not in nulls]
    if unknown:
        raise InvalidInputError(f"Unknown sweep null {unknown[0]!r}; choose from {', '.join(nulls)}.")
    offsets = {name: i for i, name in enumerate(nulls)}
    return {w: weighted_null(nulls[w][0], combos, nulls[w][1], {nulls[w][2]: SWEEP_STATISTICS[nulls[w][2]][1]},
                             draws=draws, n_boot=draws, seed=seed + offsets[w]) for w in which}
