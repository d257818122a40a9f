"""How often the book's rule decides: synthetic claims with a known effect, run through :func:`ensdiv.report.claim`.

Each *construction* is a check builder with the null helper and the replication the book's pages use for it,
fed synthetic data whose true effect is known, in standard errors (SE) of the check's statistic:

- ``"seed flips"``: two methods trained with the same ``S`` seeds (:func:`~ensdiv.report.from_seeds`), their
  difference tested by :func:`~ensdiv.report.greater` against :func:`~ensdiv.report.seed_flips`;
- ``"nested seed flips"``: the same, each seed's score measured on test images
  (:func:`~ensdiv.report.nested_bootstrap`, its rows swapped by :func:`~ensdiv.report.seed_flips`);
- ``"A/A halves"``: one method's ``S`` runs against ``S`` of the baseline's, the null two disjoint halves of
  ``2S`` baseline runs (:func:`~ensdiv.report.aa_null`);
- ``"model partitions"``: two groups of ``S`` models (:func:`~ensdiv.report.model_bootstrap`), the null the
  models dealt at random (:func:`~ensdiv.report.partition_null`);
- ``"permuted pairs"``: a correlation over ``S`` pairs (:func:`~ensdiv.report.correlation`), the null one series
  permuted;
- ``"non-inferiority"`` and ``"within"``: a claim that an effect is absent or small
  (:func:`~ensdiv.report.noninferior`, :func:`~ensdiv.report.within`) over ``S`` seeds, with the seeds' swaps as
  the data where the claim is true and the differences flipped around the margin as its null (:func:`_at_margin`,
  where it is just false); there "no effect" means the true difference sits at the margin (the claim
  just false), and the effect is measured from there towards the claim;
- ``"bound bootstrap"``: a claim that a quantity of ``S`` models (released, or named) passes a bound ("at least
  0.8 times"), its bootstrap over the models centred and moved to the bound (:func:`~ensdiv.report.centred_null`);
  "no effect" is the true value at the bound;
- ``"centred seed flips"``: the same claim of a bound over ``S`` seeds (:func:`~ensdiv.report.from_seeds`), the
  seeds' values centred and sign-flipped in every pattern, moved to the bound (:func:`~ensdiv.report.centred_null`
  for per-seed estimates: a one-sample sign-flip test), as design-diversity Sec. 4.3.1 and Table 2;
- ``"model-weighted slope"``: the slope of an ensemble's score on whether its two members are of two kinds, over
  every pair of ``S`` models, each model adding its own effect to every pair it joins; the bootstrap resamples
  the models (:func:`~ensdiv.report.member_weights`, a weighted least-squares fit per resample) and the null is
  that bootstrap centred at no slope (:func:`~ensdiv.report.centred_null`), as attack-similarity Figs. 3-4; the
  effect is in standard deviations of the bootstrap (the slope is linear in the scores, so adding it moves every
  replicate by as much);
- ``"centred non-inferiority"``: ``a`` no more than a margin below ``b`` over ``S`` models, paired by model, read
  against its own model bootstrap centred and moved to the margin (where the claim is just false), which is also
  the data where it is true, as attack-similarity Fig. G.1; "no effect" is the true difference at the margin;
- ``"within-recipe deal"``: ``S`` models of three classes trained under four recipes, the classes unevenly spread
  over the recipes and each recipe shifting the score (the confound); "the class explains the score better than
  the model's size" as a difference of adjusted R² (class as groups, log size as a line), its interval a bootstrap
  over the models and its null the classes dealt at random within each recipe (:func:`~ensdiv.report.deal_within`),
  which keeps the recipe's part of the class, so the check names it (``beyond=``), as design-diversity Table 1; the
  effect is the spacing of the class means in standard errors of a class mean;
- ``"image swap"``: two pairs' mean per-image score on the same ``S`` test images, its interval a bootstrap over
  the images and its null the two pairs' scores exchanged at random on every image, as training-methods Figs. 6-7.
- ``"highest of groups"``: one group of ``S`` models above the highest of four others (the maximum taken on every
  resample of :func:`~ensdiv.report.model_bootstrap` by :func:`~ensdiv.report.extreme_of`), read against its own
  bootstrap centred and moved to the bound (:func:`~ensdiv.report.centred_null`), as training-methods Table A and
  attack-similarity Tab. D.1 (a lowest of several, the same with the signs turned); "no effect" is the group tied
  with the top other group, the three others 3 SE of a group mean below it (the boundary where a null of dealt
  models sits below the bound).

:func:`simulate` returns the share of each verdict. ``tests/test_calibration.py`` holds the rule to its promise
(with no effect, "holds" and "does not hold" each at most 5 % within Monte-Carlo error; "holds" never rarer as
the effect grows) and ``notebooks/foundations/calibration.ipynb`` draws the power curves.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ensdiv.errors import InvalidInputError
from ensdiv.report.checks import VERDICTS, Check, above, greater, noninferior, within
from ensdiv.report.checks import correlated as _correlated
from ensdiv.report.claims import claim
from ensdiv.report.nulls import Null, aa_null, centred_null, deal_within, partition_null, seed_flips
from ensdiv.report.replication import extreme_of, member_weights, model_bootstrap, nested_bootstrap
from ensdiv.report.uncertainty import Estimate, correlation, from_seeds, resample_indices

__all__ = ["BOOK_CELLS", "CONSTRUCTIONS", "simulate"]

_Built = tuple[Check, Mapping[str, Any], str]


def _seeds(rng: np.random.Generator, s: int, effect: float, *, resamples: int) -> _Built:
    d = rng.normal(effect / np.sqrt(s), 1.0, s)  # per-seed differences, sd 1: SE of their mean 1/sqrt(S)
    base = rng.normal(0.0, 2.0, s)
    ours = {"a": from_seeds(base + d), "b": from_seeds(base)}
    return greater("a", "b", null=seed_flips(ours, "a", "b", seed=0), evidence="c/k"), ours, "trained methods"


_IMAGES, _IMAGE_SD = 200, 2.0  # 200 test images per seed, per-image scores of sd 2: image noise 0.2 per seed


def _nested(rng: np.random.Generator, s: int, effect: float, *, resamples: int) -> _Built:
    sd = np.sqrt(1.0 + 2 * _IMAGE_SD ** 2 / _IMAGES)  # sd of one seed's measured difference
    d = rng.normal(effect * sd / np.sqrt(s), 1.0, s)
    base = rng.normal(0.0, 2.0, s)
    rows = {"a": (base + d)[:, None] + rng.normal(0, _IMAGE_SD, (s, _IMAGES)),
            "b": base[:, None] + rng.normal(0, _IMAGE_SD, (s, _IMAGES))}
    ours = nested_bootstrap(rows, seed=int(rng.integers(1 << 30)), n_resamples=resamples, paired_rows=True)
    return greater("a", "b", null=seed_flips(ours, "a", "b", seed=0), evidence="c/k"), ours, "trained methods"


def _aa(rng: np.random.Generator, s: int, effect: float, *, resamples: int) -> _Built:
    a = rng.normal(effect * np.sqrt(2 / s), 1.0, s)  # two independent means of S runs: SE sqrt(2/S)
    base = rng.normal(0.0, 1.0, 2 * s)
    ours = {"a": from_seeds(a), "b": from_seeds(base[:s])}
    null = aa_null(base, "a", "b", seed=int(rng.integers(1 << 30)), method="the baseline")
    return greater("a", "b", null=null, evidence="c/k"), ours, "trained methods"


def _partitions(rng: np.random.Generator, s: int, effect: float, *, resamples: int) -> _Built:
    values = np.concatenate([rng.normal(effect * np.sqrt(2 / s), 1.0, s), rng.normal(0.0, 1.0, s)])
    groups = ["a"] * s + ["b"] * s
    seed = int(rng.integers(1 << 30))
    ours = model_bootstrap(values, groups, seed=seed, n_resamples=resamples)
    null = partition_null(values, groups, seed=seed, n_resamples=resamples)
    return greater("a", "b", null=null, evidence="c/k"), ours, "groups of models"


def _pairs(rng: np.random.Generator, s: int, effect: float, *, resamples: int) -> _Built:
    rho = float(np.tanh(effect / np.sqrt(s - 3)))  # Fisher's z has SE 1/sqrt(n - 3)
    x = rng.normal(size=s)
    y = rho * x + np.sqrt(1 - rho ** 2) * rng.normal(size=s)
    seed = int(rng.integers(1 << 30))
    ours = {"r": correlation(x, y, method="pearson", seed=seed, n_resamples=resamples, source="models")}
    zx, zy = (x - x.mean()) / x.std(), (y - y.mean()) / y.std()
    r_null = np.mean(zx[np.argsort(rng.random((200, s)), axis=1)] * zy, axis=1)  # Pearson's r, x permuted
    null = Null("one series permuted", [{"r": float(r)} for r in r_null])
    return _correlated("r", sign=1, null=null, evidence="c/k"), ours, "groups of models"


def _bound(rng: np.random.Generator, s: int, effect: float, *, resamples: int) -> _Built:
    bound = 0.8
    values = rng.normal(bound + effect / np.sqrt(s), 1.0, s)  # S models' values, sd 1: SE of their mean 1/sqrt(S)
    picks = resample_indices(s, n_resamples=resamples, seed=int(rng.integers(1 << 30)))
    ours = {"a": Estimate(float(values.mean()), values[picks].mean(axis=1), "models")}
    check = above("a", bound, null=centred_null(ours, "a", units=s), null_at=0.0, evidence="c/k")
    return check, ours, "groups of models"


def _seed_bound(rng: np.random.Generator, s: int, effect: float, *, resamples: int) -> _Built:
    bound = 0.8
    values = rng.normal(bound + effect / np.sqrt(s), 1.0, s)  # S seeds' values, sd 1: SE of their mean 1/sqrt(S)
    ours = {"a": from_seeds(values)}
    return above("a", bound, null=centred_null(ours, "a"), null_at=0.0, evidence="c/k"), ours, "trained methods"


def _weighted_slope(rng: np.random.Generator, s: int, effect: float, *, resamples: int) -> _Built:
    kind = np.arange(s) % 2  # two kinds of model, half each (architectures, clusters)
    u = rng.normal(0.0, 1.0, s)  # each model's own effect on every ensemble it joins
    pairs = np.array(list(itertools.combinations(range(s), 2)))
    x = (kind[pairs[:, 0]] != kind[pairs[:, 1]]).astype(float)  # 1: a pair of two kinds
    y = u[pairs].mean(axis=1) + rng.normal(0.0, 0.3, len(pairs))  # no effect of the kinds: slope 0
    w = member_weights(pairs.tolist(), n_boot=resamples, seed=int(rng.integers(1 << 30)))

    def slope(weights: np.ndarray, target: np.ndarray) -> np.ndarray:  # weighted least squares, one per row
        dx = x - (weights @ x / weights.sum(1))[:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            return (weights * dx) @ target / (weights * dx ** 2).sum(1)

    reps = slope(w, y)
    y = y + effect * float(np.nanstd(reps)) * x  # the slope is linear in y: every replicate moves by the effect
    ours = {"slope": Estimate(float(slope(np.ones((1, len(x))), y)[0]), slope(w, y), "models", "bootstrap", "c")}
    check = above("slope", 0.0, null=centred_null(ours, "slope", units=s), null_at=0.0, evidence="c/k")
    return check, ours, "groups of models"


def _centred_noninferior(rng: np.random.Generator, s: int, effect: float, *, resamples: int) -> _Built:
    margin = 1.0
    b = rng.normal(0.0, 1.0, s)  # S models' values, and their paired differences of sd 1: SE 1/sqrt(S)
    a = b + rng.normal(-margin + effect / np.sqrt(s), 1.0, s)
    picks = resample_indices(s, n_resamples=resamples, seed=int(rng.integers(1 << 30)))
    ours = {q: Estimate(float(v.mean()), v[picks].mean(axis=1), "models", "bootstrap", "c") for q, v in
            (("a", a), ("b", b))}
    null = centred_null(ours, "a", "b", units=s)
    check = noninferior("a", "b", margin=margin, null=null, truth=null, evidence="c/k")
    return check, ours, "groups of models"


def _adjusted_r2(y: np.ndarray, design: np.ndarray) -> np.ndarray:
    """Adjusted R² of least squares of each row of ``y`` ``(R, n)`` on ``design`` ``(R, n, p)`` (an intercept in it),
    all rows at once (a stacked pseudo-inverse: the least-squares fit, also when a resample lacks a class)."""
    fit = (design @ (np.linalg.pinv(design) @ y[..., None]))[..., 0]
    n, k = y.shape[-1], design.shape[-1] - 1
    ss_res = ((y - fit) ** 2).sum(-1)
    ss_tot = ((y - y.mean(-1, keepdims=True)) ** 2).sum(-1)
    return 1 - (ss_res / (n - k - 1)) / (ss_tot / (n - 1))


def _class_over_size(y: np.ndarray, cls: np.ndarray, size: np.ndarray) -> np.ndarray:
    """adj. R²(class as groups) - adj. R²(size as a line), per row of ``(R, n)`` arrays."""
    ones = np.ones_like(y)
    groups = np.stack([ones, *[(cls == c).astype(float) for c in range(1, 3)]], -1)
    line = np.stack([ones, size], -1)
    return _adjusted_r2(y, groups) - _adjusted_r2(y, line)


def _recipe_deal(rng: np.random.Generator, s: int, effect: float, *, resamples: int) -> _Built:
    recipe = np.arange(s) % 4
    cls = np.where(rng.random(s) < 0.6, recipe % 3, rng.integers(0, 3, s))  # classes leaning on the recipes
    size = rng.normal(0.0, 1.0, s) + 0.5 * cls
    se = 1.0 / np.sqrt(s / 3)  # noise sd 1: a class mean's standard error
    y = 1.5 * recipe + 0.5 * size + effect * se * cls + rng.normal(0.0, 1.0, s)
    picks = resample_indices(s, n_resamples=resamples, seed=int(rng.integers(1 << 30)))
    stat = _class_over_size(y[None], cls[None], size[None])[0]
    ours = {"d": Estimate(float(stat), _class_over_size(y[picks], cls[picks], size[picks]), "models", "bootstrap",
                          "c")}
    dealt = np.array([deal_within(cls.tolist(), recipe.tolist(), rng) for _ in range(200)])
    null = Null("classes dealt within recipes",
                [{"d": float(v)} for v in _class_over_size(np.broadcast_to(y, dealt.shape), dealt,
                                                           np.broadcast_to(size, dealt.shape))])
    check = above("d", 0.0, null=null, null_at=0.0, beyond="the recipe each class leans on", evidence="c/k")
    return check, ours, "groups of models"


def _image_swap(rng: np.random.Generator, s: int, effect: float, *, resamples: int) -> _Built:
    base = rng.normal(0.0, 2.0, s)  # per-image difficulty both pairs share
    d = rng.normal(effect / np.sqrt(s), 1.0, s)  # per-image differences, sd 1: SE of their mean 1/sqrt(S)
    a, b = base + d, base
    picks = resample_indices(s, n_resamples=resamples, seed=int(rng.integers(1 << 30)))
    ours = {q: Estimate(float(v.mean()), v[picks].mean(axis=1), "evaluation samples", "bootstrap", "c")
            for q, v in (("a", a), ("b", b))}
    swap = rng.random((200, s)) < 0.5
    diffs = np.where(swap, -d, d).mean(axis=1)  # a and b exchanged on the swapped images
    null = Null("the two exchanged at random on every image", [{"a": float(v), "b": 0.0} for v in diffs])
    return greater("a", "b", null=null, evidence="c/k"), ours, "these models"


def _absence(kind: str) -> Callable[..., _Built]:
    def build(rng: np.random.Generator, s: int, effect: float, *, resamples: int) -> _Built:
        margin = 1.0
        se = 1.0 / np.sqrt(s)  # per-seed differences of sd 1
        d = rng.normal(-margin + effect * se if kind == "non-inferiority" else margin - effect * se, 1.0, s)
        base = rng.normal(0.0, 2.0, s)
        ours = {"a": from_seeds(base + d), "b": from_seeds(base)}
        flips = seed_flips({"a": from_seeds(base + d - d.mean()), "b": ours["b"]}, "a", "b", seed=0)
        check = noninferior("a", "b", margin=margin, truth=flips, evidence="c/k") if kind == "non-inferiority" \
            else within("a", "b", abs=margin, truth=flips, evidence="c/k")
        return check, ours, "trained methods"

    return build


def _at_margin(check: Check, ours: Mapping[str, Any]) -> Null:
    """The null of an absence claim, data where it is just false: the seeds' differences, centred and
    sign-flipped, around the margin (the region's bound; the absence builders' tolerance is 1, so the scaled bound
    of :func:`~ensdiv.report.within` is the margin too)."""
    a, b = (np.asarray(ours[q].replicates, dtype=float) for q in check.needs)
    d = a - b - (a - b).mean()
    edge = check.region[1]
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
    return Null("the seeds' differences sign-flipped around the margin",
                [{check.needs[0]: from_seeds(b + edge + flip * d)} for flip in signs], exact=True,
                replicates=d.size)


def _highest(rng: np.random.Generator, s: int, effect: float, *, resamples: int) -> _Built:
    means = np.array([effect * np.sqrt(2 / s), 0.0, -3 / np.sqrt(s), -3 / np.sqrt(s), -3 / np.sqrt(s)])
    values = (means[:, None] + rng.normal(0.0, 1.0, (5, s))).ravel()  # sd 1: SE of a group mean 1/sqrt(S)
    found = model_bootstrap(values, [g for g in "abcde" for _ in range(s)], seed=int(rng.integers(1 << 30)),
                            n_resamples=resamples)
    ours = {"a": found["a"], "highest": extreme_of(found, list("bcde"))}
    check = greater("a", "highest", null=centred_null(ours, "a", "highest", units=s), evidence="c/k")
    return check, ours, "groups of models"


#: The constructions the book's pages use: ``{name: builder}`` (see the module's text).
CONSTRUCTIONS: dict[str, Callable[..., _Built]] = {
    "seed flips": _seeds, "nested seed flips": _nested, "A/A halves": _aa, "model partitions": _partitions,
    "permuted pairs": _pairs, "non-inferiority": _absence("non-inferiority"), "within": _absence("within"),
    "bound bootstrap": _bound, "centred seed flips": _seed_bound, "model-weighted slope": _weighted_slope,
    "centred non-inferiority": _centred_noninferior, "within-recipe deal": _recipe_deal, "image swap": _image_swap,
    "highest of groups": _highest,
}


#: ``(construction, replicates)`` at the counts the book's pages use: seed flips over the 3, 5, 6, 8 and 10 seeds of
#: the presets (three can never reach 5 %: the check is not counted), nested estimates over 5 and 6 seeds, A/A
#: halves of 12 runs, groups of 3 and 6 models, correlations over 12 and 25 models, absence claims over 6
#: seeds, bounds over 15 models (attack-similarity Fig. G.1's zoo) and 69 (Fig. 1's released models) and over 6
#: seeds (design-diversity Sec. 4.3.1 and Table 2), slopes over
#: ensembles drawn from 8 and 27 models (attack-similarity Figs. 3-4), and a non-inferiority over 15 models read
#: against its own centred bootstrap (Fig. G.1), design-diversity Table 1's 18 models dealt within recipes, and
#: training-methods Figs. 6-7's pairs compared on 1,000 test images, and a group above the highest of four others
#: (training-methods Table A's categories, three to six models; attack-similarity Tab. D.1's eight variants),
#: the highest taken by :func:`~ensdiv.report.extreme_of`.
BOOK_CELLS: tuple[tuple[str, int], ...] = (
    ("seed flips", 3), ("seed flips", 5), ("seed flips", 6), ("seed flips", 8), ("seed flips", 10),
    ("nested seed flips", 5), ("nested seed flips", 6), ("A/A halves", 6), ("model partitions", 3),
    ("model partitions", 6), ("permuted pairs", 12), ("permuted pairs", 25), ("non-inferiority", 6), ("within", 6),
    ("bound bootstrap", 15), ("bound bootstrap", 69), ("centred seed flips", 6), ("model-weighted slope", 8),
    ("model-weighted slope", 27), ("centred non-inferiority", 15), ("within-recipe deal", 18), ("image swap", 1000),
    ("highest of groups", 5), ("highest of groups", 8),
)


def simulate(construction: str, *, replicates: int, effect: float, claims: int, seed: int,
             resamples: int = 200) -> dict[str, float]:
    """The share of each verdict over ``claims`` synthetic claims of one construction.

    Args:
        construction: One of :data:`CONSTRUCTIONS`.
        replicates: Seeds (or models per group, or pairs) per claim, as the pages use them.
        effect: The true effect in standard errors of the check's statistic (0: none; for an absence claim, 0
            is the margin and ``k`` is ``k`` SE inside it).
        claims: How many claims. seed: Seeds the data. resamples: Bootstrap replicates of each estimate.

    Returns:
        ``{verdict: share}`` over :data:`~ensdiv.report.VERDICTS`, and ``"claims"``.

    Raises:
        InvalidInputError: an unknown construction, fewer than one claim.

    >>> rates = simulate("seed flips", replicates=6, effect=30.0, claims=5, seed=0)
    >>> rates["holds"], rates["claims"]
    (1.0, 5)
    """
    if construction not in CONSTRUCTIONS:
        raise InvalidInputError(f"Unknown construction {construction!r}; valid: {', '.join(CONSTRUCTIONS)}.")
    if claims < 1:
        raise InvalidInputError(f"simulate needs at least one claim, got {claims!r}.")
    rng = np.random.default_rng(seed)
    build = CONSTRUCTIONS[construction]
    counts = dict.fromkeys(VERDICTS, 0)
    for _ in range(claims):
        check, ours, unit = build(rng, replicates, effect, resamples=resamples)
        if check.absence and check.null is None:
            check = check.with_(null=_at_margin(check, ours))
        made = claim(paper="foundations", item="Calibration", claim=f"{construction}: a beats b.", checks=[check],
                     ours=ours, unit=unit, scale="cpu", write=False)
        counts[made.verdict] += 1
    return {**{k: n / claims for k, n in counts.items()}, "claims": claims}
