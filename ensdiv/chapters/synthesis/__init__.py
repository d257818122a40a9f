"""The synthesis chapter: which diversity measure predicts which outcome, on one common population.

Each of the book's papers links its own diversity measure to its own outcome. This chapter computes every
measure on *one* population of ensembles and asks which measure predicts which outcome.

**Population** (:func:`population`). Built only from models other chapters train and cache (on a cache
miss they are trained, as every chapter does; nothing new is trained here). Four sources, each a *pool*
of members evaluated on the same four sets (:data:`ROLES`, a seeded subset of ``eval_subset`` images of
each registered set, drawn with ``TensorSet.subset(n, seed=0)``; at paper scale the ImageNet folders read into
memory at 224 px, :func:`ensdiv.data.paper.stream.stream_tensor_set`, and each pretrained model resizes them to
its own input size):

* ``zoo`` — training-methods' categories: the base ``arch/resnet`` paired with every other zoo model of the
  categories ``reinit``, ``hparam``, ``arch``, ``framework``, ``dataset`` (all pairs), plus ``zoo_triples``
  triples (base + two others, drawn with ``seed``);
* ``dd`` — design-diversity's heterogeneous zoo (the models of its Fig. 5-6 preset: zoo recipes below paper
  scale, its pretrained timm models at paper scale): ``dd_triples`` triples drawn with ``seed`` (all of them
  when fewer exist);
* ``packed`` — Packed-Ensembles' methods (the recipes of the preset ``packed_preset``, every seed: Table 1's
  below paper scale, Table 2's ImageNet ResNet-50 at paper scale, where every pool is scored on ImageNet
  sets and Table 1's CIFAR models could not be): members are a run's estimators;
* ``sed`` — the SED chapter's heads (every method listed, diversified and not): members are a run's heads.

For ``packed`` and ``sed`` an ensemble never mixes runs: ``per_run`` sub-ensembles of each size in
``sizes`` are drawn per run (seeded). Every member records its provenance (:class:`Member`).

**Measures** (:data:`MEASURES`) are computed on the clean set: the pairwise ones from (P, P) matrices of the
whole pool, once per pool, then averaged over each ensemble's pairs with one gather; the per-sample ones
(#unique, equitability, PDS, MI) per ensemble. Attribution diversity comes from design-diversity's cached
saliency maps, so only ``dd`` ensembles have it; linear CKA of penultimate features and SAT similarity
(attack-similarity Eq. 1) only where every member is its own model (``zoo``, ``dd``). SAT is measured as the
attack-similarity chapter measures it (:func:`ensdiv.chapters.attack_similarity.chapter_sat` with its Fig. 2
preset: PGD on a seeded subsample of its evaluation set), so the adversarial images of the models that chapter
attacks come from its cache; each other model is attacked once, and the cost is the PGD run per model plus
every model's predictions on every other model's adversarial images. Error inconsistency equals oracle
disagreement by definition (both count samples where exactly one member is right); both are kept so the
redundancy page shows it.

**Outcomes** (:data:`OUTCOMES`): accuracy gain (mean-probability ensemble) over the best and over the
mean member on the clean, corruption and rendition sets; OOD-detection AUROC (clean vs OOD set) with MI,
PDS and BMA (negated confidence) as scores.

**Analysis** (:mod:`ensdiv.chapters.synthesis.stats`): Spearman correlations within each (source, ensemble
size) stratum, with intervals from a bootstrap over *members* (ensembles sharing a member move together),
Benjamini-Hochberg q-values over each table's family, partial Spearman controlling for mean member accuracy
(:func:`partial_spearman`), the measure-by-measure matrix, and the ranked table chosen on one half of the
ensembles and reported on the other (:func:`ranked_table`).
"""

from __future__ import annotations

import itertools
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

import ensdiv as ed
from ensdiv import metrics as mt
from ensdiv.chapters import attack_similarity as asim
from ensdiv.chapters import design_diversity as dd
from ensdiv.chapters import packed_ensembles as pe
from ensdiv.chapters import sed, zoo
from ensdiv.chapters._presets import add_dry_blocks, chapter_preset
from ensdiv.chapters.synthesis.stats import (
    correlation_table,
    measure_matrix,
    member_bootstrap,
    member_resample,
    partial_spearman,
    ranked_table,
    spearman_ci,
    spearman_many,
    strata,
)
from ensdiv.data.paper.stream import is_stream_set, stream_tensor_set
from ensdiv.errors import InvalidInputError, unknown_name
from ensdiv.store import config_key
from ensdiv.train import model_cache_config

