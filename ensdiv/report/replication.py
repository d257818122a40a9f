"""The unit of replication: what a claim is about, and bootstraps that resample it.

A claim about *trained methods* ("Packed-Ensembles is more accurate than a single model") is about what
another training run would give; a claim about *groups of models* ("Transformers are more robust than CNNs")
about what other models of each group would give. An interval over the test images alone leaves that variance
out: on 27 Nov 2026 the zoo's base ResNet recipe trained with seeds 0–3, compared pair by pair with a paired
bootstrap over the test images, gave 2 of 6 pairs of the *same* recipe as "different". So every claim states its
unit (:data:`UNITS`), every estimate says what it resampled (its ``source``), and a check whose interval does not
resample the claim's unit is *inconclusive*, shown as "seed variance not covered" (or models, …).

- :func:`nested_bootstrap` resamples rows (seeds of a method, models of a group) and the test images within
  them: the variance a method's or a group's mean has over both.
- :func:`model_bootstrap` resamples models within each group, from one number per model.
- :func:`member_weights` resamples the models that drawn ensembles share: an ensemble weighs as often as its
  members were drawn (a statistic over ensembles of a fixed pool then has an interval over the pool's models).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

from ensdiv.errors import InvalidInputError
from ensdiv.report.uncertainty import _GROUPS, Estimate, _array, paired_bootstrap, resample_counts

__all__ = ["UNITS", "covers", "extreme_of", "member_weights", "model_bootstrap", "nested_bootstrap", "uncovered"]

#: What a claim can be about, and the estimate sources whose intervals resample it. A claim about one released
#: artefact (the authors' file, a fixed set of measurements) takes any source, and point values too. An interval
#: over "ensemble members" (which members, or which sets of members, a fixed pool's ensembles hold) serves claims
#: about these models only: a claim about groups of models reads one over the models (:func:`member_weights`).
UNITS: dict[str, tuple[str, ...]] = {
    "trained methods": ("training seeds", "seeds × test images"),
    "groups of models": ("models", "models × test images"),
    "these models": ("evaluation samples", "training seeds", "seeds × test images", "models",
                     "models × test images", "ensemble members"),
    "timings": ("timing repeats",),
    "released artefact": (),
}
_WHAT = {"trained methods": "seed", "groups of models": "model", "these models": "test-set", "timings": "timing"}


def covers(unit: str, source: str | None) -> bool:
    """Whether an interval over ``source`` (None: point values, ``"a + b"``: several) resamples ``unit``.

    >>> covers("trained methods", "seeds × test images"), covers("trained methods", "evaluation samples")
    (True, False)
    >>> covers("released artefact", None), covers("groups of models", "models + evaluation samples")
    (True, False)
    """
    if unit not in UNITS:
        raise InvalidInputError(f"Unknown unit {unit!r}; a claim is about one of: {', '.join(UNITS)}.")
    if unit == "released artefact":
        return True
    return source is not None and all(s in UNITS[unit] for s in source.split(" + "))


def uncovered(unit: str) -> str:
    """What a check misses when its interval does not resample ``unit``: ``"seed variance not covered"``."""
    return f"{_WHAT.get(unit, unit)} variance not covered"


def member_weights(members: Sequence[Sequence[Any]], *, n_boot: int, seed: Any,
                   strata: Mapping[Any, Any] | None = None) -> np.ndarray:
    """The weight of every ensemble in each of ``n_boot`` bootstrap resamples of the models the ensembles are
    built from: the product of its members' draw counts. A statistic of the ensembles weighted so (a weighted
    mean, a weighted least-squares fit) has replicates over the *models*, as if every ensemble had been rebuilt
    from the resampled pool (an ensemble with a member not drawn weighs 0; one whose member was drawn twice, 2).
    Members common to every ensemble are fixed (weight one); ``strata`` (``{member: stratum}``) resamples the
    members within each stratum, so every stratum keeps its size.

    Args:
        members: The member ids of each ensemble (any sortable ids of one pool).
        n_boot: Resamples. seed: Seeds the resampling (as :func:`resample_counts`).
        strata: Optional stratum of every sampled member.

    Returns:
        ``(n_boot, E)`` weights; NaN everywhere when fewer than two members can be resampled.

    Raises:
        InvalidInputError: No ensembles, or a sampled member without a stratum.

    >>> w = member_weights([(0, 1), (0, 2), (1, 2)], n_boot=2000, seed=0)
    >>> w.shape, float(w.mean().round(2))  # E[c_i c_j] of a multinomial(3, 1/3): 3 · 2 · (1/3)² = 2/3
    ((2000, 3), 0.67)
    >>> member_weights([("a", "x"), ("a", "y")], n_boot=3, seed=0, strata={"x": 1, "y": 1}).sum(1).tolist()
    [2.0, 2.0, 2.0]
    """
    groups = [tuple(g) for g in members]
    if not groups:
        raise InvalidInputError("member_weights needs at least one ensemble.")
    fixed = set.intersection(*(set(g) for g in groups))
    ids = sorted({m for g in groups for m in g} - fixed)
    if len(ids) < 2:  # nothing to resample (every member shared): the statistic has no interval
        return np.full((int(n_boot), len(groups)), np.nan)
    if strata is None:
        counts = resample_counts(len(ids), n_resamples=int(n_boot), seed=seed)  # (B, K)
    else:
        missing = [m for m in ids if m not in strata]
        if missing:
            raise InvalidInputError(f"member_weights has no stratum for the members {missing[:3]}.")
        rng = np.random.default_rng(seed)
        counts = np.zeros((int(n_boot), len(ids)))
        for s in dict.fromkeys(strata[m] for m in ids):
            cols = [i for i, m in enumerate(ids) if strata[m] == s]
            counts[:, cols] = resample_counts(len(cols), n_resamples=int(n_boot), seed=rng)
    position = {m: i for i, m in enumerate(ids)}
    w = np.ones((int(n_boot), len(groups)))
    for e, g in enumerate(groups):
        for m in g:
            if m not in fixed:
                w[:, e] *= counts[:, position[m]]
    return w


def nested_bootstrap(rows: Mapping[str, Any], *, unit: str = "seeds", n_resamples: int = 1000, seed: int,
                     paired_rows: bool = False) -> dict[str, Estimate]:
    """Means over rows and test images, with replicates that resample both (a two-stage bootstrap).

    Each quantity is an ``(S, N)`` array: one row per seed of a method (or per model of a group), one column
    per test image (a per-image score: correctness, NLL). Its value is the mean over rows of the row's mean over
    images. A replicate resamples the images once for every quantity of the call (``scipy.stats.bootstrap``
    over the image indices: quantities stay paired by image) and the rows of each quantity with replacement on
    their own (independent runs), or with one row resample for all when ``paired_rows`` (seed ``s`` of every
    method shares its data order and initialisation).

    Args:
        rows: ``{name: (S, N) array}``; every array has the same ``N`` (torch tensors are accepted).
        unit: ``"seeds"`` (rows are training runs) or ``"models"`` (rows are models of a group).
        n_resamples: Replicates. seed: Seeds the resampling.
        paired_rows: Resample the rows of every quantity together (needs equal ``S``).

    Returns:
        ``{name: Estimate}`` with source ``"seeds × test images"`` or ``"models × test images"``, in one group
        (paired replicate by replicate); ``parts`` keeps the per-row image replicates and row counts so that a
        null swapping rows (:func:`ensdiv.report.seed_flips`) needs no new resampling.

    Raises:
        InvalidInputError: no quantity, an array that is not 2-D, different ``N``, a row count below two, an
            unknown unit, ``paired_rows`` with different row counts.

    Shape:
        each array: ``(S, N)``.

    >>> rng = np.random.default_rng(0)
    >>> est = nested_bootstrap({"a": rng.random((3, 50)) < 0.9, "b": rng.random((4, 50)) < 0.8}, seed=0,
    ...                        n_resamples=200)
    >>> est["a"].source, est["a"].replicates.shape, est["a"].interval()[0] < est["a"].value
    ('seeds × test images', (200,), True)
    """
    if unit not in ("seeds", "models"):
        raise InvalidInputError(f"nested_bootstrap's unit must be 'seeds' or 'models', got {unit!r}.")
    if not rows:
        raise InvalidInputError("nested_bootstrap needs at least one quantity.")
    arrays = {k: _array(v).astype(float) for k, v in rows.items()}
    for k, a in arrays.items():
        if a.ndim != 2:
            raise InvalidInputError(f"Quantity {k!r} must be an (S, N) array of rows by test images, got shape "
                                    f"{a.shape}.")
        if a.shape[0] < 2:
            raise InvalidInputError(f"Quantity {k!r} has {a.shape[0]} row(s); resampling rows needs at least two.")
    if len({a.shape[1] for a in arrays.values()}) != 1:
        raise InvalidInputError("nested_bootstrap needs the same test images (N) for every quantity, got "
                                f"{sorted({a.shape[1] for a in arrays.values()})}.")
    if paired_rows and len({a.shape[0] for a in arrays.values()}) != 1:
        raise InvalidInputError("paired_rows needs as many rows for every quantity.")
    # stage 1: every row's mean over one shared resampling of the images (one scipy call for all rows)
    flat = {f"{k}\x00{s}": a[s] for k, a in arrays.items() for s in range(a.shape[0])}
    per_row = paired_bootstrap(flat, n_resamples=n_resamples, seed=seed)
    rng = np.random.default_rng([seed, 1])
    shared = None
    out = {}
    group = f"bootstrap-{next(_GROUPS)}"
    source = f"{unit} × test images"
    for k, a in arrays.items():
        s = a.shape[0]
        reps = np.stack([per_row[f"{k}\x00{i}"].replicates for i in range(s)])  # (S, R)
        if paired_rows:
            shared = shared if shared is not None else resample_counts(s, n_resamples=n_resamples, seed=rng)
            counts = shared
        else:
            counts = resample_counts(s, n_resamples=n_resamples, seed=rng)  # (R, S)
        value = float(a.mean(axis=1).mean())
        out[k] = Estimate(value, np.einsum("rs,sr->r", counts, reps) / s, source, "bootstrap", group,
                          parts=(reps, counts, a.mean(axis=1)))
    return out


def model_bootstrap(values: Any, groups: Sequence[Any], *, n_resamples: int = 1000, seed: int
                    ) -> dict[str, Estimate]:
    """The mean of one number per model within each group, with models resampled within their group.

    For claims about groups of models ("Transformers are more robust than CNNs"): the interval covers which
    models of each group happen to be in the zoo (``scipy.stats.bootstrap`` over each group's models on its
    own).

    Args:
        values: ``(n,)`` one number per model (its accuracy, its robustness).
        groups: ``(n,)`` the group of each model (a label).
        n_resamples: Replicates. seed: Seeds the resampling.

    Returns:
        ``{str(label): Estimate}`` with source ``"models"``, one group (replicates of two groups are
        independent draws, combined replicate by replicate).

    Raises:
        InvalidInputError: lengths that differ, a group with fewer than two models, a non-finite value.

    >>> est = model_bootstrap([0.9, 0.8, 0.85, 0.7, 0.72, 0.71], ["cnn"] * 3 + ["vit"] * 3, seed=0)
    >>> round(est["cnn"].value, 3), est["vit"].source
    (0.85, 'models')
    """
    v = _array(values).astype(float).ravel()
    labels = [str(g) for g in groups]
    if v.size != len(labels):
        raise InvalidInputError(f"model_bootstrap needs one group per value, got {v.size} values and {len(labels)} "
                                "groups.")
    if not np.all(np.isfinite(v)):
        raise InvalidInputError("model_bootstrap needs finite values; leave out the models without one.")
    names = list(dict.fromkeys(labels))
    members = [v[[i for i, g in enumerate(labels) if g == name]] for name in names]
    small = [n for n, m in zip(names, members, strict=True) if m.size < 2]
    if small:
        raise InvalidInputError(f"Group {small[0]!r} has fewer than two models; a model bootstrap needs two.")
    res = stats.bootstrap(tuple(members), lambda *xs, axis=-1: np.stack([x.mean(axis=axis) for x in xs]),
                          vectorized=True, paired=False, n_resamples=n_resamples, method="percentile",
                          rng=np.random.default_rng(seed))
    dist = np.asarray(res.bootstrap_distribution).reshape(len(names), -1)
    group = f"bootstrap-{next(_GROUPS)}"
    return {name: Estimate(float(m.mean()), dist[i], "models", "bootstrap", group)
            for i, (name, m) in enumerate(zip(names, members, strict=True))}


def extreme_of(estimates: Mapping[str, Estimate], names: Sequence[str], *, lowest: bool = False) -> Estimate:
    """The highest (``lowest``: the lowest) of several estimates of one paired bootstrap, taken replicate by
    replicate (which one is highest may change between resamples), its replicates moved so that their mean is the
    estimate.

    The bootstrap of a maximum sits above the sample's maximum (each resample picks whichever group it happens to
    raise), so a null made of these replicates centred on the estimate (:func:`~ensdiv.report.centred_null`)
    would sit below the claim's bound: over 400 claims of a group tied with the highest of four others (five
    models each, ``ensdiv.report.calibration``'s "highest of groups"), 7.2 % were called *holds* unmoved and 4.5 %
    moved, at the same power. NaN when any of them is (a group with too few models).

    Shape:
        Each estimate's replicates ``(R,)``; the result's too.

    >>> est = {"a": Estimate(1.0, np.array([1.0, 2.0, 0.0]), "models", group="g"),
    ...        "b": Estimate(0.5, np.array([2.0, 0.0, 1.0]), "models", group="g")}
    >>> top = extreme_of(est, ["a", "b"])  # replicates max 2, 2, 1 (mean 5/3) moved to mean 1
    >>> top.value, [round(float(x), 3) for x in top.replicates], top.group
    (1.0, [1.333, 1.333, 0.333], 'g')
    >>> [round(float(x), 3) for x in extreme_of(est, ["a", "b"], lowest=True).replicates]  # min 1, 0, 0 (1/3) to 0.5
    [1.167, 0.167, 0.167]
    """
    picked = [estimates[n] for n in names]
    if not picked or any(e.replicates is None for e in picked):
        raise InvalidInputError("extreme_of needs bootstrap estimates with their replicates.")
    if len({e.group for e in picked}) != 1 or picked[0].group is None:
        raise InvalidInputError(f"extreme_of needs estimates of one paired bootstrap; {list(names)} are not.")
    reps = np.stack([np.asarray(e.replicates, dtype=float) for e in picked])
    values = np.array([e.value for e in picked], dtype=float)
    if not np.all(np.isfinite(values)) or not np.all(np.isfinite(reps)):
        return Estimate(float("nan"), np.full(reps.shape[1], np.nan), picked[0].source, "bootstrap", picked[0].group)
    value = float(values.min() if lowest else values.max())
    ext = reps.min(axis=0) if lowest else reps.max(axis=0)
    return Estimate(value, ext - (ext.mean() - value), picked[0].source, "bootstrap", picked[0].group)
