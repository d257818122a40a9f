"""Quantities with uncertainty: a point estimate with replicates (or an interval) and the variance it covers.

A claim compares measured numbers; a skeptic asks how much they would move on another draw. Two kinds of
replicates answer that, and every :class:`Estimate` says which it carries (Bouthillier et al., *Accounting
for Variance in Machine Learning Benchmarks*, MLSys 2021):

- **evaluation samples** — :func:`paired_bootstrap`: the test images are resampled with replacement and
  every quantity is recomputed on the resample. One resample of image indices serves every model of the
  call (the quantities are *paired*: two classifiers that agree on every image have a difference of exactly
  zero in every replicate). It covers the noise of a finite test set, not of training.
- **training seeds** — :func:`from_seeds`: one value per independently trained run (initialisation and data
  order, as the page says). Differences of two quantities with as many seeds are paired by seed.
  ``from_seeds(values, source="timing repeats")`` holds repeated timings of one measurement the same way.

:func:`correlation` gives a rank or linear correlation with a bootstrap over the (x, y) pairs, or a Fisher
interval when only ``r`` and ``n`` are known (:func:`fisher_interval`).

Code that must hold its resamples itself (one resampling shared by a statistic and its null draws, a statistic
vectorised over resamples by hand, weights per unit) takes them from :func:`resample_indices` (the indices drawn)
or :func:`resample_counts` (how often each unit is drawn): the book's one bootstrap draw, in one place.

The interval of any function of estimates (a difference, a ratio) is computed by the checks
(:mod:`ensdiv.report.checks`) from the replicates: percentiles of the function over bootstrap replicates of
one group, a Student-t interval over per-seed values. The default level is :data:`LEVEL` (90 %, a two-sided
interval whose ends are one-sided 95 % bounds).
"""

from __future__ import annotations

import functools
import itertools
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from ensdiv.errors import InvalidInputError

__all__ = ["LEVEL", "SOURCES", "Estimate", "correlation", "fisher_interval", "from_seeds", "member_resample",
           "nan_mean", "paired_bootstrap", "resample_counts", "resample_indices", "sample_bootstrap"]

def nan_mean(values: Any, *, axis: int = -1) -> np.ndarray:
    """The mean along ``axis`` leaving NaN entries out, NaN where every entry is NaN — without the "Mean of empty
    slice" warning :func:`numpy.nanmean` prints there (a page would show it raw). For replicates of a quantity
    that is undefined on some of them (a SAT pair with no common correct image, a constant layer's CKA).

    >>> nan_mean(np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan]]))
    array([ 2., nan])
    """
    a = np.asarray(values, dtype=float)
    n = np.sum(~np.isnan(a), axis=axis)
    return np.where(n > 0, np.nansum(a, axis=axis) / np.maximum(n, 1), np.nan)


#: The book's one interval level.
LEVEL = 0.90
#: What an interval can randomise: test images ("evaluation samples"), training runs, models of a group, members
#: of an ensemble, repeated timings, an interval a source states, and the nested pairs (rows resampled, then the
#: test images within them: :func:`ensdiv.report.nested_bootstrap`).
SOURCES = ("evaluation samples", "training seeds", "models", "ensemble members", "timing repeats", "stated",
           "seeds × test images", "models × test images", "both")
_GROUPS = itertools.count()


