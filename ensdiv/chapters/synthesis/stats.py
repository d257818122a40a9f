"""The synthesis chapter's statistics: correlations a statistician would sign.

The population mixes four sources and ensembles of two and three members, and many ensembles share
members (every zoo pair contains the base model). So:

- **Strata.** Every correlation is computed within one stratum — one source and one ensemble size
  (:func:`strata`) — never pooled across them: a pooled Spearman would mostly rank the sources.
- **A bootstrap over members** (:func:`member_bootstrap`). The sampled units are the members, not the
  ensembles: :func:`scipy.stats.bootstrap` resamples the stratum's member ids with replacement and an
  ensemble enters a resample as many times as the product of its members' counts (zero when one of its
  members was not drawn), so ensembles that share a member move together. A member present in *every*
  ensemble of the stratum (the zoo's base) is fixed by the design, not sampled, and always counts once.
- **Multiplicity.** Each interval's two-sided bootstrap p-value (twice the smaller tail of the replicates
  around zero) enters one family per table; Benjamini–Hochberg (:func:`scipy.stats.false_discovery_control`)
  gives the q-values, and a correlation is called non-zero only when ``q < 1 - ci``.
- **Selection apart from report** (:func:`ranked_table`). The "for predicting X, use Y" table is chosen on
  one half of each stratum's ensembles and its ρ, interval and q are reported on the other half; the halves
  share no member (:func:`member_halves`), so the report half is not the selection half's members again.
- **Nulls** (:func:`permuted_rho_null`): a correlation's null data deal the measure at random over the
  stratum's ensembles (the members and which ensembles share them kept), each draw with its own member
  bootstrap.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import stats

from ensdiv.errors import InvalidInputError
from ensdiv.report.nulls import NULL_DRAWS, Null, null_draws
from ensdiv.report.uncertainty import LEVEL, Estimate, member_resample
from ensdiv.report.uncertainty import _member_summary as _summary

__all__ = ["spearman_ci", "spearman_many", "member_resample", "member_bootstrap", "partial_spearman", "strata",
           "correlation_table", "measure_matrix", "member_halves", "ranked_table", "rho_estimate", "permuted_rho_null",
           "relabelled_rho_null",
           "sign_flip_null"]


def _finite_pairs(x: Any, y: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape:
        raise InvalidInputError(f"{name} needs x and y of the same length, got {x.size} and {y.size}.")
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]


def _rank_corr(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    """Spearman's ρ along ``axis`` (Pearson correlation of average ranks), vectorised over resamples."""
    ra, rb = stats.rankdata(a, axis=axis), stats.rankdata(b, axis=axis)
    ra = ra - ra.mean(axis=axis, keepdims=True)
    rb = rb - rb.mean(axis=axis, keepdims=True)
    den = np.sqrt((ra**2).sum(axis=axis) * (rb**2).sum(axis=axis))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (ra * rb).sum(axis=axis) / np.where(den > 0, den, 1.0), np.nan)


def _check_options(n_boot: int, ci: float) -> None:
    if not 0 < ci < 1:
        raise InvalidInputError(f"ci must be a confidence level in (0, 1), got {ci!r}.")
    if int(n_boot) < 1:
        raise InvalidInputError(f"n_boot must be at least 1, got {n_boot!r}.")


def spearman_ci(x: Any, y: Any, *, n_boot: int = 1000, ci: float = LEVEL, seed: int = 0) -> dict[str, Any]:
    """Spearman's ρ of ``x`` and ``y`` with a percentile bootstrap interval over *independent* pairs.

    Pairs where either value is NaN are dropped first. The bootstrap resamples the pairs with
    :func:`scipy.stats.bootstrap` (``paired=True``, ``rng=seed``); resamples where one variable is constant
    have no ρ and are left out. Use :func:`member_bootstrap` when the pairs are ensembles that share members.

    Returns:
        ``{"rho", "low", "high", "p", "n", "replicates"}``; NaN when fewer than 4 finite pairs remain or a
        variable is constant.
    """
    _check_options(n_boot, ci)
    x, y = _finite_pairs(x, y, "spearman_ci")
    rho = float(_rank_corr(x, y)) if x.size >= 2 else float("nan")
    if x.size < 4 or not np.isfinite(rho):
        return _summary(rho, np.array([]), ci, int(x.size))
    with warnings.catch_warnings():  # degenerate resamples (constant ranks) are dropped
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        res = stats.bootstrap((x, y), _rank_corr, paired=True, vectorized=True, n_resamples=int(n_boot),
                              method="percentile", rng=np.random.default_rng(seed), confidence_level=ci)
    return _summary(rho, np.asarray(res.bootstrap_distribution, dtype=float), ci, int(x.size))