__all__ = [
    "SLUG", "PRESETS", "preset", "ROLES", "SOURCES", "MEASURES", "OUTCOMES", "SIMILARITY_MEASURES", "Member",
    "Pool", "Population", "eval_sets", "population", "measure_table", "outcome_table", "spearman_ci",
    "member_bootstrap", "member_resample", "spearman_many", "partial_spearman", "strata", "correlation_table",
    "measure_matrix", "ranked_table",
]

SLUG = "synthesis"
ROLES = ("clean", "corruption", "rendition", "ood")
SOURCES = ("zoo", "dd", "packed", "sed")
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

# ---- presets ------------------------------------------------------------------------------------------------
_SETS = {"clean": "fmnist/test", "corruption": "fmnist-c/gaussian_noise/3", "rendition": "fmnist-r",
         "ood": "letters"}
_COMMON = {"seed": 0, "sets": _SETS, "sources": list(SOURCES), "sizes": [2, 3], "base": "arch/resnet",
           "categories": ["reinit", "hparam", "arch", "framework", "dataset"], "ci": 0.95,
           "packed_preset": "tab01_efficient_ensembles"}
_SCALES = {
    "smoke": {"eval_subset": 300, "zoo_triples": 6, "dd_triples": 4, "per_run": 1, "n_boot": 50, "cka_images": 64,
              "packed_methods": ["packed", "deep_ensemble"], "sed_methods": ["deep_ensemble", "sed_det"]},
    "cpu": {"eval_subset": 2000, "zoo_triples": 40, "dd_triples": 40, "per_run": 2, "n_boot": 1000,
            "cka_images": 500, "packed_methods": ["packed", "batchensemble", "mimo", "masksembles", "deep_ensemble"],
            "sed_methods": list(sed.METHODS)},
    # paper scale: every pool on ImageNet sets; Packed-Ensembles' ImageNet models are Table 2's (PE-(3, 4, 1)
    # ResNet-50 and the baselines on its recipe)
    "paper": {"eval_subset": 5000, "zoo_triples": 100, "dd_triples": 100, "per_run": 2, "n_boot": 2000,
              "cka_images": 1000, "packed_methods": ["packed", "batchensemble", "mimo", "masksembles",
                                                     "deep_ensemble"], "sed_methods": list(sed.METHODS),
              "packed_preset": "tab02_imagenet_ood_shift",
              "sets": {"clean": "imagenet/val", "corruption": "imagenet-c/gaussian_noise/3",
                       "rendition": "imagenet-r", "ood": "inaturalist"}},
}
_RANGES = {"ci": ed.config.between(0.5, 0.999), "n_boot": ed.config.at_least(10), "per_run": ed.config.at_least(1),
           "zoo_triples": ed.config.at_least(0), "dd_triples": ed.config.at_least(0),
           "cka_images": ed.config.at_least(2)}


def _scaled() -> dict:
    return {"common": dict(_COMMON), **{s: dict(v) for s, v in _SCALES.items()}, "ranges": _RANGES}


PRESETS = {f"{SLUG}/{stem}": _scaled() for stem in
           ("measures_vs_outcomes", "measure_redundancy", "one_ensemble_every_measure")}
# a dry run of the paper presets (ensdiv run --dry-run): a few images, ensembles and members of every source (each
# other chapter's dry sizes apply to the models it trains)
add_dry_blocks(PRESETS, {"eval_subset": 8, "zoo_triples": 2, "dd_triples": 2, "per_run": 1, "n_boot": 50,
                         "cka_images": 8, "sizes": [2]},
               pick={"categories": ["reinit"], "packed_methods": ["packed", "deep_ensemble"],
                     "sed_methods": ["deep_ensemble", "sed_det"]})


def preset(stem: str, scale: str = "cpu", /, *, verbose: bool = True, **overrides: Any):
    """The resolved preset ``synthesis/<stem>`` at ``scale`` (see :func:`ensdiv.config.resolve_preset`)."""
    return chapter_preset(SLUG, PRESETS, stem, scale, verbose=verbose, **overrides)


