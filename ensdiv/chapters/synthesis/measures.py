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
from ensdiv.chapters.synthesis.stats import member_bootstrap, rho_estimate
from ensdiv.errors import InvalidInputError
from ensdiv.report import null_draws
from ensdiv.report.uncertainty import member_resample

__all__ = ["MEASURES", "OUTCOMES", "SIMILARITY_MEASURES", "CONTROL", "measure_table", "outcome_table", "image_halves",
           "pair_gain_terms", "split_votes_resolved", "shuffled_votes_null"]

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


#: The measures :func:`relabelled` recomputes on relabelled members: SAT from its pair matrix, and the per-sample ones.
RELABELLED = ("sat", "mutual_information", "pds", "equitability")


def relabelled(pop: Population, index: Any, measure: str) -> Any:
    """For a member-level null (:func:`~ensdiv.chapters.synthesis.stats.relabelled_rho_null`): ``f(order)``, the
    ``measure`` of the ensembles ``index`` (rows of ``pop.ensembles``, one source) with their members relabelled,
    member ``k`` read as ``order[k]``. SAT reads the attack-similarity chapter's pair matrix (cached), the
    per-sample measures the pool's clean probabilities of this population's images, as :func:`measure_table` does.

    Raises:
        InvalidInputError: a measure not in :data:`RELABELLED`, ensembles of more than one source.
    """
    if measure not in RELABELLED:
        raise InvalidInputError(f"relabelled recomputes {', '.join(RELABELLED)}, not {measure!r}.")
    rows = pop.ensembles.loc[index]
    if rows.empty:  # an empty stratum (smoke): nothing to recompute
        return lambda order: np.empty(0)
    sources = set(rows.source)
    if len(sources) != 1:
        raise InvalidInputError(f"relabelled needs the ensembles of one pool, got sources {sorted(sources)}.")
    pool, idx = pop.pools[sources.pop()], [tuple(t) for t in rows["idx"]]
    if measure == "sat":
        acfg = asim.preset("fig02_similarity_vs_err", pop.cfg["scale"], verbose=False)
        mat = asim.chapter_sat(acfg, pool.recipes, names=[m.key for m in pool.members]).scores.double()
        return lambda order: _gather_mean(mat[np.asarray(order)][:, np.asarray(order)], idx)
    logits = pool.logits["clean"]
    per_sample = {"mutual_information": lambda t: mt.mutual_information(logits.softmax(-1)[t]),
                  "pds": lambda t: mt.pds(logits.softmax(-1)[t]),
                  "equitability": lambda t: mt.equitability(logits.argmax(-1)[t], num_classes=logits.shape[-1])}
    fn = per_sample[measure]
    return lambda order: np.array([float(fn(list(np.asarray(order)[list(t)])).mean()) for t in idx])


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