def _weighted_ranks(v: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Average ranks of ``v`` (E,) when item ``e`` is repeated ``w[b, e]`` times, for every row ``b`` of ``w``
    (B, E): tied values share their block's average rank, as in :func:`scipy.stats.rankdata`."""
    uniq, inv = np.unique(v, return_inverse=True)
    onehot = (inv[:, None] == np.arange(uniq.size)[None, :]).astype(float)
    tied = w @ onehot  # (B, U): how many rows carry each distinct value
    ranks = np.cumsum(tied, axis=1) - tied + (tied + 1) / 2
    return ranks[:, inv]


def _weighted_spearman(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Spearman's ρ of ``x`` and ``y`` (E,) with item ``e`` repeated ``w[b, e]`` times, for every row of ``w``:
    the weighted Pearson correlation of the weighted average ranks (NaN below 4 rows or with a constant)."""
    rx, ry = _weighted_ranks(x, w), _weighted_ranks(y, w)
    total = w.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        dx = rx - (w * rx).sum(axis=1, keepdims=True) / total
        dy = ry - (w * ry).sum(axis=1, keepdims=True) / total
        den = np.sqrt((w * dx**2).sum(axis=1) * (w * dy**2).sum(axis=1))
        rho = (w * dx * dy).sum(axis=1) / den
    return np.where((den > 1e-12) & (total[:, 0] >= 4), rho, np.nan)


def _member_weights(groups: Sequence[tuple[int, ...]]) -> tuple[np.ndarray, np.ndarray] | None:
    """The sampled member ids of a stratum and an (E, k) index of each ensemble's sampled members (padded with
    the id count, which points at a column of ones); members in every ensemble are fixed. None when fewer
    than two members can be sampled."""
    fixed = set.intersection(*(set(g) for g in groups))
    ids = np.array(sorted({m for g in groups for m in g} - fixed))
    if ids.size < 2:
        return None
    position = {m: i for i, m in enumerate(ids)}
    width = max(len(g) for g in groups)
    index = np.full((len(groups), width), ids.size)
    for e, g in enumerate(groups):
        mine = [position[m] for m in g if m not in fixed]
        index[e, : len(mine)] = mine
    return ids, index


def spearman_many(columns: dict[str, np.ndarray], pairs: Sequence[tuple[str, str]],
                  members: Sequence[Sequence[int]], *, n_boot: int = 1000, ci: float = LEVEL,
                  seed: int = 0) -> list[dict[str, Any]]:
    """Spearman's ρ of several (x, y) column pairs over one stratum's ensembles, each with an interval from one
    shared bootstrap over the stratum's *members* (as :func:`ensdiv.report.uncertainty.member_resample` draws
    them: an ensemble counts as often as the product of its sampled members' counts; members in every ensemble
    are fixed). The weighted correlations of every pair are computed for a batch of resamples at once inside
    one :func:`scipy.stats.bootstrap` call, and every pair's replicates come from the same resamples (paired).
    An ensemble with a NaN in a pair's x or y is left out of that pair.

    Returns:
        One ``{"rho", "low", "high", "p", "n", "replicates"}`` per pair (see :func:`spearman_ci`).
    """
    _check_options(n_boot, ci)
    groups = [tuple(int(m) for m in g) for g in members]
    cols = {k: np.asarray(v, dtype=float).ravel() for k, v in columns.items()}
    if any(v.size != len(groups) for v in cols.values()):
        raise InvalidInputError("spearman_many needs one value of every column per ensemble.")
    valid = [np.isfinite(cols[a]) & np.isfinite(cols[b]) for a, b in pairs]
    clean = [(np.where(ok, cols[a], 0.0), np.where(ok, cols[b], 0.0)) for (a, b), ok in zip(pairs, valid, strict=True)]
    ones = np.ones((1, len(groups)))
    points = [float(_weighted_spearman(x, y, ones * ok)[0]) if ok.sum() >= 4 else float("nan")
              for (x, y), ok in zip(clean, valid, strict=True)]
    built = _member_weights(groups) if groups else None
    if built is None:
        return [_summary(v, np.array([]), ci, int(ok.sum())) for v, ok in zip(points, valid, strict=True)]
    ids, index = built

    def statistic(drawn: np.ndarray, axis: int = -1) -> np.ndarray:
        drawn = np.moveaxis(drawn, axis, -1).reshape(-1, ids.size)  # (B, P) member ids drawn
        counts = (np.searchsorted(ids, drawn)[..., None] == np.arange(ids.size)).sum(axis=1)  # (B, P)
        counts = np.concatenate([counts, np.ones((counts.shape[0], 1))], axis=1)
        w = counts[:, index].prod(axis=2)  # (B, E)
        return np.stack([_weighted_spearman(x, y, w * ok) for (x, y), ok in zip(clean, valid, strict=True)])

    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        res = stats.bootstrap((ids,), statistic, vectorized=True, n_resamples=int(n_boot), batch=100,
                              method="percentile", rng=np.random.default_rng(seed), confidence_level=ci)
    dist = np.asarray(res.bootstrap_distribution, dtype=float).reshape(len(pairs), -1)
    return [_summary(v, dist[i], ci, int(valid[i].sum())) for i, v in enumerate(points)]


def member_bootstrap(x: Any, y: Any, members: Sequence[Sequence[int]], *, control: Any = None, n_boot: int = 1000,
                     ci: float = LEVEL, seed: int = 0) -> dict[str, Any]:
    """Spearman's ρ of ``x`` and ``y`` over ensembles (:func:`spearman_many` for one pair), or the partial ρ
    given ``control`` (:func:`ensdiv.report.uncertainty.member_resample`), with an interval from resampling
    their members.

    Example:
        Five ensembles, two of them sharing member 0:

        >>> r = member_bootstrap([1, 2, 3, 4, 5], [2, 1, 4, 3, 5], [(0, 1), (0, 2), (3, 4), (5, 6), (7, 8)],
        ...                      n_boot=50, seed=0)
        >>> round(r["rho"], 2), r["n"]
        (0.8, 5)
    """
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    if not (x.size == y.size == len(members)):
        raise InvalidInputError(f"member_bootstrap needs one x, y and member tuple per ensemble, got {x.size}, "
                                f"{y.size} and {len(members)}.")
    if control is None:
        return spearman_many({"x": x, "y": y}, [("x", "y")], members, n_boot=n_boot, ci=ci, seed=seed)[0]
    return member_resample({"x": x, "y": y, "z": control}, members,
                           lambda c: partial_spearman(c["x"], c["y"], c["z"]), n_boot=n_boot, ci=ci, seed=seed)


def partial_spearman(x: Any, y: Any, z: Any) -> float:
    """Partial Spearman correlation of ``x`` and ``y`` controlling for ``z``.

    All three are ranked (average ranks); the ranks of ``x`` and of ``y`` are each regressed on the ranks of
    ``z`` with an intercept (ordinary least squares, statsmodels) and the Pearson correlation of the two
    residuals is returned. Rows with a NaN in any of the three are dropped. NaN when fewer than 4 rows remain
    or a residual is constant.
    """
    x, y, z = (np.asarray(v, dtype=float).ravel() for v in (x, y, z))
    if not x.shape == y.shape == z.shape:
        raise InvalidInputError(f"partial_spearman needs x, y, z of one length, got {x.size}, {y.size}, {z.size}.")
    keep = np.isfinite(x) & np.isfinite(y) & np.isfinite(z)
    if keep.sum() < 4:
        return float("nan")
    rx, ry, rz = (stats.rankdata(v[keep]) for v in (x, y, z))
    design = sm.add_constant(rz, has_constant="add")
    ex, ey = sm.OLS(rx, design).fit().resid, sm.OLS(ry, design).fit().resid
    den = np.sqrt((ex**2).sum() * (ey**2).sum())
    return float((ex * ey).sum() / den) if den > 1e-12 else float("nan")


def strata(ensembles: pd.DataFrame, *, min_n: int = 8) -> dict[tuple[str, int], pd.Index]:
    """The (source, size) strata of a population's ensembles with at least ``min_n`` ensembles each."""
    groups = ensembles.groupby(["source", "size"]).groups
    return {(str(s), int(k)): idx for (s, k), idx in sorted(groups.items()) if len(idx) >= min_n}