@dataclass(frozen=True, eq=False)
class Estimate:
    """A measured quantity: its value, and replicates or an interval that say how much it would move.

    Args:
        value: The point estimate (on the full evaluation set, or the mean over seeds).
        replicates: ``(R,)`` bootstrap replicates or per-seed values; ``None`` when only an interval is known.
        source: What the replicates randomise, one of :data:`SOURCES`.
        kind: ``"bootstrap"`` (percentile intervals), ``"seeds"`` (Student-t intervals over the values) or
            ``"interval"`` (a given interval, ``low``/``high``).
        group: Estimates of one :func:`paired_bootstrap` call share it: their replicates come from the same
            resamples and are combined replicate by replicate.
        low, high: A given interval at :data:`LEVEL` (``kind == "interval"``).
        parts: For a nested bootstrap (:func:`ensdiv.report.nested_bootstrap`): the per-row image replicates
            ``(S, R)``, the row counts ``(R, S)`` they were combined with and the rows' means ``(S,)``; a null
            that swaps rows between two estimates (:func:`ensdiv.report.seed_flips`) recombines them without a
            new resampling.
    """

    value: float
    replicates: np.ndarray | None = None
    source: str = "evaluation samples"
    kind: str = "bootstrap"
    group: str | None = None
    low: float | None = None
    high: float | None = None
    parts: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise InvalidInputError(f"An estimate's source must be one of {', '.join(SOURCES)}, got {self.source!r}.")
        if self.kind not in ("bootstrap", "seeds", "interval"):
            raise InvalidInputError(f"An estimate's kind must be bootstrap, seeds or interval, got {self.kind!r}.")

    def __float__(self) -> float:
        return float(self.value)

    def interval(self, level: float = LEVEL) -> tuple[float, float] | None:
        """The estimate's own interval at ``level`` (None when it has too few replicates)."""
        if self.kind == "interval":
            return (float(self.low), float(self.high)) if self.low is not None and self.high is not None else None
        return _interval(np.asarray(self.replicates, dtype=float), self.kind, level)

    def __repr__(self) -> str:
        iv = self.interval()
        shown = f"[{iv[0]:.4g}, {iv[1]:.4g}]" if iv else "no interval"
        return f"Estimate({self.value:.4g}, {int(LEVEL * 100)}% {shown}, {self.source})"


@functools.lru_cache(maxsize=256)
def _t_quantile(q: float, df: int) -> float:
    """Student's t quantile (scipy's, remembered: a null of 2**S draws asks for the same few thousands of times)."""
    return float(stats.t.ppf(q, df))


def _interval(values: np.ndarray, kind: str, level: float) -> tuple[float, float] | None:
    """Percentile interval of bootstrap replicates, or the Student-t interval of the mean of per-seed values."""
    values = values[np.isfinite(values)]
    if kind == "bootstrap":
        if values.size < 2:
            return None
        lo, hi = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
        return float(lo), float(hi)
    if values.size < 2:
        return None
    half = _t_quantile((1 + level) / 2, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size)
    return float(values.mean() - half), float(values.mean() + half)


def _array(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):  # a torch tensor, without importing torch here
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def paired_bootstrap(
    per_sample: Mapping[str, Any],
    *,
    statistic: Callable[..., float] | Mapping[str, Callable[..., float]] | None = None,
    n_resamples: int = 1000,
    seed: int,
    batch: int = 100,
) -> dict[str, Estimate]:
    """Bootstrap replicates of several quantities from one resampling of the evaluation samples.

    Every quantity is computed on the same resamples of sample indices (``scipy.stats.bootstrap`` over the
    index vector, percentile method), so differences between them are paired.

    Args:
        per_sample: ``{name: array}`` with the samples on the first axis (``(N,)`` correctness of a model,
            ``(N, C)`` probabilities), or ``{name: (array, array, ...)}`` for a statistic of several arrays
            (scores and labels for AUROC); every array has the same ``N``. Torch tensors are accepted.
        statistic: The statistic of each quantity, called on its arrays restricted to a resample
            (default: the mean of a single array, vectorised); a mapping gives one per name (a name it
            lacks gets the mean).
        n_resamples: Bootstrap resamples.
        seed: Seeds the resampling.
        batch: Resamples evaluated at once (memory ``batch x N`` indices).

    Returns:
        ``{name: Estimate}`` of one group (their replicates are paired).

    Raises:
        InvalidInputError: no quantity, arrays of different lengths, fewer than two samples.

    Shape:
        each array: ``(N, ...)``.

    >>> a = np.array([1, 1, 0, 1, 0, 1, 1, 1])
    >>> est = paired_bootstrap({"a": a, "b": a}, seed=0, n_resamples=200)
    >>> float(est["a"].value), bool(np.all(est["a"].replicates == est["b"].replicates))
    (0.75, True)
    """
    if not per_sample:
        raise InvalidInputError("paired_bootstrap needs at least one quantity.")
    arrays = {k: tuple(map(_array, v)) if isinstance(v, tuple | list) else (_array(v),) for k, v in per_sample.items()}
    sizes = {a.shape[0] if a.ndim else 0 for arrs in arrays.values() for a in arrs}
    if len(sizes) != 1:
        raise InvalidInputError("paired_bootstrap needs every array to have the same number of samples, got "
                                f"{sorted(sizes)}.")
    (n,) = sizes
    if n < 2:
        raise InvalidInputError(f"paired_bootstrap needs at least two samples, got {n}.")
    names = list(arrays)

    def stat_of(name: str) -> Callable[..., float] | None:
        if isinstance(statistic, Mapping):
            return statistic.get(name)
        return statistic

    def on(idx: np.ndarray) -> np.ndarray:  # idx: (..., n) -> (len(names), ...)
        rows = []
        for name in names:
            fn, arrs = stat_of(name), arrays[name]
            if fn is None:
                if len(arrs) != 1:
                    raise InvalidInputError(f"Quantity {name!r} has several arrays; give its statistic.")
                rows.append(arrs[0].astype(float)[idx].mean(axis=-1))
            else:
                flat = idx.reshape(-1, n)
                rows.append(np.array([fn(*(a[i] for a in arrs)) for i in flat], dtype=float).reshape(idx.shape[:-1]))
        return np.stack(rows)

    return _bootstrap_group(names, [n], lambda idx: on(idx[0]), n_resamples=n_resamples, seed=seed, batch=batch)