# ---- the population ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Member:
    """One member of a pool and where it comes from: ``source``, its ``key`` (zoo key, or
    ``"<method>-s<seed>/m<k>"``), the ``recipe`` label and ``model_key`` (the cache key of the trained model
    it uses) and ``index`` (which estimator / head of that model; 0 for a single model)."""

    source: str
    key: str
    recipe: str
    model_key: str
    index: int = 0
    run: str = ""  # packed / sed: the run whose members may be combined ("" = any combination)


@dataclass
class Pool:
    """The members of one source and their logits ``(P, N, C)`` on every role; ``recipes[i]`` is member i's
    own recipe when it has one (zoo, dd), else None."""

    source: str
    members: list[Member]
    logits: dict[str, Tensor]
    recipes: list[Any] = field(default_factory=list)


@dataclass
class Population:
    """The pools, the labels of every role and one row per ensemble (``source``, ``kind``, ``size``,
    ``idx``: member indices into its pool, ``members``: their keys)."""

    pools: dict[str, Pool]
    labels: dict[str, Tensor]
    ensembles: pd.DataFrame
    cfg: dict


def eval_sets(cfg: dict) -> dict[str, ed.TensorSet]:
    """The evaluation set of every role: ``eval_subset`` images of the registered set, drawn with seed 0 (a
    paper-scale ImageNet folder: read into memory, :func:`ensdiv.data.paper.stream.stream_tensor_set`)."""
    def one(name: str) -> ed.TensorSet:
        if is_stream_set(name):
            return stream_tensor_set(name, cfg["eval_subset"], seed=0)
        return ed.get_dataset(name).subset(cfg["eval_subset"], seed=0)

    return {role: one(cfg["sets"][role]) for role in ROLES}


def _member(source: str, key: str, recipe: Any, index: int = 0, run: str = "") -> Member:
    """A member from a recipe, or from a pretrained module (design-diversity's paper-scale models: its name,
    and the cache id that decides its weights)."""
    if isinstance(recipe, ed.Recipe):
        return Member(source, key, recipe.label, config_key(model_cache_config(recipe))[:16], index, run)
    return Member(source, key, dd.model_name(recipe), config_key(dd.member_cache_config(recipe))[:16], index, run)


def _zoo_pool(cfg: dict, sets: dict) -> Pool:
    every = zoo.zoo_recipes(cfg["scale"])
    if cfg["base"] not in every:
        raise unknown_name("base zoo entry", cfg["base"], every)
    keys = [cfg["base"]] + [k for k in every if zoo.category_of(k) in cfg["categories"] and k != cfg["base"]]
    recipes = [every[k] for k in keys]
    logits = {role: ed.predict_many(recipes, data) for role, data in sets.items()}
    return Pool("zoo", [_member("zoo", k, r) for k, r in zip(keys, recipes, strict=True)], logits, recipes)


def _dd_cfg(cfg: dict) -> dict:
    return dd.preset("fig05_06_ensemble_diversity", cfg["scale"], verbose=False)


def _dd_pool(cfg: dict, sets: dict) -> Pool:
    models = dd.chapter_models(_dd_cfg(cfg))  # zoo recipes; at paper scale pretrained timm models
    logits = {role: ed.predict_many(models, data) for role, data in sets.items()}
    return Pool("dd", [_member("dd", dd.model_name(m), m) for m in models], logits, models)


def _packed_pool(cfg: dict, sets: dict) -> Pool:
    pcfg = pe.preset(cfg["packed_preset"], cfg["scale"], verbose=False)
    members, parts = [], {role: [] for role in ROLES}
    for method in cfg["packed_methods"]:
        for seed in pcfg["seeds"]:
            recipes = pe.recipes_for(method, pcfg, seed)
            run = f"{method}-s{seed}"
            for role, data in sets.items():
                parts[role].append(pe.method_logits(recipes, data))
            m = parts["clean"][-1].shape[0]
            members += [_member("packed", f"{run}/m{k}", recipes[k if len(recipes) > 1 else 0],
                                0 if len(recipes) > 1 else k, run) for k in range(m)]
    return Pool("packed", members, {role: torch.cat(v) for role, v in parts.items()}, [None] * len(members))


