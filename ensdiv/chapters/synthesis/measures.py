"""Every diversity measure and every outcome of the synthesis chapter's ensembles, one table row per ensemble
(the package docstring of :mod:`ensdiv.chapters.synthesis` says how each is computed)."""

from __future__ import annotations

import itertools
import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

import ensdiv as ed
from ensdiv import metrics as mt
from ensdiv.chapters import attack_similarity as asim
from ensdiv.chapters import design_diversity as dd
from ensdiv.chapters.synthesis.pools import Pool, Population, _dd_cfg, eval_sets

#: measure -> (label, paper that uses it)
MEASURES = {
    "disagreement": ("disagreement", "SED / design-diversity"),
    "oracle_disagreement": ("oracle disagreement (Eq. 4)", "design-diversity"),
    "q_statistic": ("Q statistic", "design-diversity"),
    "correlation": ("correlation ρ", "design-diversity"),
    "double_fault": ("double fault", "attack-similarity (all wrong)"),
    "error_inconsistency": ("error inconsistency", "training-methods"),
    "kappa": ("error consistency κ", "training-methods"),
    "equitability": ("Shannon equitability", "design-diversity"),
    "unique": ("#unique", "SED"),
    "pds": ("PDS", "SED"),
    "mutual_information": ("mutual information", "packed-ensembles"),
    "attribution_diversity": ("attribution diversity (Eq. 7)", "design-diversity"),
    "cka": ("mean pairwise CKA", "design-diversity"),
    "sat": ("SAT similarity (Eq. 1)", "attack-similarity"),
}
#: measures where a higher value means *less* diverse members
SIMILARITY_MEASURES = ("q_statistic", "correlation", "double_fault", "kappa", "cka", "sat")
OUTCOMES = ("gain_best_clean", "gain_mean_clean", "gain_best_corruption", "gain_mean_corruption",
            "gain_best_rendition", "gain_mean_rendition", "auroc_mi", "auroc_pds", "auroc_bma")
CONTROL = "mean_member_acc"


def _pair_matrix(fn: Any, preds: Sequence[Tensor], labels: Tensor | None) -> Tensor:
    """(P, P) matrix of a two-model measure ``fn(a, b, labels)`` (upper triangle filled, mirrored)."""
    p = len(preds)
    out = torch.full((p, p), float("nan"), dtype=torch.float64)
    for i, j in itertools.combinations(range(p), 2):
        out[i, j] = out[j, i] = fn(preds[i], preds[j], labels)
    return out


def _kappa(a: Tensor, b: Tensor, y: Tensor) -> float:
    """Error consistency κ; NaN where it is undefined (the library's rule), without its warning per pair."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(mt.error_consistency(a, b, y))


def _gather_mean(mat: Tensor, idx: Sequence[tuple]) -> np.ndarray:
    """Mean of ``mat`` over every pair of each ensemble's members (NaN entries skipped; NaN if all are)."""
    pairs = [(e, i, j) for e, t in enumerate(idx) for i, j in itertools.combinations(t, 2)]
    e, i, j = torch.tensor(pairs, dtype=torch.long).T
    vals = mat[i, j]
    ok = torch.isfinite(vals)
    total = torch.zeros(len(idx), dtype=mat.dtype).index_add_(0, e, torch.where(ok, vals, 0))
    count = torch.zeros(len(idx), dtype=mat.dtype).index_add_(0, e, ok.to(mat.dtype))
    return (total / count).numpy()  # 0 / 0 -> NaN where no pair is finite


def _features(pool: Pool, data: ed.TensorSet) -> list[Tensor | None]:
    return [None if r is None else ed.predict(r, data, features=True)[1].flatten(1) for r in pool.recipes]


def _attr_gram(pool: Pool, cfg: dict) -> Tensor | None:
    """Gram matrix of design-diversity's cached saliency maps (Eq. 7 inputs) for the dd pool."""
    if pool.source != "dd":
        return None
    maps, _ = dd.chapter_attributions(_dd_cfg(cfg), pool.recipes, "clean")
    return mt.attribution_gram(maps)