def _bootstrap_group(names: Sequence[str], sizes: Sequence[int], on: Callable[[list[np.ndarray]], np.ndarray], *,
                     n_resamples: int, seed: int, batch: int) -> dict[str, Estimate]:
    """One group of bootstrap estimates: ``scipy.stats.bootstrap`` over the index vector of each sample (each
    resampled on its own, ``paired=False``), ``on(index arrays (..., n_s))`` -> ``(len(names), ...)``."""
    def statistic(*idx: np.ndarray, axis: int = -1) -> np.ndarray:
        return on([np.moveaxis(i, axis, -1) for i in idx])

    # a degenerate distribution shows in the estimate (a zero-width or NaN interval), an undefined replicate (0/0)
    # as NaN: neither prints a warning on the page
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        res = stats.bootstrap(tuple(np.arange(n) for n in sizes), statistic, vectorized=True, paired=False,
                              n_resamples=n_resamples, batch=batch, method="percentile", confidence_level=LEVEL,
                              random_state=np.random.default_rng(seed))
        point = on([np.arange(n) for n in sizes])
    group = f"bootstrap-{next(_GROUPS)}"
    dist = np.asarray(res.bootstrap_distribution).reshape(len(names), -1)
    return {name: Estimate(float(point[i]), dist[i], "evaluation samples", "bootstrap", group)
            for i, name in enumerate(names)}


