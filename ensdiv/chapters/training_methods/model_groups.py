"""Claims about categories of models: intervals that resample the models, nulls that deal them at random.

A category of this chapter is a *group of models* (three to fourteen models in the band): a claim such as "Dataset
models disagree more with the base than Reinit models" is about what other models of each category would give,
so its interval resamples the models within each category (:func:`ed.report.model_bootstrap`, one number per
model, measured on the whole test set), and its null deals the same models into categories of the same sizes at
random (:func:`ed.report.partition_null`): the category labels then carry no information, and a check that still
passes there is not evidence. A trend over the five categories (Spearman's ρ of the category's rank with a
per-model quantity) resamples the models too, and its null permutes the categories across the models.

A category with fewer than two models in the band has no model bootstrap: its quantities are NaN estimates (the
checks that read them are not computable) and it is left out of the null's deal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

import ensdiv as ed
from ensdiv.chapters.training_methods.paper import CATEGORIES, CATEGORY_LABELS

__all__ = ["MIN_MODELS", "attach_null", "bound_null", "category_groups", "group_estimates", "group_null",
           "trend_estimate", "trend_null"]

#: A category needs this many models in the band for a model bootstrap.
MIN_MODELS = 2


def _nan_estimate() -> Any:
    return ed.report.Estimate(float("nan"), np.array([]), "models", "bootstrap")


def category_groups(table: pd.DataFrame, column: str, *, min_models: int = MIN_MODELS
                    ) -> tuple[np.ndarray, list[str]]:
    """The values of ``column`` and the category label of every model of ``table`` whose category has at least
    ``min_models`` models with a finite value (the categories in the paper's order)."""
    t = table[table["category"].isin(CATEGORIES)]
    t = t[np.isfinite(t[column].astype(float))]
    sizes = t["category"].value_counts()
    keep = [c for c in CATEGORIES if sizes.get(c, 0) >= min_models]
    t = t[t["category"].isin(keep)]
    order = {c: i for i, c in enumerate(CATEGORIES)}
    t = t.iloc[np.argsort([order[c] for c in t["category"]], kind="stable")]
    return t[column].to_numpy(float), [CATEGORY_LABELS[c] for c in t["category"]]


def group_estimates(table: pd.DataFrame, column: str, *, n_resamples: int, seed: int, scale: float = 1.0,
                    name: str | None = None) -> dict[str, Any]:
    """Category means of a per-model ``column`` (times ``scale``), keyed ``"<name> <Category>"`` (``name``
    defaults to ``column``), with a bootstrap over the models within each category
    (:func:`ed.report.model_bootstrap`; source ``"models"``, one group of replicates). A category with fewer
    than :data:`MIN_MODELS` models is a NaN estimate.

    >>> t = pd.DataFrame({"category": ["reinit"] * 3 + ["dataset"] * 3, "ei": [0.1, 0.12, 0.11, 0.2, 0.22, 0.21]})
    >>> est = group_estimates(t, "ei", n_resamples=200, seed=0)
    >>> round(est["ei Dataset"].value, 3), est["ei Reinit"].source, bool(np.isnan(est["ei Arch"].value))
    (0.21, 'models', True)
    """
    name = name or column
    out = {f"{name} {CATEGORY_LABELS[c]}": _nan_estimate() for c in CATEGORIES}
    values, labels = category_groups(table, column)
    if len(set(labels)) >= 1 and values.size:
        est = ed.report.model_bootstrap(scale * values, labels, n_resamples=n_resamples, seed=seed)
        out.update({f"{name} {label}": e for label, e in est.items()})
    return out


def group_null(table: pd.DataFrame, column: str, *, n_resamples: int, seed: int, scale: float = 1.0,
               name: str | None = None, draws: int = ed.report.NULL_DRAWS,
               derive: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None) -> Any:
    """The null of a comparison between categories: the models of the categories with at least
    :data:`MIN_MODELS` models dealt into categories of the same sizes at random (:func:`ed.report.partition_null`),
    each draw's category means with their model bootstrap, keyed as :func:`group_estimates` keys them.
    ``derive`` adds quantities computed from a draw's means (the highest of several categories). None when fewer
    than two categories have enough models (nothing to deal)."""
    name = name or column
    values, labels = category_groups(table, column)
    if len(set(labels)) < 2:
        return None
    null = ed.report.partition_null(scale * values, labels, draws=draws, seed=seed, n_resamples=n_resamples,
                                    names={label: f"{name} {label}" for label in set(labels)})
    if derive is None:
        return null
    return ed.report.Null(null.construction, [{**d, **derive(d)} for d in null.draws])


def bound_null(estimates: Mapping[str, Any], a: str, b: str, table: pd.DataFrame, column: str) -> Any:
    """The null of "``a`` above ``b``" where ``b`` is the highest of several category means
    (:func:`~ensdiv.chapters.training_methods.estimates.highest_of`): the comparison's own model bootstrap, centred
    and moved to the bound (:func:`ed.report.centred_null`), widened for the smallest category's models. Dealing the
    models at random puts every category at one mean, where the highest of several sits above the others by the
    selection of a maximum, below the claim's bound (one category tied with ``a``): there a null of dealt models
    calls 6.8 % of claims *holds* at a nominal 5 % (``ensdiv.report.calibration``'s "highest of groups", five
    models a group), this one 3.0-4.5 %. None when either side is not computable (a category with too few models).

    >>> t = pd.DataFrame({"category": ["reinit"] * 3 + ["dataset"] * 3, "ei": [0.1, 0.12, 0.11, 0.2, 0.22, 0.21]})
    >>> est = group_estimates(t, "ei", n_resamples=200, seed=0)
    >>> null = bound_null(est, "ei Dataset", "ei Reinit", t, "ei")
    >>> round(float(np.median([d["ei Dataset"] for d in null.draws])), 2), null.centred
    (0.0, True)
    >>> bound_null(est, "ei Dataset", "ei Arch", t, "ei") is None
    True
    """
    if not all(np.isfinite(estimates[q].value) for q in (a, b)):
        return None
    _, labels = category_groups(table, column)
    return ed.report.centred_null(estimates, a, b, units=min(labels.count(c) for c in set(labels)))


def _spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's ρ of each row of ``x`` with the same row of ``y`` (``(R, n)``; ties get average ranks); NaN for a
    row where either is constant."""
    rx, ry = stats.rankdata(x, axis=-1), stats.rankdata(y, axis=-1)
    rx, ry = rx - rx.mean(-1, keepdims=True), ry - ry.mean(-1, keepdims=True)
    den = np.sqrt((rx ** 2).sum(-1) * (ry ** 2).sum(-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, (rx * ry).sum(-1) / np.where(den > 0, den, 1.0), np.nan)


def _ranks_and_values(table: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray]:
    t = table[table["category"].isin(CATEGORIES)]
    t = t[np.isfinite(t[column].astype(float))]
    rank = t["category"].map({c: i + 1 for i, c in enumerate(CATEGORIES)}).to_numpy(float)
    return rank, t[column].to_numpy(float)


def _trend(rank: np.ndarray, values: np.ndarray, rng: np.random.Generator, n_resamples: int,
           min_categories: int) -> Any:
    if values.size < 4 or len(set(rank.tolist())) < min_categories or np.ptp(values) == 0:
        return _nan_estimate()
    idx = ed.report.resample_indices(values.size, n_resamples=n_resamples, seed=rng)
    value = float(_spearman_rows(rank[None], values[None])[0])
    return ed.report.Estimate(value, _spearman_rows(rank[idx], values[idx]), "models", "bootstrap",
                              f"trend-{rng.integers(2 ** 62)}")


def trend_estimate(table: pd.DataFrame, column: str, *, n_resamples: int, seed: int, min_categories: int = 3) -> Any:
    """Spearman's ρ between a model's category rank (Reinit 1 … Dataset 5) and its ``column``, over the models of
    ``table``, with a bootstrap over the models (pairs resampled together; source ``"models"``). A NaN estimate
    with fewer than ``min_categories`` categories or four models.

    >>> t = pd.DataFrame({"category": ["reinit", "hparam", "arch", "framework", "dataset"] * 2,
    ...                   "ei": [0.1, 0.2, 0.3, 0.4, 0.5, 0.11, 0.21, 0.31, 0.41, 0.51]})
    >>> round(trend_estimate(t, "ei", n_resamples=100, seed=0).value, 4)  # ties within a category: not 1
    0.9847
    """
    rank, values = _ranks_and_values(table, column)
    return _trend(rank, values, np.random.default_rng(seed), n_resamples, min_categories)


def trend_null(table: pd.DataFrame, column: str, *, name: str, n_resamples: int, seed: int,
               draws: int = ed.report.NULL_DRAWS, min_categories: int = 3) -> Any:
    """The null of a trend over the categories: the models' categories permuted across the models (the sizes
    kept), ρ and its model bootstrap recomputed on every draw, keyed ``name``; None when the trend itself cannot
    be computed."""
    rank, values = _ranks_and_values(table, column)
    if values.size < 4 or len(set(rank.tolist())) < min_categories or np.ptp(values) == 0:
        return None

    def make(rng: np.random.Generator) -> dict[str, Any]:
        return {name: _trend(rng.permutation(rank), values, rng, n_resamples, min_categories)}

    return ed.report.null_draws("the models' categories permuted across the models (category sizes kept)", make,
                                draws=draws, seed=seed)


def attach_null(check: Any, null: Any, reason: str) -> Any:
    """``check`` with its null data, or, where none could be built (``null`` is None), with the reason shown
    in its place (the check is then shown and not counted).

    >>> c = attach_null(ed.report.greater("a", "b"), None, "one model per category")
    >>> c.null is None, c.null_reason
    (True, 'one model per category')
    """
    return check.with_(null=null, null_reason="") if null is not None else check.with_(null=None, null_reason=reason)