def _pool_measures(pool: Pool, idx: list[tuple], y: Tensor, cfg: dict, timed: Any) -> dict[str, np.ndarray]:
    """Every measure of the ensembles ``idx`` of one pool (pairwise ones gathered from (P, P) matrices)."""
    logits = pool.logits["clean"]
    preds, probs, c = logits.argmax(-1), logits.softmax(-1), logits.shape[-1]
    pairwise = {
        "disagreement": lambda: mt.disagreement(preds, pairwise=True),
        "oracle_disagreement": lambda: mt.oracle_disagreement(preds, y, pairwise=True),
        "q_statistic": lambda: mt.q_statistic(preds, y, pairwise=True),
        "correlation": lambda: mt.correlation_coefficient(preds, y, pairwise=True),
        "double_fault": lambda: mt.double_fault(preds, y, pairwise=True),
        "error_inconsistency": lambda: _pair_matrix(lambda a, b, t: float(mt.error_inconsistency(a, b, t)), preds, y),
        "kappa": lambda: _pair_matrix(_kappa, preds, y),
    }
    cols = {k: timed(k, lambda fn=fn: _gather_mean(fn(), idx)) for k, fn in pairwise.items()}
    per_sample = {
        "equitability": lambda t: mt.equitability(preds[t], num_classes=c),
        "unique": lambda t: mt.num_unique(preds[t]),
        "pds": lambda t: mt.pds(probs[t]),
        "mutual_information": lambda t: mt.mutual_information(probs[t]),
    }
    for k, fn in per_sample.items():
        cols[k] = timed(k, lambda fn=fn: np.array([float(fn(list(t)).mean()) for t in idx]))

    def attribution() -> np.ndarray:
        gram = _attr_gram(pool, cfg)
        if gram is None:
            return np.full(len(idx), np.nan)
        return mt.ensemble_attribution_diversity(gram, torch.tensor(idx), gram=True).numpy()

    own_models = bool(pool.recipes) and all(r is not None for r in pool.recipes)  # CKA and SAT need them

    def cka() -> np.ndarray:
        if not own_models:
            return np.full(len(idx), np.nan)
        feats = _features(pool, eval_sets(cfg)["clean"].subset(cfg["cka_images"], seed=cfg["seed"]))
        return _gather_mean(_pair_matrix(lambda a, b, _: float(mt.cka(a, b)), feats, None), idx)

    def sat() -> np.ndarray:
        if not own_models:
            return np.full(len(idx), np.nan)
        acfg = asim.preset("fig02_similarity_vs_err", cfg["scale"], verbose=False)
        scores = asim.chapter_sat(acfg, pool.recipes, names=[m.key for m in pool.members]).scores
        return _gather_mean(scores.double(), idx)

    cols["attribution_diversity"] = timed("attribution_diversity", attribution)
    cols["cka"] = timed("cka", cka)
    cols["sat"] = timed("sat", sat)
    return cols


def measure_table(pop: Population, *, timings: dict[str, float] | None = None) -> pd.DataFrame:
    """One row per ensemble of ``pop``, one column per measure of :data:`MEASURES` (on the clean set; NaN
    where a measure is not available for that source). ``timings``, when given, receives the seconds spent
    on each measure (summed over pools; CKA includes loading the cached features)."""
    clock = {} if timings is None else timings

    def timed(name: str, fn: Any) -> Any:
        t0 = time.perf_counter()
        out = fn()
        clock[name] = clock.get(name, 0.0) + time.perf_counter() - t0
        return out

    parts = []
    for source, pool in pop.pools.items():
        ens = pop.ensembles[pop.ensembles.source == source]
        cols = _pool_measures(pool, list(ens["idx"]), pop.labels["clean"], pop.cfg, timed)
        parts.append(pd.DataFrame(cols, index=ens.index))
    return pd.concat(parts).loc[pop.ensembles.index, list(MEASURES)]


def outcome_table(pop: Population) -> pd.DataFrame:
    """One row per ensemble: :data:`OUTCOMES` (gains in accuracy points, %) plus the control
    ``mean_member_acc`` and ``ensemble_acc`` on the clean set (%). The ensemble averages probabilities."""
    parts = []
    for source, pool in pop.pools.items():
        ens = pop.ensembles[pop.ensembles.source == source]
        rows = []
        for t in ens["idx"]:
            t = list(t)
            row = {}
            for role in ("clean", "corruption", "rendition"):
                z, y = pool.logits[role][t], pop.labels[role]
                member = (z.argmax(-1) == y).double().mean(1) * 100
                acc = float((z.softmax(-1).mean(0).argmax(-1) == y).double().mean() * 100)
                row[f"gain_best_{role}"] = acc - float(member.max())
                row[f"gain_mean_{role}"] = acc - float(member.mean())
                if role == "clean":
                    row.update(mean_member_acc=float(member.mean()), ensemble_acc=acc)
            p_id, p_ood = pool.logits["clean"][t].softmax(-1), pool.logits["ood"][t].softmax(-1)
            row["auroc_mi"] = float(mt.auroc(mt.mutual_information(p_id), mt.mutual_information(p_ood)))
            row["auroc_pds"] = float(mt.auroc(mt.pds(p_id), mt.pds(p_ood)))
            row["auroc_bma"] = float(mt.auroc(-mt.bma_confidence(p_id), -mt.bma_confidence(p_ood)))
            rows.append(row)
        parts.append(pd.DataFrame(rows, index=ens.index))
    return pd.concat(parts).loc[pop.ensembles.index, [*OUTCOMES, CONTROL, "ensemble_acc"]]


