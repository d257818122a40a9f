"""Seeds as the unit of the SED chapter's method comparisons (#49): per-seed, per-image quantities, their
nested bootstrap over seeds × images, per-seed AUROCs, the seed-flip null and the gates every diversity and
detection check depends on.

Every compared method is trained with the preset's ``seeds`` (run ``s`` of a method:
:func:`ensdiv.chapters.sed.method_recipes` with ``seed=s``). A quantity that is a mean over test images
(#unique, correctness, member accuracy) is an ``(S, N)`` array, one row per run, and its interval resamples the
runs and the images (:func:`ensdiv.report.nested_bootstrap`); a quantity that is not a per-image mean (an
AUROC, the best member's accuracy) is one value per run (:func:`ensdiv.report.from_seeds`). The null of a
comparison of two methods swaps them within each seed (:func:`ensdiv.report.seed_flips`): with ``S`` seeds the
observed pattern is one of ``2**S``, so three seeds can never count and five can.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping

import numpy as np
import torch
from torch import Tensor

import ensdiv as ed
from ensdiv import metrics as mt
from ensdiv.chapters import sed as _sed  # the package importing this module: its names are read at call time
from ensdiv.errors import InvalidInputError

__all__ = ["seeds", "per_seed", "nested", "seed_values", "seed_auroc", "flips", "member_gate", "chance_gate",
           "member_correct", "unique_per_image", "correct_per_image", "subset_means", "swap_null",
           "exponent_null", "member_movement", "movement_rows", "trained_gate"]


def _ch():
    """The chapter's package (which imports this module; read at call time)."""
    return _sed


def seeds(cfg: Mapping) -> list[int]:
    """The training runs of every compared method (``cfg["seeds"]``)."""
    return [int(s) for s in cfg["seeds"]]


def member_correct(logits: Tensor, labels: Tensor) -> np.ndarray:
    """Per image, the share of members that are right (%): ``(N,)``; its mean is the mean member accuracy.

    >>> import torch
    >>> member_correct(torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]]), torch.tensor([0])).tolist()
    [50.0]
    """
    return 100 * (logits.argmax(-1) == labels).double().mean(0).numpy()


def unique_per_image(logits: Tensor, labels: Tensor | None = None) -> np.ndarray:
    """Per image, how many distinct classes the members predict (#unique): ``(N,)``."""
    return mt.num_unique(logits.argmax(-1)).double().numpy()


def correct_per_image(logits: Tensor, labels: Tensor) -> np.ndarray:
    """Per image, whether the prediction ensemble (the members' mean logits) is right (0 or 100): ``(N,)``."""
    return 100 * (logits.mean(0).argmax(-1) == labels).double().numpy()


def per_seed(cfg: Mapping, method: str, role: str, fn: Callable[[Tensor, Tensor], np.ndarray], *,
             members: int | None = None, lam: float | None = None) -> np.ndarray:
    """``fn(member logits, labels)`` of every run of ``method`` on the set of ``role``: ``(S, N)``."""
    ch = _ch()
    labels = ch.set_features(cfg, role)[1]
    return np.stack([np.asarray(fn(ch.ensemble_logits(cfg, method, role, members, lam=lam, seed=s), labels),
                                dtype=float) for s in seeds(cfg)])


def nested(cfg: Mapping, rows: Mapping[str, np.ndarray]) -> dict[str, ed.report.Estimate]:
    """Means over runs and images with a nested bootstrap over both (:func:`ensdiv.report.nested_bootstrap`,
    the page's ``n_resamples`` and ``seed``); a set with fewer than two images gives missing estimates."""
    if min(np.asarray(v).shape[1] for v in rows.values()) < 2:
        return {k: _ch().missing_estimate() for k in rows}
    return ed.report.nested_bootstrap(dict(rows), n_resamples=int(cfg["n_resamples"]), seed=int(cfg["seed"]))


def seed_values(values) -> ed.report.Estimate:
    """One value per run (in seed order) as an estimate over the seeds."""
    return ed.report.from_seeds(np.asarray(values, dtype=float))


