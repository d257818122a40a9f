"""Every compared quantity of a Packed-Ensembles claim as an estimate: over training runs, or a paired bootstrap."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

import ensdiv as ed
from ensdiv import metrics as mt
from ensdiv.chapters.packed_ensembles.methods import (
    METHODS,
    OOD_CRITERIA,
    eval_set,
    method_logits,
    ood_scores,
    recipes_for,
)
from ensdiv.errors import InvalidInputError, unknown_name

MIN_SEEDS = 3
#: The quantities :func:`estimates` knows: Table 1's and Table 2's columns (``r*`` on a shifted set).
ESTIMATED_METRICS = ("acc", "nll", "ece", "aupr", "auroc", "fpr95", "rAcc", "rNLL", "rECE")


@dataclass(frozen=True)
class Measure:
    """One compared quantity of :func:`estimates`: ``metric`` of the variant ``label`` (a method of
    :data:`METHODS` or a label of ``compare_methods(extra=...)``), on ``ood_set`` with ``criterion`` for the
    OOD metrics (default: the preset's OOD set and ``msp``), on ``shift_set`` for ``rAcc``/``rNLL``/``rECE``."""

    label: str
    metric: str
    ood_set: str | None = None
    criterion: str | None = None
    shift_set: str | None = None

    def __post_init__(self) -> None:
        if self.metric not in ESTIMATED_METRICS:
            raise unknown_name("metric", self.metric, ESTIMATED_METRICS)
        if self.metric.startswith("r") and not self.shift_set:
            raise InvalidInputError(f"{self.metric} is measured on a shifted set: give shift_set.")
        if self.criterion is not None and self.criterion not in OOD_CRITERIA:
            raise unknown_name("OOD criterion", self.criterion, OOD_CRITERIA)

    @property
    def ood(self) -> bool:
        """Whether the metric scores OOD detection (it reads the test set and an OOD set)."""
        return self.metric in ("aupr", "auroc", "fpr95")


def estimates(cfg: dict, runs: Any, wanted: Mapping[str, Measure], *, variants: Mapping[str, dict] | None = None,
              n_resamples: int = 1000, seed: int = 0) -> tuple[dict[str, Any], str]:
    """Every quantity of ``wanted`` as an :class:`~ensdiv.report.Estimate`, and what its interval randomises.

    With at least :data:`MIN_SEEDS` runs (``cfg["seeds"]``) the replicates are the per-run values of
    ``runs`` (:func:`compare_methods`' table; the k-th run of every method is paired with the k-th of the
    others); with fewer, they come from one paired bootstrap over the evaluation images (:func:`bootstrap`),
    the trained models held fixed.

    Args:
        cfg: the resolved preset ``runs`` was computed with.
        runs: :func:`compare_methods`' table (method keys or labels as in ``wanted``, not display labels).
        wanted: ``{quantity name: Measure}``.
        variants: ``{label: {"method": ..., **options}}`` for labels that are not methods (as ``extra``).
        n_resamples, seed: the bootstrap's.

    Returns:
        ``({name: Estimate}, variance)``, ``variance`` one sentence for the claim record.
    """
    seeds = list(cfg["seeds"])
    if len(seeds) >= MIN_SEEDS:
        out = {}
        for name, q in wanted.items():
            rows = runs[runs["method"] == q.label]
            if q.ood:
                rows = rows[(rows["ood_set"] == (q.ood_set or _default_ood(cfg)))
                            & (rows["criterion"] == (q.criterion or "msp"))]
            col = f"{q.metric}[{q.shift_set}]" if q.shift_set else q.metric
            per_run = rows.groupby("seed")[col].first().reindex(seeds)
            if rows.empty or per_run.isna().any():
                raise InvalidInputError(f"runs has no {col!r} of {q.label!r} for every seed {seeds}.")
            out[name] = ed.report.from_seeds(per_run.to_numpy(dtype=float))
        return out, (f"training seeds: {len(seeds)} runs of every method, paired by run (Student-t); the finite "
                     "test set is not resampled")
    return bootstrap(cfg, wanted, variants=variants, n_resamples=n_resamples, seed=seed)


def _default_ood(cfg: dict) -> str:
    return (cfg.get("ood_sets") or [cfg["ood_set"]])[0]


def _per_image(logits: Tensor, labels: Tensor) -> dict[str, np.ndarray]:
    """Per-image correctness and NLL of an ensemble's averaged softmax, and its probabilities."""
    probs = logits.float().softmax(-1).mean(0)
    p_true = probs.gather(1, labels.view(-1, 1)).squeeze(1)
    return {"correct": (probs.argmax(-1) == labels).double().numpy(),
            "nll": (-p_true.clamp_min(1e-12).log()).double().numpy(), "probs": probs}


def bootstrap(cfg: dict, wanted: Mapping[str, Measure], *, variants: Mapping[str, dict] | None = None,
              n_resamples: int = 1000, seed: int = 0) -> tuple[dict[str, Any], str]:
    """A paired bootstrap of ``wanted`` over the evaluation images, the models of ``cfg``'s runs held fixed
    (:func:`ensdiv.report.sample_bootstrap`, the report's one bootstrap).

    Each resample draws the test images, every OOD set and every shifted set anew, each set on its own (so an
    OOD metric keeps the OOD share of the data it was measured on); one draw serves every quantity, so the
    estimates are paired (two methods that agree on every image differ by exactly zero in every replicate).
    A quantity of several runs is the mean over the runs, as in the tables. Predictions come from the cache
    (``ed.predict``; trained on a miss).

    Returns:
        ``({name: Estimate}, variance)`` (see :func:`estimates`).
    """
    specs = {m: {"method": m} for m in METHODS}
    specs.update(variants or {})
    missing = sorted({q.label for q in wanted.values()} - set(specs))
    if missing:
        raise unknown_name("variant (give it in variants=)", missing[0], specs)
    sets: dict[str, Any] = {"test": eval_set(cfg)}
    for q in wanted.values():
        if q.ood:
            name = q.ood_set or _default_ood(cfg)
            sets.setdefault(f"ood:{name}", eval_set(cfg, name, n=cfg["ood_subset"]))
        if q.shift_set:
            sets.setdefault(f"shift:{q.shift_set}", eval_set(cfg, q.shift_set))
    logits: dict[tuple[str, int, str], Tensor] = {}

    def member_logits(label: str, run: int, key: str) -> Tensor:
        if (label, run, key) not in logits:
            spec = dict(specs[label])
            method = spec.pop("method")
            logits[label, run, key] = method_logits(recipes_for(method, cfg, run, **spec), sets[key])
        return logits[label, run, key]

    labels = {k: d.y for k, d in sets.items()}
    # one sample per evaluation set (each resampled on its own), one quantity per wanted measure
    samples: dict[str, dict[str, Any]] = {k: {f"{k}|labels": d.y.numpy()} for k, d in sets.items()}
    quantities = {}
    for name, q in wanted.items():
        if q.ood:
            crit, ood_key = q.criterion or "msp", f"ood:{q.ood_set or _default_ood(cfg)}"
            pairs = []
            for i, run in enumerate(cfg["seeds"]):
                a, b = f"{name}|id|{i}", f"{name}|ood|{i}"
                samples["test"][a] = ood_scores(member_logits(q.label, run, "test"), crit).double().numpy()
                samples[ood_key][b] = ood_scores(member_logits(q.label, run, ood_key), crit).double().numpy()
                pairs.append((a, b))
            quantities[name] = _ood_statistic(q.metric, pairs)
            continue
        key = f"shift:{q.shift_set}" if q.shift_set else "test"
        per_run = [_per_image(member_logits(q.label, run, key), labels[key]) for run in cfg["seeds"]]
        base = q.metric.removeprefix("r").lower()
        if base in ("acc", "nll"):
            column = "correct" if base == "acc" else "nll"
            samples[key][name] = np.mean([d[column] for d in per_run], axis=0) * (100 if base == "acc" else 1)
            quantities[name] = functools.partial(_mean_statistic, name)
        else:
            names = [f"{name}|probs|{i}" for i in range(len(per_run))]
            samples[key].update({n: d["probs"].numpy() for n, d in zip(names, per_run, strict=True)})
            quantities[name] = _ece_statistic(names, f"{key}|labels")
    est = ed.report.sample_bootstrap(samples, quantities, n_resamples=n_resamples, seed=seed)
    shown = ", ".join(f"{len(sets[k])} {k.split(':')[-1] if ':' in k else 'test'} images" for k in sets)
    n_runs = len(cfg["seeds"])
    return est, (f"evaluation images: {n_resamples} paired bootstrap resamples ({shown}, each set resampled on its "
                 f"own), the trained models held fixed ({n_runs} run{'s' if n_runs > 1 else ''}); training seeds "
                 "not covered")


def _mean_statistic(name: str, arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    """Per resample, the mean of the per-image values ``name`` (accuracy in %, NLL), already averaged over runs."""
    return arrays[name].mean(-1)


def _ood_statistic(metric: str, pairs: list[tuple[str, str]]) -> Any:
    """``f(arrays) -> (B,)``: the OOD ``metric`` (AUPR, AUROC, FPR at 95 % TPR, in %) of each resample, averaged over
    the runs whose in-distribution and OOD score arrays ``pairs`` names."""
    fn = {"aupr": mt.aupr, "auroc": mt.auroc, "fpr95": functools.partial(mt.fpr_at_tpr, tpr=0.95)}[metric]

    def stat(arrays: Mapping[str, np.ndarray]) -> np.ndarray:
        rows = len(arrays[pairs[0][0]])
        return np.array([np.mean([100 * float(fn(torch.from_numpy(arrays[a][r]), torch.from_numpy(arrays[b][r]),
                                                 validate_args=False)) for a, b in pairs]) for r in range(rows)])
    return stat


def _ece_statistic(names: list[str], labels: str) -> Any:
    """``f(arrays) -> (B,)``: the 15-bin ECE of each resample, averaged over the runs' probabilities ``names``."""
    def stat(arrays: Mapping[str, np.ndarray]) -> np.ndarray:
        y = arrays[labels]
        return np.array([np.mean([float(mt.ece(torch.from_numpy(arrays[n][r]), torch.from_numpy(y[r]), n_bins=15,
                                                validate_args=False)) for n in names]) for r in range(len(y))])
    return stat


def swap_null(ours: Mapping[str, Any], a: str, b: str, *, seed: int) -> ed.report.Null:
    """Null data for "``a`` differs from ``b``" (two methods trained with the same seeds): the two swapped at
    random within each seed (:func:`ensdiv.report.seed_flips`) when both are per-seed estimates; on one run
    (a bootstrap over the images, smoke) ``b``'s results standing in for ``a`` (no effect by construction)."""
    ea, eb = ours[a], ours[b]
    if all(getattr(e, "kind", None) == "seeds" for e in (ea, eb)):
        return ed.report.seed_flips(ours, a, b, seed=seed)
    return stand_in(ours, a, b)


def stand_in(ours: Mapping[str, Any], a: str, b: str, *, rotate: bool = False) -> ed.report.Null:
    """Null (or truth) data: ``b``'s results standing in for ``a``'s. With ``rotate`` and per-seed estimates,
    ``b``'s runs shifted by one to ``S - 1`` seeds (``b``'s seed ``s + k`` in place of ``a``'s seed ``s``): the
    same method with the pairing broken, one draw per shift; otherwise one draw, ``b`` itself."""
    eb = ours[b]
    if rotate and getattr(eb, "kind", None) == "seeds" and len(eb.replicates) > 1:
        runs = np.asarray(eb.replicates, dtype=float)
        draws = [{a: ed.report.from_seeds(np.roll(runs, -k), source=eb.source)} for k in range(1, runs.size)]
        return ed.report.Null(f"{b}'s runs, their seeds shifted by 1 to {runs.size - 1}, in place of {a}'s", draws)
    return ed.report.Null(f"{b}'s results in place of {a}'s", [{a: eb}])


def criteria_null(ours: Mapping[str, Any], names: Mapping[str, Mapping[str, str]], *, seed: int,
                  draws: int = 200) -> ed.report.Null:
    """Null data for "one OOD criterion is the best": the criteria's labels permuted at random within each
    method and seed, so no criterion is better than another but by chance.

    Args:
        ours: the estimates. names: ``{method: {criterion: quantity name}}``.
        seed, draws: the permutations'.

    Per-seed estimates are permuted seed by seed; estimates of one run (a bootstrap) are permuted whole."""
    rng = np.random.default_rng(seed)

    def draw() -> dict[str, Any]:
        out: dict[str, Any] = {}
        for quantities in names.values():
            keys = list(quantities.values())
            ests = [ours[k] for k in keys]
            if all(getattr(e, "kind", None) == "seeds" for e in ests):
                runs = np.stack([np.asarray(e.replicates, dtype=float) for e in ests])  # (criteria, seeds)
                perm = np.stack([rng.permutation(len(keys)) for _ in range(runs.shape[1])], axis=1)
                shuffled = np.take_along_axis(runs, perm, axis=0)
                out.update({k: ed.report.from_seeds(shuffled[i], source=ests[i].source) for i, k in enumerate(keys)})
            else:
                out.update({k: ests[j] for k, j in zip(keys, rng.permutation(len(keys)), strict=True)})
        return out

    return ed.report.Null("the criteria's labels permuted at random within each method and seed",
                          [draw() for _ in range(int(draws))])
