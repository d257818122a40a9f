"""Empirical nulls: a check re-run on this run's own data with the effect removed by construction.

A check is evidence only if it fails without the effect. Whether it does is not argued, it is measured: the page
builds *null data* from this run's data — two seeds of one method in place of two methods (A/A), the two
compared methods swapped at random within each seed, models dealt into groups at random, labels permuted — many
times (:data:`NULL_DRAWS`), and the check's statistic is computed on every draw. Its **randomisation p-value** is
the share of draws at least as extreme as this run's (:func:`ensdiv.report.randomisation_p`), read exactly where
the draws enumerate every pattern (:attr:`Null.exact`: ``S`` seeds under sign flips give ``2**S`` patterns and
a smallest p-value of ``2**-S``). An inequality that holds for any data (Jensen), a near-identity and a
part–whole correlation read the same on such data as on this run's, so their p-value is large and they never
pass.

The mirror case: where the claim is that an effect is absent or small ("no improvement beyond 0.04 points"),
the check also carries data built so that the claim is *true* (``truth=``): its draws, moved to the tolerance's
bound, are where the claim just fails (:mod:`ensdiv.report.claims`). A :class:`Null` holds the construction's
name and its draws (each a mapping of quantities that replace this run's); the helpers build the common ones
without a new resampling per draw where they can.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ensdiv.errors import InvalidInputError
from ensdiv.report.replication import model_bootstrap, nested_bootstrap
from ensdiv.report.uncertainty import _GROUPS, Estimate, _array, from_seeds, resample_counts

__all__ = ["NULL_DRAWS", "Null", "aa_null", "centred_null", "deal_within", "needed_replicates", "null_draws",
           "partition_null", "seed_flips"]

#: Draws of a null construction unless the page says otherwise.
NULL_DRAWS = 200
@dataclass(frozen=True)
class Null:
    """Null data for a check: what was done to this run's data, and the draws.

    Args:
        construction: What removes the effect, in the page's words ("A/A: the deep ensemble's seeds 0–2 against
            its seeds 3–5", "sign flips between PE and DE within each seed", "models dealt into groups of 7 and
            5 at random").
        draws: One mapping per draw, of the quantities that replace this run's (numbers or estimates); the
            quantities a draw leaves out keep this run's values.
        exact: The draws enumerate every pattern of the construction once, this run's own among them (an exact
            permutation test: a p-value is the share of draws at least as extreme, not ``(1 + k) / (1 + D)``).
        replicates: How many replicates the construction permutes (seeds, models), when it permutes them: the
            page then says how many it would need to decide (:func:`needed_replicates`).
        replicate: What those replicates are ("seeds", "models").
        centred: The draws sit at the statistic's no-effect value (0 for a difference, 1 for a ratio:
            :func:`centred_null`), so only a check that moves them to its bound (``null_at``) may read them.
    """

    construction: str
    draws: Sequence[Mapping[str, Any]]
    exact: bool = False
    replicates: int | None = None
    replicate: str = "seeds"
    centred: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.construction, str) or not self.construction.strip():
            raise InvalidInputError("A null needs its construction named (what removes the effect).")
        if not self.draws or not all(isinstance(d, Mapping) for d in self.draws):
            raise InvalidInputError("A null needs at least one draw, each a mapping of quantities.")

    @property
    def min_p(self) -> float:
        """The smallest randomisation p-value these draws can give: ``1 / D`` when they enumerate every pattern,
        else ``1 / (1 + D)``."""
        n = len(self.draws)
        return 1 / n if self.exact else 1 / (n + 1)


def null_draws(construction: str, make: Callable[[np.random.Generator], Mapping[str, Any]], *,
               draws: int = NULL_DRAWS, seed: int) -> Null:
    """A :class:`Null` from a function that builds one draw from a random generator.

    >>> null = null_draws("labels permuted", lambda rng: {"acc": float(rng.permutation([1, 0, 0, 0])[0])},
    ...                   draws=50, seed=0)
    >>> len(null.draws), null.construction
    (50, 'labels permuted')
    """
    if int(draws) < 1:
        raise InvalidInputError(f"A null needs at least one draw, got {draws!r}.")
    rng = np.random.default_rng(seed)
    return Null(construction, [make(rng) for _ in range(int(draws))])


def _t_over_z(df: int) -> float:
    """Student's t over the normal quantile at 95 %: how much wider few units' tails are than the bootstrap's."""
    from scipy import stats

    return float(stats.t.ppf(0.95, df) / stats.norm.ppf(0.95))