def sample_bootstrap(
    samples: Mapping[str, Mapping[str, Any]],
    quantities: Mapping[str, Callable[[dict[str, np.ndarray]], Any]],
    *,
    n_resamples: int = 1000,
    seed: int,
    batch: int = 100,
) -> dict[str, Estimate]:
    """Bootstrap replicates of quantities of several *independent* samples, in one group.

    Each sample is a set of evaluation units (test images) with its arrays on the first axis: the arrays of one
    sample are resampled together (paired: the clean and the corrupted copy of an image stay together), two
    samples each on their own (``scipy.stats.bootstrap`` with ``paired=False``): a re-collected test set such
    as ImageNetV2 shares no image with ImageNet's validation set. Every quantity is computed on the same
    resamples, so the checks combine them replicate by replicate. With one sample this is
    :func:`paired_bootstrap`.

    Args:
        samples: ``{sample: {array name: (N_sample, ...) array}}``; array names are unique over all samples.
        quantities: ``{name: function}``; a function receives ``{array name: resampled array}`` with the
            resamples on the first axis (``(B, N_sample, ...)``) and returns ``(B,)`` values.
        n_resamples: Bootstrap resamples. seed: Seeds the resampling. batch: Resamples evaluated at once.

    Returns:
        ``{name: Estimate}`` of one group.

    Raises:
        InvalidInputError: no sample or no quantity; an array name used in two samples; arrays of one sample
            with different lengths; a sample with fewer than two units.

    Shape:
        each array of sample ``s``: ``(N_s, ...)``.

    >>> clean = np.array([1, 1, 1, 0, 1, 1, 0, 1]); v2 = np.array([1, 0, 1, 0, 1])
    >>> est = sample_bootstrap({"val": {"clean": clean}, "v2": {"v2": v2}},
    ...                        {"rel": lambda a: a["v2"].mean(1) / a["clean"].mean(1)}, seed=0, n_resamples=200)
    >>> round(est["rel"].value, 4)
    0.8
    """
    if not samples or not quantities:
        raise InvalidInputError("sample_bootstrap needs at least one sample and one quantity.")
    owner: dict[str, str] = {}
    arrays: dict[str, np.ndarray] = {}
    sizes = []
    for sample, named in samples.items():
        lengths = set()
        for name, value in named.items():
            if name in owner:
                raise InvalidInputError(f"Array {name!r} is in samples {owner[name]!r} and {sample!r}; give each "
                                        "array one sample.")
            owner[name], arrays[name] = sample, _array(value)
            lengths.add(arrays[name].shape[0] if arrays[name].ndim else 0)
        if len(lengths) != 1:
            raise InvalidInputError(f"The arrays of sample {sample!r} have different lengths {sorted(lengths)}; "
                                    "the arrays of one sample hold the same units.")
        (n,) = lengths
        if n < 2:
            raise InvalidInputError(f"Sample {sample!r} has {n} unit(s); a bootstrap needs at least two.")
        sizes.append(n)
    order = list(samples)
    names = list(quantities)

    def on(idx: list[np.ndarray]) -> np.ndarray:  # idx[s]: (..., n_s) -> (len(names), ...)
        lead = idx[0].shape[:-1]
        flat = {k: arrays[k][i.reshape(-1, i.shape[-1])] for s, i in zip(order, idx, strict=True)
                for k in samples[s]}
        return np.stack([np.asarray(quantities[q](flat), dtype=float).reshape(lead) for q in names])

    return _bootstrap_group(names, sizes, on, n_resamples=n_resamples, seed=seed, batch=batch)