def _bh(corr: pd.DataFrame, ci: float) -> pd.DataFrame:
    """Benjamini-Hochberg q-values over the family of the table's finite p-values, and the non-zero flag."""
    q = np.full(len(corr), np.nan)
    finite = np.isfinite(corr["p"].to_numpy(dtype=float))
    if finite.any():
        q[finite] = stats.false_discovery_control(corr["p"].to_numpy(dtype=float)[finite], method="bh")
    return corr.assign(q=q, nonzero=q < 1 - ci)


def correlation_table(measures: pd.DataFrame, outcomes: pd.DataFrame, ensembles: pd.DataFrame, *,
                      outcome_names: Sequence[str], control: str, n_boot: int, ci: float, seed: int,
                      min_n: int = 8) -> pd.DataFrame:
    """One row per (stratum, measure, outcome): ``n``, Spearman ``rho`` with its member-bootstrap ``low`` /
    ``high`` and ``p``, the BH ``q`` over the whole table, ``nonzero`` (q < 1 - ci) and the partial Spearman
    controlling for ``outcomes[control]`` within the stratum."""
    rows = []
    for (source, size), idx in strata(ensembles, min_n=min_n).items():
        groups = list(ensembles.loc[idx, "idx"])
        cols = {**{f"m:{m}": measures.loc[idx, m].to_numpy() for m in measures.columns},
                **{f"o:{o}": outcomes.loc[idx, o].to_numpy() for o in outcome_names}}
        pairs = [(f"m:{m}", f"o:{o}") for m in measures.columns for o in outcome_names]
        results = spearman_many(cols, pairs, groups, n_boot=n_boot, ci=ci, seed=seed)
        for (m, o), r in zip([(a[2:], b[2:]) for a, b in pairs], results, strict=True):
            r.pop("replicates")
            rows.append({"source": source, "size": size, "measure": m, "outcome": o, **r,
                         "partial": partial_spearman(measures.loc[idx, m], outcomes.loc[idx, o],
                                                     outcomes.loc[idx, control])})
    columns = ["source", "size", "measure", "outcome", "rho", "low", "high", "p", "n", "partial"]
    return _bh(pd.DataFrame(rows, columns=columns), ci)


