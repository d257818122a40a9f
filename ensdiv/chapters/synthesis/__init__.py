"""The synthesis chapter: which diversity measure predicts which outcome, on one common population.

Each of the book's papers links its own diversity measure to its own outcome. This chapter computes every
measure on *one* population of ensembles and asks which measure predicts which outcome.

**Population** (:func:`population`, :mod:`ensdiv.chapters.synthesis.pools`). Built only from models other chapters
train and cache (on a cache miss they are trained, as every chapter does; nothing new is trained here). Four
sources, each a *pool* of members evaluated on the same four sets (:data:`ROLES`, a seeded subset of
``eval_subset`` images of each registered set, drawn with ``TensorSet.subset(n, seed=0)``; at paper scale the
ImageNet folders read into memory at 224 px, :func:`ensdiv.data.paper.stream.stream_tensor_set`, and each
pretrained model resizes them to its own input size):

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

**Measures** (:data:`MEASURES`, :mod:`ensdiv.chapters.synthesis.measures`) are computed on the clean set: the
pairwise ones from (P, P) matrices of the whole pool, once per pool, then averaged over each ensemble's pairs with
one gather; the per-sample ones (#unique, equitability, PDS, MI) per ensemble. Attribution diversity comes from
design-diversity's cached saliency maps, so only ``dd`` ensembles have it; linear CKA of penultimate features and
SAT similarity (attack-similarity Eq. 1) only where every member is its own model (``zoo``, ``dd``). SAT is
measured as the attack-similarity chapter measures it (:func:`ensdiv.chapters.attack_similarity.chapter_sat` with
its Fig. 2 preset: PGD on a seeded subsample of its evaluation set), so the adversarial images of the models that
chapter attacks come from its cache; each other model is attacked once, and the cost is the PGD run per model plus
every model's predictions on every other model's adversarial images. Error inconsistency equals oracle
disagreement by definition (both count samples where exactly one member is right); both are kept so the redundancy
page shows it.

**Outcomes** (:data:`OUTCOMES`): accuracy gain (mean-probability ensemble) over the best and over the
mean member on the clean, corruption and rendition sets; OOD-detection AUROC (clean vs OOD set) with MI,
PDS and BMA (negated confidence) as scores.

**Analysis** (:mod:`ensdiv.chapters.synthesis.stats`): Spearman correlations within each (source, ensemble
size) stratum, with intervals from a bootstrap over *members* (ensembles sharing a member move together),
Benjamini-Hochberg q-values over each table's family, partial Spearman controlling for mean member accuracy
(:func:`partial_spearman`), the measure-by-measure matrix, and the ranked table chosen on one half of the
ensembles and reported on the other, the halves sharing no member (:func:`ranked_table`, :func:`member_halves`).
The claims page measures on one half of the test images and scores the outcomes on the other
(:func:`image_halves`; on the same images a pair's gain over its mean member is tied to its error inconsistency
by an identity, :func:`pair_gain_terms`), and every claim check runs on null data (:func:`permuted_rho_null`,
:func:`sign_flip_null`, :func:`shuffled_votes_null`).
"""

from __future__ import annotations

from typing import Any

import ensdiv as ed
from ensdiv.chapters import sed
from ensdiv.chapters._presets import add_dry_blocks, chapter_preset
from ensdiv.chapters.synthesis.measures import (
    CONTROL,
    MEASURES,
    OUTCOMES,
    SIMILARITY_MEASURES,
    image_halves,
    measure_table,
    outcome_table,
    pair_gain_terms,
    relabelled,
    shuffled_votes_null,
    split_votes_resolved,
)
from ensdiv.chapters.synthesis.pools import ROLES, SOURCES, Member, Pool, Population, eval_sets, population
from ensdiv.chapters.synthesis.stats import (
    correlation_table,
    measure_matrix,
    member_bootstrap,
    member_halves,
    member_resample,
    partial_spearman,
    permuted_rho_null,
    ranked_table,
    relabelled_rho_null,
    rho_estimate,
    sign_flip_null,
    spearman_ci,
    spearman_many,
    strata,
)