def _resample_args(n: Any, n_resamples: Any, seed: Any) -> tuple[int, int, np.random.Generator]:
    """The checked arguments of :func:`resample_indices` and :func:`resample_counts`."""
    for name, v, least in (("n", n, 1), ("n_resamples", n_resamples, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < least:
            raise InvalidInputError(f"{name} must be an integer >= {least}, got {v!r}.")
    if seed is None:
        raise InvalidInputError("seed is required (an integer, a sequence of integers or a numpy Generator); "
                                "an unseeded resampling could not be repeated.")
    return int(n), int(n_resamples), np.random.default_rng(seed)


def resample_indices(n: int, *, n_resamples: int, seed: Any) -> np.ndarray:
    """Bootstrap resamples of ``n`` units: ``n_resamples`` rows of ``n`` indices drawn uniformly with replacement.

    ``seed`` is an integer, a sequence of integers (``[seed, 7]``: a stream of its own for one part of a page) or
    a numpy ``Generator`` already in use, whose stream continues (so a loop that drew one row at a time draws the
    same numbers as one call).

    Raises:
        InvalidInputError: ``n`` or ``n_resamples`` not a positive integer; no seed.

    Shape:
        ``(n_resamples, n)``, integers in ``[0, n)``.

    >>> resample_indices(4, n_resamples=2, seed=0).shape
    (2, 4)
    >>> bool((resample_indices(3, n_resamples=5, seed=[1, 2]) == resample_indices(3, n_resamples=5, seed=[1, 2])).all())
    True
    """
    n, r, rng = _resample_args(n, n_resamples, seed)
    return rng.integers(0, n, (r, n))


def resample_counts(n: int, *, n_resamples: int, seed: Any, dtype: Any = float) -> np.ndarray:
    """Bootstrap resamples of ``n`` units as counts: how often each unit is drawn in each resample (a multinomial
    with ``n`` trials and equal probabilities), for statistics that weight units (``counts @ values / n``).

    ``seed`` as in :func:`resample_indices`.

    Raises:
        InvalidInputError: ``n`` or ``n_resamples`` not a positive integer; no seed.

    Shape:
        ``(n_resamples, n)``; every row sums to ``n``.

    >>> c = resample_counts(5, n_resamples=3, seed=0)
    >>> c.shape, c.sum(axis=1).tolist()
    ((3, 5), [5.0, 5.0, 5.0])
    """
    n, r, rng = _resample_args(n, n_resamples, seed)
    return rng.multinomial(n, np.full(n, 1.0 / n), size=r).astype(dtype)


def from_seeds(values: Sequence[float] | Any, *, source: str = "training seeds") -> Estimate:
    """An estimate from one value per training seed: the mean, with the seeds as its replicates.

    Two seed estimates with as many seeds are compared seed by seed (the k-th run of each method shares its
    seed), so pass the values in seed order.

    >>> from_seeds([0.90, 0.92, 0.91]).value
    0.91
    """
    arr = _array(values).astype(float).ravel()
    if arr.size == 0:
        raise InvalidInputError("from_seeds needs at least one value.")
    return Estimate(float(np.round(arr.mean(), 12)), arr, source, "seeds")


def fisher_interval(r: float, n: int, *, level: float = LEVEL) -> tuple[float, float]:
    """The Fisher z interval of a correlation ``r`` over ``n`` pairs: ``tanh(atanh(r) ± z / sqrt(n - 3))``.

    >>> [round(v, 3) for v in fisher_interval(0.5, 28)]
    [0.217, 0.706]
    """
    if n <= 3:
        raise InvalidInputError(f"A Fisher interval needs more than 3 pairs, got {n}.")
    z = stats.norm.ppf((1 + level) / 2) / math.sqrt(n - 3)
    r = min(max(float(r), -0.999999), 0.999999)
    return math.tanh(math.atanh(r) - z), math.tanh(math.atanh(r) + z)


def correlation(x: Any, y: Any, *, method: str = "spearman", seed: int, n_resamples: int = 1000,
                source: str = "evaluation samples") -> Estimate:
    """A correlation with its bootstrap interval over the (x, y) pairs (resampled together).

    Args:
        x, y: Paired observations ``(n,)``.
        method: ``"spearman"`` or ``"pearson"``.
        seed: Seeds the resampling.
        source: What a pair is, as :data:`SOURCES` names it: ``"models"`` when each pair is a model (or an
            ensemble) of a population the claim is about, ``"evaluation samples"`` when each is a test image.

    Returns:
        An :class:`Estimate` whose replicates resample the pairs.
    """
    x, y = _array(x).astype(float).ravel(), _array(y).astype(float).ravel()
    if x.shape != y.shape or x.size < 4:
        raise InvalidInputError(f"correlation needs two equally long series of at least 4 values, got {x.size} and "
                                f"{y.size}.")
    fn = {"spearman": lambda a, b: stats.spearmanr(a, b)[0], "pearson": lambda a, b: stats.pearsonr(a, b)[0]}
    if method not in fn:
        raise InvalidInputError(f"correlation's method must be spearman or pearson, got {method!r}.")
    f = fn[method]
    with warnings.catch_warnings():  # a degenerate distribution shows in the estimate (a zero-width or NaN interval)
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        res = stats.bootstrap((x, y), f, paired=True, vectorized=False, n_resamples=n_resamples, method="percentile",
                              confidence_level=LEVEL, random_state=np.random.default_rng(seed))
    return Estimate(float(f(x, y)), np.asarray(res.bootstrap_distribution, dtype=float), source,
                    "bootstrap", f"bootstrap-{next(_GROUPS)}")


def _member_summary(value: float, dist: np.ndarray, ci: float, n: int) -> dict[str, Any]:
    """The value, its percentile interval and two-sided bootstrap p-value (twice the smaller tail around zero)
    from replicates; NaN replicates (degenerate resamples) are left out of those but kept in ``replicates``, in
    resample order, so two statistics of one resampling stay paired."""
    finite = dist[np.isfinite(dist)]
    out = {"rho": value, "low": float("nan"), "high": float("nan"), "p": float("nan"), "n": n, "replicates": dist}
    if finite.size:
        out["low"], out["high"] = (float(v) for v in np.quantile(finite, [(1 - ci) / 2, (1 + ci) / 2]))
        out["p"] = float(min(1.0, 2 * min(np.mean(finite <= 0), np.mean(finite >= 0))))
    return out


def member_resample(columns: dict[str, Any], members: Sequence[Sequence[int]],
                    statistic: Callable[[dict[str, np.ndarray]], float], *, n_boot: int = 1000, ci: float = LEVEL,
                    seed: int = 0) -> dict[str, Any]:
    """A statistic over ensembles, with an interval from resampling their *members*.

    Args:
        columns: One array per name, one value per ensemble; an ensemble with a NaN in any is left out.
        members: The member ids of each ensemble (ids of one pool).
        statistic: Called with the columns, each ensemble's row repeated by its weight.
        n_boot, ci, seed: Resamples, interval level (the book's :data:`LEVEL`), seed (the same seed and members
            give the same resamples, so two statistics of one population are paired replicate by replicate).

    Returns:
        ``{"rho", "low", "high", "p", "n", "replicates"}`` (``rho`` holds the statistic's value). An
        ensemble's weight in a resample is the product of its sampled members' counts; members common to every
        ensemble are fixed (weight one). A resample with fewer than 4 weighted ensembles gives NaN.
    """
    if not 0 < ci < 1:
        raise InvalidInputError(f"ci must be a confidence level in (0, 1), got {ci!r}.")
    if int(n_boot) < 1:
        raise InvalidInputError(f"n_boot must be at least 1, got {n_boot!r}.")
    cols = {k: np.asarray(v, dtype=float).ravel() for k, v in columns.items()}
    if any(v.size != len(members) for v in cols.values()):
        raise InvalidInputError("member_bootstrap needs one value of every column and one member tuple per "
                                f"ensemble, got {sorted({v.size for v in cols.values()})} and {len(members)}.")
    keep = np.logical_and.reduce([np.isfinite(v) for v in cols.values()])
    cols = {k: v[keep] for k, v in cols.items()}
    groups = [tuple(int(m) for m in g) for g, k in zip(members, keep, strict=True) if k]
    n = len(groups)
    value = float(statistic(cols)) if n >= 4 else float("nan")
    if n < 4 or not np.isfinite(value):
        return _member_summary(value, np.array([]), ci, n)
    fixed = set.intersection(*(set(g) for g in groups))
    ids = np.array(sorted({m for g in groups for m in g} - fixed))
    if ids.size < 2:
        return _member_summary(value, np.array([]), ci, n)
    position = {m: i for i, m in enumerate(ids)}
    index = [[position[m] for m in g if m not in fixed] for g in groups]

    def on(drawn: np.ndarray) -> float:
        counts = np.bincount(np.searchsorted(ids, drawn), minlength=ids.size)
        w = np.array([np.prod(counts[i]) if i else 1 for i in index], dtype=int)
        if w.sum() < 4:
            return float("nan")
        return float(statistic({k: np.repeat(v, w) for k, v in cols.items()}))

    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        res = stats.bootstrap((ids,), on, vectorized=False, n_resamples=int(n_boot), method="percentile",
                              rng=np.random.default_rng(seed), confidence_level=ci)
    return _member_summary(value, np.asarray(res.bootstrap_distribution, dtype=float), ci, n)