def seed_auroc(cfg: Mapping, method: str, role: str, kind: str, *, members: int | None = None,
               lam: float | None = None) -> ed.report.Estimate:
    """The detection AUROC of ``kind`` (``"BMA"`` or ``"PDS"``, the set of ``role`` against the clean test
    set) of every run of ``method``, as an estimate over the seeds; NaN where a set is empty."""
    ch = _ch()
    out = []
    for s in seeds(cfg):
        id_s = ch.ood_score(ch.ensemble_logits(cfg, method, "val", members, lam=lam, seed=s), kind)
        ood_s = ch.ood_score(ch.ensemble_logits(cfg, method, role, members, lam=lam, seed=s), kind)
        out.append(ch.auroc_of(*ch.pooled(id_s, ood_s)) if len(id_s) and len(ood_s) else math.nan)
    return seed_values(out)


def flips(cfg: Mapping, values: Mapping[str, ed.report.Estimate], a: str, b: str) -> ed.report.Null:
    """The seed-flip null of ``a`` against ``b``: the two methods swapped at random within each seed (exact over
    every pattern up to ten seeds)."""
    return ed.report.seed_flips(values, a, b, seed=int(cfg["seed"]))


def member_gate(a: str, b: str, *, name: str) -> ed.report.Check:
    """The member-quality gate: the mean member accuracy ``a`` is at most :data:`MEMBER_MARGIN` points below
    the reference's ``b`` (its interval wholly above ``-margin``). A gate, never counted: a run whose members
    collapsed makes its diversity and detection checks *not meaningful*."""
    return ed.report.Check(name, needs=(a, b), statistic=lambda v: v[a] - v[b],
                           region=(">", -_ch().MEMBER_MARGIN))


def chance_gate(a: str, *, name: str) -> ed.report.Check:
    """The detector gate: the AUROC ``a`` lies above chance (0.5) — a comparison of detectors at chance says
    nothing about detection."""
    return ed.report.Check(name, needs=(a,), statistic=lambda v: v[a], region=(">", 0.5))


def _flat(module: torch.nn.Module) -> Tensor:
    return torch.cat([p.detach().double().flatten() for p in module.parameters()])


def member_movement(cfg: Mapping, method: str, *, seed: int = 0, members: int | None = None) -> dict[str, float]:
    """How far training moved the members of run ``seed`` of ``method`` (a method whose members share their start,
    :data:`~ensdiv.chapters.sed.SHARED_START`): ``moved``, a member's root-mean-square weight change from the shared
    start (the backbone's own head, :func:`~ensdiv.chapters.sed.start_head`), averaged over the members, and
    ``spread``, the root-mean-square weight difference of two members, averaged over the pairs (0: one function).

    Raises:
        InvalidInputError: a method whose members start from distinct random heads (their distances from one
            another measure the initialisation, not training).
    """
    ch = _ch()
    if method not in ch.SHARED_START:
        raise InvalidInputError(
            f"{method!r} starts its members from distinct random heads; their weight distances measure the "
            f"initialisation. Member movement is defined for the shared-start methods: {', '.join(ch.SHARED_START)}.")
    start = _flat(ch.start_head(cfg))
    heads = [h for r in ch.method_recipes(cfg, method, members, seed=seed) for h in ch._heads_of(r)]
    flat = torch.stack([_flat(h) for h in heads])
    rms = lambda d: float(d.pow(2).mean().sqrt())  # noqa: E731
    pairs = [rms(flat[i] - flat[j]) for i, j in itertools.combinations(range(len(flat)), 2)]
    return {"moved": float(np.mean([rms(w - start) for w in flat])),
            "spread": float(np.mean(pairs)) if pairs else 0.0}


def movement_rows(cfg: Mapping, methods: Mapping[str, str]) -> dict[str, ed.report.Estimate]:
    """:func:`member_movement` of every run of each method (``{label: method}``) as estimates over the seeds:
    ``{"weight moved <label>": Estimate, "weight spread <label>": Estimate}``."""
    runs = {label: [member_movement(cfg, m, seed=s) for s in seeds(cfg)] for label, m in methods.items()}
    return {f"weight {k} {label}": seed_values([r[k] for r in rs]) for label, rs in runs.items()
            for k in ("moved", "spread")}


def trained_gate(a: str, b: str, *, share: float, name: str) -> ed.report.Check:
    """The premise that a method's members trained: their weight change from the shared start ``a`` is at least
    ``share`` times the reference's ``b`` (the deep ensemble's), its interval over the seeds wholly above 0. SED
    trains |I| of its M members per step, so ``share`` = |I|/M asks each of its updates to move a member as far as
    a deep-ensemble update does; a config whose step settings leave its members near the start fails it. A gate,
    never counted: members that did not train cannot test what the method does."""
    return ed.report.Check(name, needs=(a, b), statistic=lambda v: v[a] - share * v[b], region=(">", 0.0))