__all__ = [
    "SLUG", "PRESETS", "preset", "ROLES", "SOURCES", "MEASURES", "OUTCOMES", "SIMILARITY_MEASURES", "CONTROL", "Member",
    "Pool", "Population", "eval_sets", "population", "measure_table", "outcome_table", "spearman_ci",
    "member_bootstrap", "member_resample", "spearman_many", "partial_spearman", "strata", "correlation_table",
    "measure_matrix", "ranked_table", "member_halves", "rho_estimate", "permuted_rho_null", "sign_flip_null",
    "image_halves", "pair_gain_terms", "shuffled_votes_null", "split_votes_resolved", "relabelled",
    "relabelled_rho_null",
]

SLUG = "synthesis"
# ---- presets ------------------------------------------------------------------------------------------------
_SETS = {"clean": "fmnist/test", "corruption": "fmnist-c/gaussian_noise/3", "rendition": "fmnist-r",
         "ood": "letters"}
_COMMON = {"seed": 0, "sets": _SETS, "sources": list(SOURCES), "sizes": [2, 3], "base": "arch/resnet",
           "categories": ["reinit", "hparam", "arch", "framework", "dataset"],
           "packed_preset": "tab01_efficient_ensembles"}
_SCALES = {
    "smoke": {"eval_subset": 300, "zoo_triples": 6, "dd_triples": 4, "per_run": 1, "n_boot": 50, "cka_images": 64,
              "n_null_draws": 20, "null_resamples": 50,
              "packed_methods": ["packed", "deep_ensemble"], "sed_methods": ["deep_ensemble", "sed_det"]},
    "cpu": {"eval_subset": 2000, "zoo_triples": 40, "dd_triples": 40, "per_run": 2, "n_boot": 1000,
            "n_null_draws": 200, "null_resamples": 200,
            "cka_images": 500, "packed_methods": ["packed", "batchensemble", "mimo", "masksembles", "deep_ensemble"],
            "sed_methods": list(sed.METHODS)},
    # paper scale: every pool on ImageNet sets; Packed-Ensembles' ImageNet models are Table 2's (PE-(3, 4, 1)
    # ResNet-50 and the baselines on its recipe)
    "paper": {"eval_subset": 5000, "zoo_triples": 100, "dd_triples": 100, "per_run": 2, "n_boot": 2000,
              "n_null_draws": 200, "null_resamples": 500,
              "cka_images": 1000, "packed_methods": ["packed", "batchensemble", "mimo", "masksembles",
                                                     "deep_ensemble"], "sed_methods": list(sed.METHODS),
              "packed_preset": "tab02_imagenet_ood_shift",
              "sets": {"clean": "imagenet/val", "corruption": "imagenet-c/gaussian_noise/3",
                       "rendition": "imagenet-r", "ood": "inaturalist"}},
}
_RANGES = {"n_boot": ed.config.at_least(10), "n_null_draws": ed.config.at_least(1),
           "null_resamples": ed.config.at_least(10), "per_run": ed.config.at_least(1),
           "zoo_triples": ed.config.at_least(0), "dd_triples": ed.config.at_least(0),
           "cka_images": ed.config.at_least(2)}


def _scaled() -> dict:
    return {"common": dict(_COMMON), **{s: dict(v) for s, v in _SCALES.items()}, "ranges": _RANGES}


PRESETS = {f"{SLUG}/{stem}": _scaled() for stem in
           ("measures_vs_outcomes", "measure_redundancy", "one_ensemble_every_measure")}
# a dry run of the paper presets (ensdiv run --dry-run): a few images, ensembles and members of every source (each
# other chapter's dry sizes apply to the models it trains)
add_dry_blocks(PRESETS, {"eval_subset": 8, "zoo_triples": 2, "dd_triples": 2, "per_run": 1, "n_boot": 50,
                         "n_null_draws": 5, "null_resamples": 20,
                         "cka_images": 8, "sizes": [2]},
               pick={"categories": ["reinit"], "packed_methods": ["packed", "deep_ensemble"],
                     "sed_methods": ["deep_ensemble", "sed_det"]})


def preset(stem: str, scale: str = "cpu", /, *, verbose: bool = True, **overrides: Any):
    """The resolved preset ``synthesis/<stem>`` at ``scale`` (see :func:`ensdiv.config.resolve_preset`)."""
    return chapter_preset(SLUG, PRESETS, stem, scale, verbose=verbose, **overrides)
