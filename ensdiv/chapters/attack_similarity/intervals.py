"""Intervals for the attack-similarity chapter's claims (issue #27): what each page's numbers would do on
another draw of the attacked images, the test images or the models.

* :func:`sat_replicates` — bootstrap replicates of a measured SAT matrix over the attacked images: the
  fooled/correct indicators of :class:`ensdiv.SatResult` are reweighted by multinomial resample counts, so
  every score of every matrix built from the same ``weights`` is paired (one resample serves them all).
* :func:`sat_estimate` — an :class:`~ensdiv.report.Estimate` of a function of such replicates.
* :func:`pair_correlation` — a correlation over the pairs of M models with a bootstrap over the *models*
  (all pairs of distinct models of a resample), since pairs that share a model are not independent.
* :func:`partial_out` — a pair matrix with a pair covariate (the members' accuracy gap) regressed out.
* :func:`model_bootstrap` — statistics of a set of models (rows of a released matrix) bootstrapped over the
  models, each resample's distinct models only (a model drawn twice would pair with itself).
* :func:`correlation_or_nan` — :func:`ed.report.correlation` that is NaN, not an error, below 4 points.
* :func:`reading_seed_bootstrap` — a statistic of spectral clusterings over readings of App. C, bootstrapped
  over the readings and the K-means seeds at once (Table 2).
* :func:`ensemble_errors` / :func:`err_statistic` — per-test-image errors of ensembles, for a paired bootstrap
  over the test images of the error, the error reduction rate (ERR) and the "all wrong" rate of Fig. 3-4.

No Estimate randomises training seeds: the chapter trains one model per recipe.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

import ensdiv as ed
from ensdiv.errors import InvalidInputError
from ensdiv.metrics.similarity import SAT_EPS

__all__ = ["sat_replicates", "sat_estimate", "pair_correlation", "partial_out", "model_bootstrap",
           "correlation_or_nan", "ensemble_errors", "err_statistic", "mean_err", "nan_estimate", "new_group",
           "reading_seed_bootstrap"]

_GROUP = itertools.count()


def nan_estimate(source: str = "evaluation samples") -> ed.report.Estimate:
    """An estimate that could not be computed (too few points): its check is "not computable"."""
    return ed.report.Estimate(float("nan"), np.array([]), source, "bootstrap")


def sat_replicates(sat: ed.SatResult, weights: np.ndarray, *, eps: float = SAT_EPS) -> tuple[np.ndarray, np.ndarray]:
    """Two-side and one-side SAT matrices (Eq. 1, App. G) on each bootstrap resample of the attacked images.

    Args:
        sat: a measured :class:`ensdiv.SatResult` (``fooled`` (M, M, n), ``correct`` (M, n)).
        weights: ``(R, n)`` resample counts (:func:`ensdiv.report.resample_counts`); pass the same array to several
            results measured on the same images to pair them.

    Returns:
        ``(two, one)``, each ``(R, M, M)`` float; NaN where a resample leaves X_AB empty.
    """
    fooled = sat.fooled.double().numpy()  # (M, M, n): [s, t, i] target t fooled by source s's image i
    correct = sat.correct.double().numpy()  # (M, n)
    m, n = correct.shape
    both = correct[:, None, :] * correct[None, :, :]  # (M, M, n)
    w = np.asarray(weights, dtype=float).T  # (n, R)
    support = (both.reshape(m * m, n) @ w).T.reshape(-1, m, m)
    two_hits = (both * 0.5 * (fooled + fooled.transpose(1, 0, 2))).reshape(m * m, n) @ w
    one_hits = (both * fooled).reshape(m * m, n) @ w
    with np.errstate(divide="ignore", invalid="ignore"):
        rate_two = np.where(support > 0, two_hits.T.reshape(-1, m, m) / support, np.nan)
        rate_one = np.where(support > 0, one_hits.T.reshape(-1, m, m) / support, np.nan)
        two = np.log(np.maximum(eps, 100 * rate_two))
        one = np.log(np.maximum(eps, 100 * rate_one))
    two[np.isnan(rate_two)] = np.nan
    one[np.isnan(rate_one)] = np.nan
    return two, one


def sat_estimate(value: float, replicates: np.ndarray, group: str) -> ed.report.Estimate:
    """A bootstrap :class:`~ensdiv.report.Estimate` over the attacked images; estimates of one ``group``
    (built from the same :func:`ensdiv.report.resample_counts`) are paired replicate by replicate."""
    return ed.report.Estimate(float(value), np.asarray(replicates, dtype=float), "evaluation samples", "bootstrap",
                              group)


def mean_over_pairs(replicates: np.ndarray, columns: Any) -> np.ndarray:
    """Per replicate, the mean SAT over the model pairs ``columns`` of ``replicates`` (R, pairs), NaN pairs (an
    empty X_AB) left out (:func:`ensdiv.report.nan_mean`: NaN, silently, where every pair is NaN)."""
    return ed.report.nan_mean(np.asarray(replicates, dtype=float)[:, columns], axis=1)


def new_group(tag: str = "sat") -> str:
    """A fresh group name for estimates that share resamples."""
    return f"{tag}-{next(_GROUP)}"


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size < 3 or np.std(x) == 0 or np.std(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def pair_correlation(x: Any, y: Any, *, ordered: bool = False, n_resamples: int = 1000,
                     seed: int = 0) -> ed.report.Estimate:
    """Pearson r between two (M, M) matrices over the pairs of models, with a bootstrap over the models.

    Each resample draws M models with replacement and correlates the entries of every pair of *distinct*
    models it holds (with their multiplicity). ``ordered``: use both (a, b) and (b, a) (an asymmetric matrix),
    else a < b. NaN (not computable) with fewer than 4 pairs or 3 models.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    m = x.shape[0]

    def pairs_of(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a, b = np.meshgrid(idx, idx, indexing="ij")
        keep = (a != b) if ordered else (a < b)
        return a[keep], b[keep]

    a, b = pairs_of(np.arange(m))
    if m < 3 or a.size < 4:
        return nan_estimate()
    value = _pearson(x[a, b], y[a, b])
    rng = np.random.default_rng(seed)
    reps = []
    for drawn in ed.report.resample_indices(m, n_resamples=n_resamples, seed=rng):
        ra, rb = pairs_of(drawn)
        reps.append(_pearson(x[ra, rb], y[ra, rb]) if ra.size >= 4 else np.nan)
    return ed.report.Estimate(value, np.array(reps), "models", "bootstrap", new_group("models"))


def partial_out(x: Any, covariate: Any) -> np.ndarray:
    """The (M, M) pair matrix ``x`` less its least-squares line on the pair matrix ``covariate`` (intercept and
    slope fitted over the pairs a < b), symmetric; the diagonal NaN. Correlating two such matrices over the pairs
    gives the partial correlation of the two given the covariate (Smouse, Long and Sokal 1986's partial Mantel
    statistic), e.g. a pair's similarity and its ensemble gain at equal accuracy gap.

    By hand: gaps 1, 2, 3 for the pairs (0, 1), (0, 2), (1, 2) and y = 1 + 2 x gap + (0.5, -1, 0.5), the last
    term orthogonal to a line in the gap, so it is what is left:

    >>> gap = np.array([[0, 1, 2], [1, 0, 3], [2, 3, 0]], dtype=float)
    >>> y = np.array([[0, 3.5, 4.0], [3.5, 0, 7.5], [4.0, 7.5, 0]])
    >>> np.round(partial_out(y, gap), 3)
    array([[ nan,  0.5, -1. ],
           [ 0.5,  nan,  0.5],
           [-1. ,  0.5,  nan]])
    """
    x, c = np.asarray(x, dtype=float), np.asarray(covariate, dtype=float)
    if x.ndim != 2 or x.shape[0] != x.shape[1] or c.shape != x.shape or x.shape[0] < 3:
        raise InvalidInputError(f"partial_out needs two (M, M) pair matrices of one shape with M >= 3 models, got "
                                f"{x.shape} and {c.shape}.")
    a, b = np.triu_indices(x.shape[0], k=1)
    design = np.column_stack([np.ones(a.size), c[a, b]])
    coef, *_ = np.linalg.lstsq(design, x[a, b], rcond=None)
    out = np.full(x.shape, np.nan)
    out[a, b] = out[b, a] = x[a, b] - design @ coef
    return out


def model_bootstrap(n_models: int, statistics: Mapping[str, Callable[[np.ndarray], float]], *,
                    n_resamples: int = 1000, seed: int = 0) -> dict[str, ed.report.Estimate]:
    """Statistics of a set of models, bootstrapped over the models (:func:`ed.report.paired_bootstrap`).

    Each statistic receives the sorted indices of the *distinct* models of a resample (a model drawn twice
    would be compared with itself), so the replicates spread a little wider than a plain bootstrap: the
    interval is conservative. Every statistic shares the resamples (paired).
    """
    idx = np.arange(n_models)
    found = ed.report.paired_bootstrap(
        {name: (idx,) for name in statistics},
        statistic={name: (lambda i, fn=fn: fn(np.unique(i))) for name, fn in statistics.items()},
        n_resamples=n_resamples, seed=seed)
    return {name: dataclasses.replace(e, source="models") for name, e in found.items()}  # the models resampled


def correlation_or_nan(x: Any, y: Any, *, method: str = "pearson", n_resamples: int = 1000,
                       seed: int = 0) -> ed.report.Estimate:
    """:func:`ed.report.correlation` (bootstrap over the points), or a NaN estimate below 4 points."""
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 4:
        return nan_estimate()
    return ed.report.correlation(x[ok], y[ok], method=method, seed=seed, n_resamples=n_resamples)


def ensemble_errors(logits: torch.Tensor, labels: torch.Tensor, combos: torch.Tensor) -> dict[str, np.ndarray]:
    """Per test image, for each ensemble of ``combos`` (mean of logits, as :func:`ensdiv.metrics.ensemble_sweep`):

    ``ens_wrong`` (N, K) the ensemble's error, ``member_wrong`` (N, K) the mean error of its members and
    ``all_wrong`` (N, K) whether every member errs. Means over images and ensembles give the sweep's
    top-1 error and "all wrong" rate; :func:`err_statistic` gives its mean ERR. Float32, to keep
    the resampling cheap.
    """
    labels = labels.cpu()
    wrong = (logits.argmax(-1) != labels).double()  # (M, N)
    ens = torch.stack([(logits[c].double().mean(0).argmax(-1) != labels).double() for c in combos.long()])
    member = wrong[combos.long()]  # (K, k, N)
    return {"ens_wrong": ens.T.float().numpy(), "member_wrong": member.mean(1).T.float().numpy(),
            "all_wrong": member.prod(1).T.float().numpy()}


def err_statistic(ens_wrong: np.ndarray, member_wrong: np.ndarray) -> float:
    """Mean over ensembles of ERR = 1 − Err_ens / mean member error (in %; ensembles whose members make no error
    are skipped, as in :func:`ensdiv.metrics.ensemble_sweep`). Arrays (n, K), images first."""
    e, m = ens_wrong.mean(0), member_wrong.mean(0)
    ok = m > 0
    return float(100 * np.mean(1 - e[ok] / m[ok])) if ok.any() else float("nan")


def mean_err(*arrays: np.ndarray) -> float:
    """Mean of :func:`err_statistic` over consecutive ``(ens_wrong, member_wrong)`` pairs of arrays (one pair per
    base architecture, Fig. 4), as one statistic of a paired bootstrap."""
    if not arrays or len(arrays) % 2:
        return float("nan")
    return float(np.mean([err_statistic(arrays[i], arrays[i + 1]) for i in range(0, len(arrays), 2)]))


def reading_seed_bootstrap(inertia: Any, ari: Any, *, statistic: Callable[[np.ndarray], float] = np.median,
                           n_resamples: int = 1000, seed: int) -> ed.report.Estimate:
    """``statistic`` over readings of each reading's best-of-seeds ARI, bootstrapped over readings *and* seeds.

    Table 2's clustering keeps, for each reading of App. C, the K-means solution of lowest inertia over its seeds
    (:func:`~ensdiv.chapters.attack_similarity.release.spectral_clusters`, the paper's "best final objective").
    A resample draws readings with replacement and, independently, seeds with replacement; each drawn reading
    keeps the lowest-inertia solution among the drawn seeds (the first such seed on a tie, as the clustering
    does), and ``statistic`` is taken over the drawn readings' ARIs (:func:`scipy.stats.bootstrap` with two
    unpaired samples, percentile method). The interval thus covers which readings are admitted and which K-means
    initialisations were drawn; not which models are in the release. With one reading only the seeds are drawn.

    Args:
        inertia: ``(R, S)`` K-means inertia of reading ``r`` with seed ``s`` (``spectral_readings``'
            ``inertia per seed`` column, stacked).
        ari: ``(R, S)`` ARI of that solution against the reference clustering (``ARI per seed`` or
            ``ARI all per seed``).
        statistic: Of the ``(R',)`` best-of-seeds ARIs of a resample's readings.
        n_resamples, seed: Of the bootstrap.

    Returns:
        An :class:`~ensdiv.report.Estimate` with ``source="stated"`` (the page names the two sources).

    Raises:
        InvalidInputError: arrays of different shapes, or fewer than two seeds.

    Shape:
        inertia, ari: ``(R, S)``.

    >>> inertia = np.array([[2.0, 1.0, 3.0], [1.0, 1.0, 5.0]])
    >>> ari = np.array([[0.2, 0.9, 0.1], [0.6, 0.4, 0.0]])
    >>> est = reading_seed_bootstrap(inertia, ari, statistic=np.mean, n_resamples=200, seed=0)
    >>> float(est.value)  # reading 0 keeps seed 1 (0.9), reading 1 the first of its tied seeds 0 and 1 (0.6)
    0.75
    """
    from scipy import stats

    inertia, ari = np.atleast_2d(np.asarray(inertia, dtype=float)), np.atleast_2d(np.asarray(ari, dtype=float))
    if inertia.shape != ari.shape:
        raise InvalidInputError(f"inertia and ari must have one shape (readings, seeds), got {inertia.shape} and "
                                f"{ari.shape}.")
    n_readings, n_seeds = inertia.shape
    if n_seeds < 2:
        raise InvalidInputError(f"An interval over K-means seeds needs at least two seeds, got {n_seeds}.")

    def best(readings: np.ndarray, seeds: np.ndarray) -> float:
        readings, seeds = readings.astype(int), seeds.astype(int)
        pick = seeds[np.argmin(inertia[np.ix_(readings, seeds)], axis=1)]
        return float(statistic(ari[readings, pick]))

    value = best(np.arange(n_readings), np.arange(n_seeds))
    if n_readings >= 2:
        data, stat = (np.arange(n_readings), np.arange(n_seeds)), best
    else:
        data, stat = (np.arange(n_seeds),), lambda seeds: best(np.zeros(1, dtype=int), seeds)
    res = stats.bootstrap(data, stat, paired=False, vectorized=False, n_resamples=n_resamples,
                          method="percentile", random_state=np.random.default_rng(seed))
    return ed.report.Estimate(value, np.asarray(res.bootstrap_distribution, dtype=float), "stated", "bootstrap")