_SUBSETS = itertools.count()


def subset_means(values, masks: Mapping[str, np.ndarray], *, n_resamples: int,
                 rng: np.random.Generator) -> dict[str, ed.report.Estimate]:
    """The mean of ``values`` ``(N,)`` over each boolean mask ``(N,)``, with a paired bootstrap over the images
    of the masks' union (one resampling for every mask: the estimates are combined replicate by replicate).

    >>> est = subset_means(np.array([0.0, 1.0, 1.0, 0.0]), {"a": np.array([1, 1, 0, 0], bool)}, n_resamples=50,
    ...                    rng=np.random.default_rng(0))
    >>> est["a"].value, est["a"].replicates.shape
    (0.5, (50,))
    """
    values = np.asarray(values, dtype=float)
    union = np.logical_or.reduce([np.asarray(m, bool) for m in masks.values()])
    idx = np.flatnonzero(union)
    if idx.size < 2:
        return {k: _ch().missing_estimate() for k in masks}
    draw = ed.report.resample_indices(idx.size, n_resamples=int(n_resamples), seed=rng)
    v = values[idx][draw]
    group = f"subsets-{next(_SUBSETS)}"
    out = {}
    for name, mask in masks.items():
        w = np.asarray(mask, bool)[idx][draw]
        with np.errstate(invalid="ignore", divide="ignore"):
            reps = (v * w).sum(1) / w.sum(1)
        out[name] = ed.report.Estimate(float(values[np.asarray(mask, bool)].mean()), reps, "evaluation samples",
                                       "bootstrap", group)
    return out


def swap_null(values, mask_a: np.ndarray, mask_b: np.ndarray, a: str, b: str, *, draws: int, n_resamples: int,
              seed: int) -> ed.report.Null:
    """Null data for "the images of subset ``a`` differ from those of subset ``b``": every image in exactly one
    of the two subsets is dealt to either at random (images in both stay in both), and each draw's means get
    their own paired bootstrap (:func:`subset_means`)."""
    mask_a, mask_b = np.asarray(mask_a, bool), np.asarray(mask_b, bool)
    both, either = mask_a & mask_b, mask_a ^ mask_b

    def make(rng: np.random.Generator) -> dict[str, ed.report.Estimate]:
        flip = rng.random(mask_a.size) < 0.5
        new_a = both | (either & np.where(flip, mask_b, mask_a))
        new_b = both | (either & np.where(flip, mask_a, mask_b))
        return subset_means(values, {a: new_a, b: new_b}, n_resamples=n_resamples, rng=rng)

    return ed.report.null_draws(f"the images in only one of the two subsets ({a}; {b}) dealt to either at random",
                                make, draws=draws, seed=seed)


def exponent_null(per_repeat: Mapping[str, list[tuple[np.ndarray, np.ndarray]]], *, k: float, draws: int,
                  seed: int) -> ed.report.Null:
    """Null data for "the step time grows faster than M^k": every repeat's log-times replaced by a line of slope
    ``k`` in log M through its own fit, plus its own residuals dealt to the sizes at random; the exponent refitted
    on each repeat (:func:`ensdiv.chapters.sed.fit_exponent`) and kept as an estimate over the repeats.

    Args:
        per_repeat: ``{quantity: [(sizes, seconds), ...]}``, one pair per timing repeat.
        k: The exponent of the null (1: the cost of a step that trains every member).
    """
    fit = _ch().fit_exponent

    def make(rng: np.random.Generator) -> dict[str, ed.report.Estimate]:
        out = {}
        for name, reps in per_repeat.items():
            ks = []
            for sizes, secs in reps:
                x, y = np.log(np.asarray(sizes, float)), np.log(np.asarray(secs, float))
                slope, icpt = np.polyfit(x, y, 1)
                resid = y - (icpt + slope * x)
                ks.append(fit(np.asarray(sizes, float), np.exp(icpt + k * x + rng.permutation(resid))))
            out[name] = ed.report.from_seeds(ks, source="timing repeats")
        return out

    return ed.report.null_draws(f"step times growing as M^{k:g} through each repeat's own fit, its residuals dealt "
                                "to the sizes at random", make, draws=draws, seed=seed)