def measure_matrix(measures: pd.DataFrame) -> pd.DataFrame:
    """Spearman correlation of every pair of measures over the ensembles where both exist."""
    return measures.corr(method="spearman", min_periods=4)


def member_halves(groups: Sequence[Sequence[int]], *, seed: int) -> tuple[list[int], list[int]]:
    """Two halves of a stratum's ensembles that share no member: positions into ``groups``.

    Members in every ensemble (the zoo's base) are fixed by the design and allowed in both halves. The other
    members are linked when an ensemble holds both; when that leaves several groups of linked members (one
    Packed-Ensembles or SED run each, or one zoo model each beside the base), whole groups are dealt to the
    halves at random, the next to the half with fewer ensembles. When every member is linked to every other
    (design-diversity's triples of one zoo), the members are dealt into two halves at random and an ensemble
    whose members fall in both is left out of either.

    >>> member_halves([(0, 1), (0, 2), (0, 3), (0, 4)], seed=0)  # the base 0 is fixed: one model each
    ([2, 3], [0, 1])
    """
    groups = [tuple(int(m) for m in g) for g in groups]
    if not groups:
        return [], []
    fixed = set.intersection(*(set(g) for g in groups))
    parent: dict[int, int] = {}

    def root(m: int) -> int:
        while parent.setdefault(m, m) != m:
            m = parent[m]
        return m

    for g in groups:
        free = [m for m in g if m not in fixed]
        for m in free[1:]:
            parent[root(m)] = root(free[0])
    rng = np.random.default_rng([seed, 7])
    comps = sorted({root(m) for g in groups for m in g if m not in fixed})
    if len(comps) >= 2:
        side: dict[int, int] = {}
        sizes = [0, 0]
        count = {c: sum(1 for g in groups if any(root(m) == c for m in g if m not in fixed)) for c in comps}
        for c in rng.permutation(comps).tolist():
            side[c] = int(sizes[1] < sizes[0])
            sizes[side[c]] += count[c]

        def half_of(g: tuple[int, ...]) -> int | None:
            return side[root(next(m for m in g if m not in fixed))] if any(m not in fixed for m in g) else None
    else:
        free = sorted({m for g in groups for m in g if m not in fixed})
        dealt = rng.permutation(free).tolist()
        side = {m: int(i >= len(dealt) // 2) for i, m in enumerate(dealt)}

        def half_of(g: tuple[int, ...]) -> int | None:
            sides = {side[m] for m in g if m not in fixed}
            return sides.pop() if len(sides) == 1 else None
    a = [i for i, g in enumerate(groups) if half_of(g) == 0]
    b = [i for i, g in enumerate(groups) if half_of(g) == 1]
    return a, b


def ranked_table(measures: pd.DataFrame, outcomes: pd.DataFrame, ensembles: pd.DataFrame, *,
                 outcome_names: Sequence[str], labels: dict[str, str], control: str, n_boot: int, ci: float,
                 seed: int, top: int = 3, min_n: int = 16) -> pd.DataFrame:
    """"For predicting X, use Y", chosen on one half and reported on the other.

    Each stratum's ensembles are split in two halves that share no member (:func:`member_halves`, seeded).
    On the *selection* half, the measures whose correlation with the outcome is non-zero after BH are ranked
    by |ρ| and the ``top`` kept; on the *report* half, the kept measures' ρ, member-bootstrap interval,
    partial ρ and BH q (over the reported family) are shown. A stratum needs ``min_n`` ensembles, and each
    half ``min_n // 2`` (a stratum whose members are all linked loses the ensembles that straddle the halves).
    """
    halves = {}
    for key, idx in strata(ensembles, min_n=min_n).items():
        a, b = member_halves(list(ensembles.loc[idx, "idx"]), seed=seed)
        halves[key] = (idx[a], idx[b])
    pick_ens = ensembles.loc[[i for a, _ in halves.values() for i in a]]
    report_ens = ensembles.loc[[i for _, b in halves.values() for i in b]]
    kw = {"outcome_names": outcome_names, "control": control, "n_boot": n_boot, "ci": ci, "seed": seed,
          "min_n": max(4, min_n // 2)}
    chosen = correlation_table(measures.loc[pick_ens.index], outcomes.loc[pick_ens.index], pick_ens, **kw)
    chosen = chosen[chosen.nonzero].assign(abs_rho=lambda d: d.rho.abs())
    chosen = chosen.sort_values("abs_rho", ascending=False).groupby(["source", "size", "outcome"]).head(top)
    reported = correlation_table(measures.loc[report_ens.index], outcomes.loc[report_ens.index], report_ens, **kw)
    keys = ["source", "size", "measure", "outcome"]
    out = _bh(chosen[keys].merge(reported.drop(columns=["q", "nonzero"]), on=keys, how="left"), ci)
    out = out.assign(measure=out.measure.map(labels), interval=[f"[{lo:.2f}, {hi:.2f}]" for lo, hi in
                                                                 zip(out.low, out.high, strict=True)])
    return out[["source", "size", "outcome", "measure", "rho", "interval", "q", "partial", "n"]].reset_index(drop=True)


def rho_estimate(r: dict[str, Any], *, group: str | None = None) -> Estimate:
    """A member-bootstrap result (:func:`member_bootstrap`, :func:`member_resample`) as an
    :class:`~ensdiv.report.Estimate` over ``"models"`` (the member models the ensembles are built from, each
    ensemble weighed by its members' draw counts); results of one stratum, seed and members share their resamples,
    and the same ``group`` pairs them replicate by replicate."""
    return Estimate(float(r["rho"]), np.asarray(r["replicates"], dtype=float), "models", "bootstrap", group)


def permuted_rho_null(name: str, x: Any, y: Any, members: Sequence[Sequence[int]], *, seed: int,
                      control: Any = None, also: dict[str, tuple[Any, Any]] | None = None, draws: int = NULL_DRAWS,
                      n_boot: int = 200) -> Null:
    """Null data for a correlation over one stratum's ensembles: the measure ``x`` dealt at random over the
    ensembles (the outcome, the members and which ensembles share them kept), each draw's ρ (or partial ρ
    given ``control``) with its own member bootstrap of ``n_boot`` resamples.

    ``also``: ``{quantity: (x2, y2)}`` further correlations of the same ensembles, each with its measure dealt
    at random too (independently), for a check that compares two correlations; every quantity of one draw shares
    one member resampling (paired, like the observed ones).

    >>> null = permuted_rho_null("rho", np.arange(8.0), np.arange(8.0), [(i, i + 8) for i in range(8)], seed=0,
    ...                          draws=3, n_boot=20)
    >>> len(null.draws), null.draws[0]["rho"].source
    (3, 'models')
    """
    x, y = np.array(x, dtype=float).ravel(), np.array(y, dtype=float).ravel()  # copies: pandas views are read-only
    extra = {k: (np.array(a, dtype=float).ravel(), np.array(b, dtype=float).ravel())
             for k, (a, b) in (also or {}).items()}

    def make(rng: np.random.Generator) -> dict[str, Estimate]:
        boot_seed = int(rng.integers(2**31))
        group = f"null-{boot_seed}"
        out = {name: rho_estimate(member_bootstrap(rng.permutation(x), y, members, control=control, n_boot=n_boot,
                                                   seed=boot_seed), group=group)}
        for k, (a, b) in extra.items():
            out[k] = rho_estimate(member_bootstrap(rng.permutation(a), b, members, n_boot=n_boot, seed=boot_seed),
                                  group=group)
        return out

    what = "the measures" if extra else "the measure"
    return null_draws(f"{what} dealt at random over the stratum's ensembles (members kept), {n_boot} member "
                      "resamples each", make, draws=draws, seed=seed)


def relabelled_rho_null(name: str, measure_of: Any, y: Any, members: Sequence[Sequence[int]], *, models: int,
                        seed: int, draws: int = NULL_DRAWS, n_boot: int = 200) -> Null:
    """Null data for a correlation over ensembles built from one pool of ``models`` members: the members relabelled
    at random (a permutation of the pool), each ensemble's measure recomputed on its relabelled members
    (``measure_of(order) -> (E,)``, member ``k`` read as ``order[k]``) against the same outcomes ``y``, each draw's
    ρ with its own member bootstrap of ``n_boot`` resamples. The ensembles keep which members they share, so the
    measures of ensembles that share a member stay as dependent as they are observed: dealing the measure over the
    ensembles makes them independent, and its null is too narrow where a few members make many ensembles.

    >>> null = relabelled_rho_null("rho", lambda order: order[[0, 1, 2, 3]].astype(float), np.arange(4.0),
    ...                            [(0, 1), (1, 2), (2, 3), (3, 0)], models=4, seed=0, draws=3, n_boot=20)
    >>> len(null.draws), null.draws[0]["rho"].source
    (3, 'models')
    """
    y = np.array(y, dtype=float).ravel()

    def make(rng: np.random.Generator) -> dict[str, Estimate]:
        x = np.asarray(measure_of(rng.permutation(int(models))), dtype=float).ravel()
        return {name: rho_estimate(member_bootstrap(x, y, members, n_boot=n_boot, seed=int(rng.integers(2**31))))}

    return null_draws(f"the pool's {models} members relabelled at random and each ensemble's measure recomputed on "
                      f"its relabelled members (which ensembles share a member kept), {n_boot} member resamples each",
                      make, draws=draws, seed=seed)


def sign_flip_null(name: str, d: Any, members: Sequence[Sequence[int]], *, seed: int, draws: int = NULL_DRAWS,
                   n_boot: int = 200) -> Null:
    """Null data for a mean paired difference over ensembles (a score minus another on the same ensemble): the
    two scores swapped at random within each ensemble (each difference's sign flipped), each draw's mean with
    its own member resampling (:func:`member_resample`, ``n_boot`` resamples).

    >>> null = sign_flip_null("d", np.ones(6), [(i, i + 6) for i in range(6)], seed=0, draws=4, n_boot=20)
    >>> len(null.draws), sorted({abs(e.value) <= 1 for e in (dr["d"] for dr in null.draws)})
    (4, [True])
    """
    d = np.asarray(d, dtype=float).ravel()

    def make(rng: np.random.Generator) -> dict[str, Estimate]:
        flipped = d * rng.choice((-1.0, 1.0), size=d.size)
        r = member_resample({"d": flipped}, members, lambda c: float(np.mean(c["d"])), n_boot=n_boot,
                            seed=int(rng.integers(2**31)))
        return {name: rho_estimate(r)}

    return null_draws(f"the two scores swapped at random within each ensemble, {n_boot} member resamples each",
                      make, draws=draws, seed=seed)