def _sed_pool(cfg: dict, sets: dict) -> Pool:
    roles = {"clean": "val", "corruption": "c1", "rendition": "r", "ood": "inat"}  # SED's role names, remapped
    base = sed.preset("tab01_unique", cfg["scale"], verbose=False)
    scfg = sed.preset("tab01_unique", cfg["scale"], verbose=False, eval_subset=cfg["eval_subset"],
                      sets={**base["sets"], **{roles[r]: cfg["sets"][r] for r in ROLES}})
    members, parts = [], {role: [] for role in ROLES}
    for method in cfg["sed_methods"]:
        recipes = sed.method_recipes(scfg, method)
        for role in ROLES:
            parts[role].append(sed.ensemble_logits(scfg, method, roles[role]))
        per = parts["clean"][-1].shape[0] // len(recipes)
        members += [_member("sed", f"{method}/m{k}", recipes[k // per], k % per, method)
                    for k in range(parts["clean"][-1].shape[0])]
    return Pool("sed", members, {role: torch.cat(v) for role, v in parts.items()}, [None] * len(members))


_POOLS = {"zoo": _zoo_pool, "dd": _dd_pool, "packed": _packed_pool, "sed": _sed_pool}


def _draw(rng: np.random.Generator, items: Sequence[tuple], n: int) -> list[tuple]:
    """``n`` of ``items`` without replacement (all when fewer), in a seeded order."""
    if n >= len(items):
        return list(items)
    return [items[i] for i in sorted(rng.choice(len(items), size=n, replace=False))]


def _ensembles(pool: Pool, cfg: dict, rng: np.random.Generator) -> list[dict]:
    rows, keys = [], [m.key for m in pool.members]
    p = len(pool.members)
    if pool.source == "zoo":
        cat = [zoo.category_of(k) for k in keys]
        rows += [{"kind": f"base+{cat[i]}", "idx": (0, i)} for i in range(1, p)]
        triples = [(0, i, j) for i, j in itertools.combinations(range(1, p), 2)]
        rows += [{"kind": f"base+{cat[i]}+{cat[j]}", "idx": t} for t in _draw(rng, triples, cfg["zoo_triples"])
                 for _, i, j in [t]]
    elif pool.source == "dd":
        rows += [{"kind": "dd triple", "idx": t}
                 for t in _draw(rng, list(itertools.combinations(range(p), 3)), cfg["dd_triples"])]
    else:
        for run in dict.fromkeys(m.run for m in pool.members):
            idx = [i for i, m in enumerate(pool.members) if m.run == run]
            for k in cfg["sizes"]:
                rows += [{"kind": run.rsplit("-s", 1)[0] if pool.source == "packed" else run, "idx": t}
                         for t in _draw(rng, list(itertools.combinations(idx, k)), cfg["per_run"])]
    for r in rows:
        r.update(source=pool.source, size=len(r["idx"]), members=tuple(keys[i] for i in r["idx"]))
    return rows


def population(cfg: dict) -> Population:
    """Every pool of ``cfg["sources"]`` (models loaded from the cache, trained on a miss) and the seeded
    ensembles drawn from them (see the module docstring for the sampling). An ensemble whose cached models
    (and estimator / head indices) equal an earlier one's is dropped, so no ensemble enters twice."""
    bad = [s for s in cfg["sources"] if s not in SOURCES]
    if bad:
        raise unknown_name("population source", bad[0], SOURCES)
    if not cfg["sources"]:
        raise InvalidInputError("The population needs at least one source; sources is empty.")
    sets = eval_sets(cfg)
    rng = np.random.default_rng(cfg["seed"])
    pools = {s: _POOLS[s](cfg, sets) for s in cfg["sources"]}
    rows, seen = [], set()
    for r in (r for s in cfg["sources"] for r in _ensembles(pools[s], cfg, rng)):
        models = frozenset((pools[r["source"]].members[i].model_key, pools[r["source"]].members[i].index)
                           for i in r["idx"])
        if models not in seen:  # the same cached models drawn twice (e.g. by two sources) enter once
            seen.add(models)
            rows.append(r)
    cols = ["source", "kind", "size", "members", "idx"]
    return Population(pools, {r: d.y for r, d in sets.items()}, pd.DataFrame(rows)[cols], dict(cfg))


# ---- measures ----------------------------------------------------------------------------------------------
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


