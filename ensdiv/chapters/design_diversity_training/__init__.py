"""The design-diversity chapter, second half (Rosales, Munoz, Paulitsch): Fig. 8-12, Sec. 4.3.1, Table 2.

* a weight-sharing super-network (:mod:`ensdiv.models.supernet`), trained once by progressive shrinking
  from a trained full network, and eleven sub-networks of similar size extracted from it as ordinary
  models (batch norm recalibrated per sub-network) — Fig. 8, Fig. 9;
* jointly trained three-member ensembles of one architecture under the NCL losses of
  :mod:`ensdiv.losses.ncl` (independent, GNCL with four consensus rules, masked GNCL, balanced) and the
  attribution-variance loss (Eq. 8) — Fig. 10, Sec. 4.3.1;
* three ensembles compared on prediction, attribution and representation diversity — Table 2, Fig. 11, 12.

Evaluation sets, cached logits and Saliency maps, and the Eq. 7 sweep come from the first half
(:mod:`ensdiv.chapters.design_diversity`); a sub-network or a jointly trained member is an ``nn.Module``
carrying ``ensdiv_cache_id`` (what decides it) and ``ensdiv_name``, so those helpers cache its outputs too.

Every jointly trained ensemble (the NCL losses and the attribution penalty, which reaches the batch's inputs
through :data:`ensdiv.losses.INPUT_LOSSES`) is an ordinary ``ed.Joint`` recipe trained and cached by
:func:`ensdiv.train_recipe`.

The package: :mod:`.joint` (the jointly trained runs), :mod:`.diversity` (what the pages measure on members),
:mod:`.ensembles` (Table 2 / Fig. 11 / Fig. 12's ensembles per seed), :mod:`.presets`.
"""

from __future__ import annotations

from ensdiv.chapters import design_diversity as dd
from ensdiv.chapters.design_diversity.layers import corresponding_layers, corresponding_mean, layer_names
from ensdiv.chapters.design_diversity.supernet import select_configs, subnetworks, supernet
from ensdiv.chapters.design_diversity_training import diversity, ensembles, improvement, joint, presets
from ensdiv.chapters.design_diversity_training.diversity import (
    PAPER_TABLE2,
    attribution_methods,
    cka_between,
    ensemble_accuracy,
    equitability_per_sample,
    equitability_split,
    equitability_table,
    pair_diversity,
)
from ensdiv.chapters.design_diversity_training.ensembles import (
    FAMILY,
    budget_table,
    clean_accuracy,
    family,
    hetero_match,
    matched_recipes,
    three_ensembles,
)
from ensdiv.chapters.design_diversity_training.improvement import accuracy_spread, gain_over_best, mean_gain_null
from ensdiv.chapters.design_diversity_training.joint import (
    ATTRIBUTION_LOSS,
    CONTROL,
    EVAL_CONSENSUS,
    HEURISTICS,
    PAPER_FIG10_CLAIMS,
    JointRun,
    _attr_recipe,  # noqa: F401  (the tests read the sweep's recipes)
    attr_control,
    attr_sweep,
    consensus_correct,
    control_recipe,
    heuristic_runs,
    joint_members,
    joint_recipe,
    train_joint,
)
from ensdiv.chapters.design_diversity_training.presets import PRESETS, SLUG, preset

__all__ = [
    "SLUG", "PRESETS", "preset", "HEURISTICS", "PAPER_TABLE2", "PAPER_FIG10_CLAIMS", "SET_KEYS", "SET_LABELS",
    "JointRun", "joint_recipe", "train_joint", "joint_members", "supernet", "subnetworks", "select_configs",
    "pair_diversity", "attribution_methods", "ensemble_accuracy", "equitability_split", "equitability_table",
    "layer_names", "corresponding_layers", "corresponding_mean",
    "cka_between", "diversity_sweep", "chapter_logits", "chapter_labels", "chapter_attributions", "eval_set",
    "model_name", "chapter_models", "three_ensembles", "minmax", "nan_estimate", "member_estimates", "pearson",
    "correct", "ensemble_correct", "equitability_per_sample", "bootstrap_counts", "mean_estimates",
    "member_null", "permute_rows", "swap_within", "weighted_null", "member_effects", "shuffled_residuals",
    "attr_sweep", "heuristic_runs", "matched_recipes", "budget_table", "EVAL_CONSENSUS", "FAMILY", "family",
    "clean_accuracy", "hetero_match", "consensus_correct", "CONTROL", "control_recipe", "attr_control",
    "ATTRIBUTION_LOSS", "diversity", "ensembles", "joint", "presets", "gain_over_best", "accuracy_spread",
    "mean_gain_null", "deal_maps", "improvement",
]  # fmt: skip

SET_KEYS, SET_LABELS = dd.SET_KEYS, dd.SET_LABELS
chapter_logits, chapter_labels, chapter_attributions = dd.chapter_logits, dd.chapter_labels, dd.chapter_attributions
eval_set, model_name, chapter_models, diversity_sweep, minmax = (dd.eval_set, dd.model_name, dd.chapter_models,
                                                                 dd.diversity_sweep, dd.minmax)  # fmt: skip
eval_rows = dd.eval_rows
nan_estimate, member_estimates, pearson, correct, ensemble_correct = (dd.nan_estimate, dd.member_estimates, dd.pearson,
                                                                      dd.correct, dd.ensemble_correct)  # fmt: skip
bootstrap_counts, mean_estimates, member_null, permute_rows, swap_within, weighted_null = (
    dd.bootstrap_counts, dd.mean_estimates, dd.member_null, dd.permute_rows, dd.swap_within,
    dd.weighted_null)  # fmt: skip
member_effects, shuffled_residuals = dd.evidence.member_effects, dd.evidence.shuffled_residuals
deal_maps = dd.deal_maps