def centred_null(values: Mapping[str, Estimate], a: str, b: str | None = None, *, ratio: bool = False,
                 units: int | None = None) -> Null:
    """The claim's own estimate with its effect taken out: the bootstrap replicates of ``a - b`` (of ``a``
    alone without ``b``) minus their value, or of ``a / value`` with ``ratio``, so they sit at no effect (0, or
    1 for a ratio). A check whose ``null_at`` is that value moves them to its bound: the p-value is then a
    bootstrap test of the claim's bound ("no more than 0.2 lower", "at least 0.8 times", "above every other"),
    with the replicates the estimate's interval resamples. It is the null for a claim *about a bound*: a null
    that removes the effect altogether (a column dealt at random, a second attack's models shuffled) sits far
    below the bound, where any estimate above the bound beats it.

    Per-seed estimates (:func:`ensdiv.report.from_seeds`) are centred too: their values minus their mean, the
    signs flipped in every pattern (a one-sample sign-flip test of the bound, exact over ``2**S`` patterns).

    Args:
        values: The claim's quantities; ``a`` (and ``b``) bootstrap :class:`Estimate` s of one paired
            resampling (the same ``group``), the replicates of one resample combined replicate by replicate, or
            per-seed estimates with as many seeds.
        a, b: The statistic ``a - b`` (``a`` without ``b``).
        ratio: Centre ``a`` at 1 (``a / value``) for a check of a ratio's bound (``null_at=1``,
            ``null_scale=True``).
        units: How many units the bootstrap resampled (models): the draws are widened by ``sqrt(n / (n - 1))``
            (the bias of the bootstrap's plug-in variance) times Student's t over the normal quantile at 95 % with
            ``n - 1`` degrees of freedom (the tails of few units), without which the test is too eager on few
            units (``ensdiv.report.calibration``, "bound bootstrap": 7.5 % false "holds" over 15 models).

    >>> from ensdiv.report.uncertainty import Estimate
    >>> est = {"x": Estimate(2.0, np.array([1.5, 2.5, 3.0]), "models", group="g"),
    ...        "y": Estimate(1.0, np.ones(3), "models", group="g")}
    >>> [d["x"] for d in centred_null(est, "x", "y").draws]
    [-0.5, 0.5, 1.0]
    >>> [d["x"] for d in centred_null(est, "x", ratio=True).draws]
    [0.75, 1.25, 1.5]
    """
    if all(isinstance(values.get(q), Estimate) and values[q].kind == "seeds" for q in (a, b) if q is not None):
        return _centred_flips(values, a, b, ratio=ratio)

    def replicates(q: str) -> tuple[float, np.ndarray]:
        est = values.get(q)
        if not isinstance(est, Estimate) or est.kind != "bootstrap" or est.replicates is None:
            raise InvalidInputError(f"A centred null needs {q!r} as a bootstrap Estimate with its replicates, or "
                                    "per-seed estimates (from_seeds).")
        return float(est.value), np.asarray(est.replicates, dtype=float)

    value, reps = replicates(a)
    if b is not None:
        if ratio:
            raise InvalidInputError("A centred null of a ratio reads one quantity (a ratio), not a - b.")
        b_value, b_reps = replicates(b)
        ea, eb = values[a], values[b]
        if b_reps.shape != reps.shape or ea.group is None or ea.group != eb.group:
            raise InvalidInputError(f"{a!r} and {b!r} must come from one paired bootstrap (the same group) for "
                                    "their difference to be centred replicate by replicate.")
        value, reps = value - b_value, reps - b_reps
    if reps.size == 0:  # no replicate (a bootstrap over too few units): one draw, not computable
        value, reps = np.nan, np.full(1, np.nan)
    if not np.isfinite(value) or (ratio and value == 0):  # not computable here (too few models): NaN draws
        value, reps = np.nan, np.full_like(reps, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        centred = reps / value - 1 if ratio else reps - value
    if units is not None:
        if int(units) < 2:
            raise InvalidInputError(f"A bootstrap over {units!r} units cannot be widened; it needs at least two.")
        centred = centred * np.sqrt(units / (units - 1)) * _t_over_z(int(units) - 1)
    centred = centred + 1 if ratio else centred
    kept = np.where(np.isfinite(centred), centred, np.nan)  # a replicate it is undefined on stays undefined
    what = f"{a} − {b}" if b is not None else a
    how = "divided by its value (at 1)" if ratio else "minus its value (at 0)"
    draws = [{a: float(x), **({b: 0.0} if b is not None else {})} for x in kept]
    return Null(f"the bootstrap replicates of {what} {how}, moved to the claim's bound", draws, centred=True)


def _centred_flips(values: Mapping[str, Estimate], a: str, b: str | None, *, ratio: bool) -> Null:
    """:func:`centred_null` for per-seed estimates: the seeds' values of ``a`` (``a - b``, or ``a / b`` with
    ``ratio``) minus their mean (divided by it, at 1), their signs flipped in every one of the ``2**S`` patterns (a
    one-sample sign-flip test of the claim's bound, exact; its smallest p-value is ``2**-S``)."""
    va = np.asarray(values[a].replicates, dtype=float)
    if b is not None:
        vb = np.asarray(values[b].replicates, dtype=float)
        if vb.shape != va.shape:
            raise InvalidInputError(f"A centred null of {a!r} and {b!r} needs as many seeds of each, got {va.size} "
                                    f"and {vb.size}.")
        with np.errstate(invalid="ignore", divide="ignore"):
            va = va / vb if ratio else va - vb
    if va.size > 16:
        raise InvalidInputError(f"A centred sign-flip null enumerates 2**S patterns; {va.size} seeds is too many.")
    mean = float(va.mean())
    with np.errstate(invalid="ignore", divide="ignore"):
        centred = va / mean - 1 if ratio else va - mean
    signs = np.where(_patterns(va.size, 2 ** va.size, np.random.default_rng(0)), -1.0, 1.0)  # all 2**S: exact
    stats = (signs * centred).mean(axis=1) + (1.0 if ratio else 0.0)
    what = (f"{a} / {b}" if ratio else f"{a} − {b}") if b is not None else a
    how = "divided by their mean (at 1)" if ratio else "minus their mean (at 0)"
    if b is None:
        draws = [{a: float(x)} for x in stats]
    elif ratio:
        draws = [{a: float(x), b: 1.0} for x in stats]
    else:
        draws = [{a: float(x), b: 0.0} for x in stats]
    return Null(f"the seeds' values of {what} {how}, their signs flipped in every pattern, moved to the claim's "
                "bound", draws, exact=True, replicates=int(va.size), centred=True)


#: Up to this many seeds' patterns (``2**10``), a sign-flip null enumerates them all (an exact permutation test).
EXACT_PATTERNS = 1024


def _exact(s: int, draws: int) -> bool:
    """Whether :func:`_patterns` enumerates all ``2**s`` patterns."""
    return 2 ** s <= max(draws, EXACT_PATTERNS)


def needed_replicates(alpha: float) -> int:
    """The fewest seeds whose sign-flip patterns can reach a p-value of ``alpha`` (``2**-S <= alpha``).

    >>> needed_replicates(0.05), needed_replicates(0.025)
    (5, 6)
    """
    return int(np.ceil(np.log2(1 / alpha) - 1e-12))


def _patterns(s: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """Swap patterns ``(D, s)``: all ``2**s`` when there are at most ``max(draws, EXACT_PATTERNS)``, else
    ``draws`` random ones."""
    if _exact(s, draws):
        return np.array(list(itertools.product((False, True), repeat=s)))
    return rng.random((draws, s)) < 0.5


def seed_flips(values: Mapping[str, Estimate], a: str, b: str, *, draws: int = NULL_DRAWS, seed: int) -> Null:
    """Null data for a comparison of two methods trained with the same seeds: the two methods swapped at random
    within each seed (a paired permutation test; exact over all ``2**S`` patterns up to ten seeds).

    ``values[a]`` and ``values[b]`` are per-seed estimates (:func:`ensdiv.report.from_seeds`) or nested
    estimates (:func:`ensdiv.report.nested_bootstrap`) with as many rows. With ``S`` seeds the observed pattern
    is one of ``2**S``: its randomisation p-value is at least ``2**-S``, so four seeds (6.25 %) can never reach
    the book's 5 %, and five (3.1 %) can (:func:`needed_replicates`).

    Raises:
        InvalidInputError: estimates of other kinds, or with different numbers of seeds.

    >>> null = seed_flips({"pe": from_seeds([0.91, 0.92, 0.90]), "de": from_seeds([0.90, 0.91, 0.89])}, "pe", "de",
    ...                   seed=0)
    >>> len(null.draws), sorted(null.draws[1]["pe"].replicates.tolist())
    (8, [0.89, 0.91, 0.92])
    """
    ea, eb = values.get(a), values.get(b)
    rng = np.random.default_rng(seed)
    if all(isinstance(e, Estimate) and e.kind == "seeds" for e in (ea, eb)):
        va, vb = (np.asarray(e.replicates, dtype=float) for e in (ea, eb))
        if va.size != vb.size:
            raise InvalidInputError(f"seed_flips needs as many seeds of {a!r} and {b!r}, got {va.size} and {vb.size}.")
        out = []
        for flip in _patterns(va.size, draws, rng):
            out.append({a: from_seeds(np.where(flip, vb, va), source=ea.source),
                        b: from_seeds(np.where(flip, va, vb), source=eb.source)})
        return Null(f"{a} and {b} swapped at random within each seed", out, exact=_exact(va.size, draws),
                    replicates=int(va.size))
    if all(isinstance(e, Estimate) and e.parts is not None for e in (ea, eb)):
        (ra, ca, ma), (rb, cb, mb) = ea.parts, eb.parts
        if ra.shape != rb.shape:
            raise InvalidInputError(f"seed_flips needs as many seeds (rows) of {a!r} and {b!r}, got {ra.shape[0]} "
                                    f"and {rb.shape[0]}.")
        s = ra.shape[0]
        out = []
        for flip in _patterns(s, draws, rng):
            na, nb = np.where(flip[:, None], rb, ra), np.where(flip[:, None], ra, rb)
            pa, pb = np.where(flip, mb, ma), np.where(flip, ma, mb)
            group = f"bootstrap-{next(_GROUPS)}"
            out.append({a: Estimate(float(pa.mean()), np.einsum("rs,sr->r", ca, na) / s, ea.source, "bootstrap",
                                    group, parts=(na, ca, pa)),
                        b: Estimate(float(pb.mean()), np.einsum("rs,sr->r", cb, nb) / s, eb.source, "bootstrap",
                                    group, parts=(nb, cb, pb))})
        return Null(f"{a} and {b} swapped at random within each seed (rows), test images resampled as observed",
                    out, exact=_exact(s, draws), replicates=int(s))
    raise InvalidInputError(f"seed_flips needs per-seed or nested estimates of {a!r} and {b!r} (from_seeds, "
                            "nested_bootstrap); an image bootstrap has no seeds to swap.")


def aa_null(runs: Any, a: str, b: str, *, draws: int = NULL_DRAWS, seed: int, n_resamples: int = 1000,
            method: str = "the method") -> Null:
    """A/A null data: one method's runs split at random into two disjoint halves, standing in for ``a`` and ``b``.

    Args:
        runs: ``(S,)`` one value per seed, or ``(S, N)`` per seed and test image (then each half is a nested
            estimate over its seeds and the images, from one image resampling for all draws).
        a, b: The two quantities the halves replace.
        draws: Random splits. seed: Seeds the splits (and the resampling). n_resamples: Replicates.
        method: Names the method in the construction.

    Raises:
        InvalidInputError: fewer than four runs (two per half), an array of another shape.

    >>> null = aa_null([0.90, 0.91, 0.89, 0.92, 0.90, 0.91], "pe", "de", seed=0, draws=20)
    >>> len(null.draws), null.draws[0]["pe"].replicates.size
    (20, 3)
    """
    arr = _array(runs).astype(float)
    if arr.ndim not in (1, 2) or arr.shape[0] < 4:
        raise InvalidInputError(f"aa_null needs at least four runs of one method ((S,) or (S, N)), got shape "
                                f"{arr.shape}.")
    s = arr.shape[0]
    half = s // 2
    rng = np.random.default_rng([seed, 2])
    name = f"A/A: two disjoint halves of {method}'s {s} runs ({half} each) in place of {a} and {b}"
    if arr.ndim == 1:
        out = []
        for _ in range(int(draws)):
            order = rng.permutation(s)
            out.append({a: from_seeds(arr[order[:half]]), b: from_seeds(arr[order[half:2 * half]])})
        return Null(name, out)
    base = nested_bootstrap({"runs": arr}, seed=seed, n_resamples=n_resamples)["runs"]
    reps, _, means = base.parts
    out = []
    for _ in range(int(draws)):
        order = rng.permutation(s)
        draw = {}
        group = f"bootstrap-{next(_GROUPS)}"
        for name_, rows in ((a, order[:half]), (b, order[half:2 * half])):
            counts = resample_counts(half, n_resamples=reps.shape[1], seed=rng)
            draw[name_] = Estimate(float(means[rows].mean()), np.einsum("rs,sr->r", counts, reps[rows]) / half,
                                   base.source, "bootstrap", group, parts=(reps[rows], counts, means[rows]))
        out.append(draw)
    return Null(name, out)


def partition_null(values: Any, groups: Sequence[Any], *, draws: int = NULL_DRAWS, seed: int,
                   n_resamples: int = 1000, names: Mapping[str, str] | None = None) -> Null:
    """Null data for a comparison of groups of models: the models dealt into groups of the same sizes at random,
    each draw's group means with a bootstrap of the models within each group (percentile, as
    :func:`ensdiv.report.model_bootstrap`; one set of resampling counts serves every draw).

    Args:
        values: ``(n,)`` one number per model. groups: ``(n,)`` the group of each model.
        names: ``{group label: quantity name}`` when the claim names the quantities otherwise.

    >>> null = partition_null([0.9, 0.8, 0.85, 0.7, 0.72, 0.71], ["cnn"] * 3 + ["vit"] * 3, seed=0, draws=5)
    >>> sorted(null.draws[0]), null.draws[0]["cnn"].source
    (['cnn', 'vit'], 'models')
    """
    v = _array(values).astype(float).ravel()
    labels = [str(g) for g in groups]
    model_bootstrap(v, labels, n_resamples=2, seed=seed)  # the same checks of the input as this run's estimates
    rng = np.random.default_rng([seed, 3])
    names = dict(names or {})
    order = list(dict.fromkeys(labels))
    sizes_ = {k: labels.count(k) for k in order}
    counts = {k: resample_counts(n, n_resamples=n_resamples, seed=rng) / n for k, n in sizes_.items()}  # (R, n)
    out = []
    for _ in range(int(draws)):
        dealt = np.asarray(rng.permutation(labels))
        group = f"bootstrap-{next(_GROUPS)}"
        draw = {}
        for k in order:  # the models dealt to k, resampled within k (one set of counts for every draw)
            members = v[dealt == k]
            draw[names.get(k, k)] = Estimate(float(members.mean()), counts[k] @ members, "models", "bootstrap", group)
        out.append(draw)
    sizes = ", ".join(f"{labels.count(k)} {k}" for k in dict.fromkeys(labels))
    return Null(f"models dealt at random into groups of the same sizes ({sizes})", out)


def deal_within(labels: Sequence[Any], strata: Sequence[Any], rng: np.random.Generator) -> list:
    """``labels`` dealt at random within each stratum (the same labels in each, in a random order): null data for
    an effect of the labels that keeps what the strata carry (a training recipe the labels move with, the base
    model a variant belongs to). A stratum with one label value deals nothing.

    >>> out = deal_within(["a", "b", "c", "x", "y"], [0, 0, 0, 1, 1], np.random.default_rng(0))
    >>> sorted(out[:3]), sorted(out[3:])
    (['a', 'b', 'c'], ['x', 'y'])
    """
    lab, st = np.asarray(labels, dtype=object), np.asarray(strata, dtype=object)
    if lab.shape != st.shape:
        raise InvalidInputError(f"One stratum per label, got {lab.size} labels and {st.size} strata.")
    out = lab.copy()
    for s in dict.fromkeys(st.tolist()):
        idx = np.flatnonzero(st == s)
        out[idx] = lab[idx][rng.permutation(idx.size)]
    return out.tolist()