def image_halves(pop: Population, *, seed: int) -> tuple[Population, Population]:
    """The population on two disjoint halves of every evaluation set's images: the first to *measure* the
    ensembles on, the second to score their *outcomes* on, so that a measure and an outcome never read the same
    image (on one set, a pair's gain over its mean member is its error inconsistency times how often the average
    resolves a split vote, minus nothing: :func:`pair_gain_terms`). Sets of equal size (the shifted sets made
    from the clean images one by one) are split by one permutation, so an image's corrupted copy falls in the
    same half as the image.

    Measures read from other chapters' own images (CKA's seeded clean subset, SAT's attacked images,
    design-diversity's saliency maps) are not split.
    """
    def cut(first: bool) -> Population:
        keep = {}
        for role, y in pop.labels.items():
            order = np.random.default_rng([seed, 11]).permutation(int(y.shape[0]))
            half = order[: y.shape[0] // 2] if first else order[y.shape[0] // 2:]
            keep[role] = torch.as_tensor(np.sort(half), dtype=torch.long)
        pools = {s: Pool(p.source, p.members, {r: z[:, keep[r]] for r, z in p.logits.items()}, p.recipes)
                 for s, p in pop.pools.items()}
        return Population(pools, {r: y[keep[r]] for r, y in pop.labels.items()}, pop.ensembles, pop.cfg)

    return cut(True), cut(False)


def pair_gain_terms(pop: Population, source: str = "zoo") -> pd.DataFrame:
    """For every two-member ensemble of ``source`` on the clean images: error inconsistency ``ei`` (the fraction
    of images where exactly one member is right), ``resolved`` (how often the averaged probabilities are right on
    those images), ``both_wrong`` and ``rescued`` (the fraction where both are wrong, and how often the average is
    right there), and the gain over the mean member ``gain_mean`` (points). On one set of images these obey, for
    any members, ``gain_mean = 100 * (ei * (resolved - 1/2) + both_wrong * rescued)`` (both right: the average is
    right): an identity, shown as a fact, never evidence that error inconsistency predicts the gain.

    >>> import torch
    >>> z = torch.log(torch.tensor([[[.6, .4], [.6, .4], [.4, .6]], [[.3, .7], [.9, .1], [.3, .7]]]))
    >>> pool = Pool("zoo", [], {"clean": z})
    >>> ens = pd.DataFrame({"source": ["zoo"], "size": [2], "idx": [(0, 1)]})
    >>> t = pair_gain_terms(Population({"zoo": pool}, {"clean": torch.tensor([0, 0, 0])}, ens, {}))
    >>> [round(float(t[k].iloc[0]), 4) for k in ("ei", "resolved", "gain_mean")]  # the one split vote goes wrong
    [0.3333, 0.0, -16.6667]
    """
    pool, y = pop.pools[source], pop.labels["clean"]
    ens = pop.ensembles[(pop.ensembles.source == source) & (pop.ensembles["size"] == 2)]
    rows = []
    for i, j in ens["idx"]:
        z = pool.logits["clean"][[i, j]]
        right = (z.argmax(-1) == y).double()  # (2, N)
        avg = (z.softmax(-1).mean(0).argmax(-1) == y).double()
        split, wrong = right.sum(0) == 1, right.sum(0) == 0
        ei, bw = float(split.double().mean()), float(wrong.double().mean())
        rows.append({"ei": ei, "resolved": float(avg[split].mean()) if split.any() else float("nan"),
                     "both_wrong": bw, "rescued": float(avg[wrong].mean()) if wrong.any() else 0.0,
                     "gain_mean": 100 * float(avg.mean() - right.mean())})
    out = pd.DataFrame(rows, index=ens.index, columns=["ei", "resolved", "both_wrong", "rescued", "gain_mean"])
    return out.assign(identity_gap=(out.gain_mean - 100 * (out.ei * (out.resolved.fillna(0.5) - 0.5)
                                                           + out.both_wrong * out.rescued)).abs())


def _confidence_shuffled(logits: Tensor, rng: np.random.Generator) -> Tensor:
    """Each model's output vectors permuted among the images it predicts the same class for: every prediction,
    so every model's right and wrong images, error inconsistency and accuracy, stays, while how confident a model is
    no longer goes with whether it is right."""
    out = logits.clone()
    pred = logits.argmax(-1)
    for m in range(logits.shape[0]):
        for c in pred[m].unique().tolist():
            idx = torch.nonzero(pred[m] == c).flatten()
            out[m, idx] = logits[m, idx[torch.from_numpy(rng.permutation(len(idx)))]]
    return out


def split_votes_resolved(pop: Population, rows: pd.Index, members: Sequence[Sequence[int]], *, name: str,
                         n_boot: int, seed: int, draws: int = 200, null_resamples: int = 200) -> tuple[Any, Any]:
    """What the identity of :func:`pair_gain_terms` leaves free: ``r``, the share of the split votes (exactly one
    member right) that the averaged probabilities get right, averaged over the two-member ensembles ``rows`` of the
    zoo on ``pop``'s images, with an interval from resampling their members
    (:func:`~ensdiv.report.uncertainty.member_resample`; ``members`` per row), and null data where confidence says
    nothing about being right: each model's output vectors permuted among the images it predicts the same class
    for (its predictions, accuracy and every pair's error inconsistency kept, the base shared by every pair as in
    the data), ``draws`` draws each with its own member bootstrap of ``null_resamples``. Returns
    ``(estimate, null)`` keyed ``name``. A gain over the mean member grows with error inconsistency exactly when
    ``r`` is above ½ (and the both-wrong images rescued), so ``r`` is the evidence; the correlation of the two is
    arithmetic.

    >>> import torch
    >>> z = torch.log(torch.tensor([[[.6, .4], [.6, .4], [.4, .6]], [[.3, .7], [.9, .1], [.3, .7]]]))
    >>> pool = Pool("zoo", [], {"clean": z})
    >>> ens = pd.DataFrame({"source": ["zoo"] * 4, "size": [2] * 4, "idx": [(0, 1)] * 4})
    >>> pop = Population({"zoo": pool}, {"clean": torch.tensor([0, 0, 0])}, ens, {})
    >>> est, null = split_votes_resolved(pop, ens.index, [(0, k) for k in range(1, 5)], name="r", n_boot=20,
    ...                                  seed=0, draws=3, null_resamples=20)
    >>> float(est), len(null.draws)  # the one split vote goes to the wrong member in every pair
    (0.0, 3)
    """
    def mean_r(data: Population, n: int, s: int) -> Any:
        r = pair_gain_terms(data).loc[rows, "resolved"].to_numpy(dtype=float)
        return rho_estimate(member_resample({"r": r}, members, lambda c: float(np.mean(c["r"])), n_boot=n, seed=s))

    pool = pop.pools["zoo"]

    def shuffled(rng: np.random.Generator) -> dict[str, Any]:
        logits = {**pool.logits, "clean": _confidence_shuffled(pool.logits["clean"], rng)}
        data = Population({**pop.pools, "zoo": Pool(pool.source, pool.members, logits, pool.recipes)}, pop.labels,
                          pop.ensembles, pop.cfg)
        return {name: mean_r(data, null_resamples, seed + 1)}

    null = null_draws("each model's outputs permuted among the images it predicts the same class for (confidence "
                      "unrelated to being right; predictions and error inconsistency kept)", shuffled, draws=draws,
                      seed=seed + 2)
    return mean_r(pop, n_boot, seed), null


def shuffled_votes_null(pop: Population, rows: pd.Index, *, name: str, seed: int, draws: int = 200,
                        n_boot: int = 200) -> Any:
    """Null data for the redundancy of disagreement and equitability over the ensembles ``rows`` (one stratum):
    each member's clean-set votes shuffled over the images on its own (each member keeps how often it votes for
    each class; whatever links two members' votes, image by image, is gone), both measures recomputed, and their
    |Spearman ρ| with a member bootstrap of ``n_boot`` resamples. A ρ that stays high here is a property of
    the two definitions, not of the members.
    """

    ens = pop.ensembles.loc[rows]
    members = list(ens["idx"])

    def make(rng: np.random.Generator) -> dict[str, Any]:
        d, e = [], []
        votes = {}
        for source, t in zip(ens["source"], ens["idx"], strict=True):
            pool = pop.pools[source]
            for m in t:
                if (source, m) not in votes:
                    v = pool.logits["clean"][m].argmax(-1)
                    votes[(source, m)] = v[torch.as_tensor(rng.permutation(v.shape[0]))]
            preds = torch.stack([votes[(source, m)] for m in t])
            d.append(float(mt.disagreement(preds)))
            e.append(float(mt.equitability(preds, num_classes=pool.logits["clean"].shape[-1]).mean()))
        r = member_bootstrap(d, e, members, n_boot=n_boot, seed=int(rng.integers(2**31)))
        est = rho_estimate(r)
        return {name: type(est)(abs(est.value), np.abs(est.replicates), est.source, est.kind, est.group)}

    return null_draws("each member's votes shuffled over the clean images on its own, both measures recomputed",
                      make, draws=draws, seed=seed)
