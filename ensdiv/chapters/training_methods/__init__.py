"""The training-methods chapter (Gontijo-Lopes, Dauphin, Cubuk, *No One Representation to Rule Them All*,
ICLR 2022): its population bookkeeping, calibrated pairs with the base model, specialisation, greedy
ensembles, feature probes, the paper's Appendix tables, the paper-scale folder reader, and its presets.

**The analysis population** (§3.2). One base model, the zoo's ``arch/resnet`` (the analogue of the
paper's ResNet-50 + RandAugment), and every other model of the zoo's five categories: ``reinit`` (the
initialisation alone re-drawn), ``hparam``, ``arch``, ``framework`` (SimCLR pre-training then fine-tuning
or a linear probe, soft and hard distillation from teachers that are not the base) and ``dataset``
(pre-trained on another source, then fine-tuned end to end or linear-probed). A model enters the main
analysis only when its *validation* accuracy lies in the band: the paper's 74-78 % around its 76.2 %
base, carried to our base as a ratio of errors at cpu scale (:func:`error_ratio_band`), the absolute
band at paper scale; a model outside it is excluded with a :class:`PopulationWarning` naming it, and a
category with fewer than three models in the band draws one too. Every model is temperature-scaled on
the validation split (:func:`fit_temperatures` refuses the test split) and ensembles average calibrated
probabilities. The test split is used for reporting only.

Every model of the analysis is a recipe of the shared zoo (:mod:`ensdiv.chapters.zoo`);
:func:`chapter_recipes` leaves out a distilled model whose teacher is the base (it would copy the base's
errors into Framework).
"""

from __future__ import annotations

from typing import Any

import torch

from ensdiv.chapters._presets import add_dry_blocks, chapter_preset
from ensdiv.chapters.training_methods.additions import (
    addition_tables,
    centred_gain_null,
    first_additions_compared,
    relabelled_additions_null,
    relabelled_sets_null,
    set_means,
    swapped_curves_null,
    swapped_null,
    trained_differently,
)
from ensdiv.chapters.training_methods.analysis import (
    GROUPS,
    class_specialization,
    concat_curve,
    downstream_probes,
    downstream_splits,
    features_needed,
    fig05_lists,
    greedy_with_low,
    high_low_lists,
    k_grid,
    leaked_classes,
    loss_and_data,
    other_loss_or_data,
    pair_angles,
    probe_device,
    probe_features,
    training_sets,
    transfer_candidates,
)
from ensdiv.chapters.training_methods.band import BAND_MODES, band_reading, error_ratio_band
from ensdiv.chapters.training_methods.estimates import (
    CATEGORY_COLUMNS,
    DIVERSE_CATEGORIES,
    NAN,
    angle_gap_estimates,
    base_category,
    bootstrap,
    category_correlation,
    category_estimates,
    class_estimates,
    class_share,
    class_spread,
    combination_gain_images,
    combination_gains,
    downstream_choices,
    downstream_estimates,
    ensemble_correct,
    features_needed_estimates,
    first_additions,
    group_share,
    highest_of,
    mean_of,
    missing_estimate,
    model_correlation,
    pair_correct,
    pair_gap,
    pair_share,
    per_model,
)
from ensdiv.chapters.training_methods.groups import (
    FMNIST_CLASS_GROUPS,
    class_groups,
    group_p,
    same_size_groupings,
)
from ensdiv.chapters.training_methods.model_groups import (
    MIN_MODELS,
    attach_null,
    bound_null,
    category_groups,
    group_estimates,
    group_null,
    trend_estimate,
    trend_null,
)
from ensdiv.chapters.training_methods.paper import (
    BASE,
    CATEGORIES,
    CATEGORY_LABELS,
    DRY_POPULATION,
    PAPER_BAND,
    PAPER_BAND_CENTRE,
    PAPER_BASE_ACCURACY,
    PAPER_DOWN_MODELS,
    PAPER_FEATURES_NEEDED,
    PAPER_LAYOUT,
    PAPER_LOW_ERROR_RATIO,
    PAPER_PAIRS,
    PAPER_TABLE1,
    PAPER_TABLE2,
    PAPER_TABLE3,
    PAPER_TABLE4,
    PAPER_TIMM,
    SLUG,
    VAL_SET,
    PopulationWarning,
)
from ensdiv.chapters.training_methods.population import (
    Outputs,
    Population,
    analysis_population,
    calibrated_probs,
    category_means,
    category_trend,
    chapter_recipes,
    check_aligned,
    fit_temperatures,
    load_outputs,
    load_paper_outputs,
    model_table,
    paper_category_values,
    paper_model_table,
    population,
    representative,
)
from ensdiv.train import probe

__all__ = [
    "SLUG", "PRESETS", "preset", "CATEGORIES", "CATEGORY_LABELS", "BASE", "VAL_SET", "PAPER_TABLE1",
    "PAPER_TABLE2", "PAPER_TABLE3", "PAPER_TABLE4", "PAPER_BASE_ACCURACY", "PAPER_FEATURES_NEEDED", "PAPER_TIMM",
    "PAPER_LAYOUT",
    "PAPER_BAND", "PAPER_BAND_CENTRE", "BAND_MODES", "error_ratio_band", "band_reading",
    "PopulationWarning", "Population", "Outputs", "chapter_recipes", "load_outputs", "fit_temperatures",
    "analysis_population", "model_table", "paper_model_table", "category_means", "category_trend",
    "paper_category_values", "representative", "pair_angles", "class_specialization", "greedy_with_low",
    "check_aligned", "probe_features", "concat_curve", "features_needed", "downstream_splits", "downstream_probes",
    "training_sets", "leaked_classes", "transfer_candidates",
    "fig05_lists", "high_low_lists", "setup", "population", "calibrated_probs", "GROUPS", "load_paper_outputs",
    "NAN", "CATEGORY_COLUMNS", "DIVERSE_CATEGORIES", "pair_correct", "ensemble_correct", "category_estimates",
    "highest_of", "mean_of", "model_correlation", "category_correlation", "angle_gap_estimates", "class_spread",
    "class_share", "class_estimates", "first_additions", "combination_gains", "features_needed_estimates",
    "downstream_choices", "bootstrap", "base_category", "missing_estimate", "FMNIST_CLASS_GROUPS", "class_groups",
    "group_share", "group_p", "same_size_groupings",
    "PAPER_LOW_ERROR_RATIO", "loss_and_data", "other_loss_or_data", "PAPER_PAIRS", "PAPER_DOWN_MODELS",
    "DRY_POPULATION", "probe_device", "downstream_estimates",
    "addition_tables", "centred_gain_null", "first_additions_compared", "relabelled_additions_null",
    "swapped_curves_null", "swapped_null", "k_grid", "relabelled_sets_null", "set_means",
    "trained_differently", "combination_gain_images",
    "MIN_MODELS", "attach_null", "bound_null", "category_groups", "group_estimates", "group_null", "trend_estimate",
    "trend_null",
    "pair_gap", "pair_share", "per_model",
]

# ---- presets -------------------------------------------------------------------------------------------
# band, band_mode (population.BAND_MODES): cpu carries the paper's 74-78 % around its 76.2 % base to our base as a
# ratio of errors (0.924-1.092 x the base's validation error; population.error_ratio_band); paper applies it
# as the absolute band; smoke (models of one epoch on 256 images) takes +-15 points around the base.
# The Table-A page lists every model and each page warns about every model the band leaves out.
# n_resamples: bootstrap resamples of every interval of the pages' claims (over test images, or over models)
_COMMON = {
    "common": {"seed": 0, "models": [], "data_root": "", "band": list(PAPER_BAND), "band_mode": "error_ratio",
               "n_resamples": 1000},
    "smoke": {"band": [-15.0, 15.0], "band_mode": "points", "n_resamples": 200},
    "paper": {"band_mode": "absolute"},
    "types": {"models": list[str]},  # []: every model of models.csv
}
# the pairs of Figs. 3, 4, 6: the paper's own at paper scale (PAPER_PAIRS, taken even outside the band, as the
# paper did), one in-band model per category otherwise
_PAIRS = {"common": {"prefer_reinit": "reinit/resnet-s1", "prefer_arch": "arch/efficientnet",
                     "prefer_dataset": "dataset/resnet-letters-ft", "pairs_outside_band": False},
          "paper": {**PAPER_PAIRS, "pairs_outside_band": True}}
_PROBE = {
    "common": {"normalize": "l2", "fractions": [0.0, 0.25, 0.5, 0.75, 1.0], "target_gap": 0.0, "probe_device": "cpu"},
    "smoke": {"probe_train": 400, "probe_val": 200, "probe_test": 400, "l2_grid": [1e-2, 1e-4], "probe_iter": 20,
              "probe_dtype": "float32", "draws": 1, "k_step": 4, "per_category": 1},
    "cpu": {"probe_train": 5000, "probe_val": 2000, "probe_test": 0, "l2_grid": [1e-2, 1e-3, 1e-4, 1e-5, 1e-6],
            "probe_iter": 50, "probe_dtype": "float32", "draws": 2, "k_step": 32, "per_category": 1},
    # paper: Kornblith et al.'s grid has 45 values; 10 (one per decade) here, multiples of 256 dimensions (§4.6)
    "paper": {"probe_train": 0, "probe_val": 0, "probe_test": 0, "l2_grid": list(probe.DEFAULT_L2_GRID),
              "probe_iter": 100, "probe_dtype": "float32", "draws": 3, "k_step": 256, "per_category": 0,
              "probe_device": "auto"},
}


def _merge(*specs: dict) -> dict:
    out: dict = {s: {} for s in ("common", "smoke", "cpu", "paper", "types")}
    for spec in specs:
        for s, v in spec.items():
            out[s].update(v)
    return out


# Fig. 7: one model per category; none has learnt a class of the downstream digits (the letters hold no digit;
# the glyph source renders them, analysis.transfer_candidates would exclude it)
_DOWN_MODELS = [BASE, "arch/vit", "framework/resnet-simclr-ft", "reinit/resnet-s1", "dataset/resnet-letters-ft"]
PRESETS: dict = {
    "training-methods/fig01_error_inconsistency": _merge(_COMMON),
    "training-methods/fig02_ensemble_accuracy": _merge(_COMMON, {"common": {"ci": 0.90}}),
    "training-methods/fig03_specialization_angles": _merge(_COMMON, _PAIRS, {"common": {"bins": 30}}),
    "training-methods/fig04_per_class_specialization": _merge(_COMMON, _PAIRS, {"common": {"n_perm": 1000},
                                                               "smoke": {"n_perm": 50}}),
    # low_gap / low_mode: the low models make >= 1.315 x the errors of the least accurate high model (the paper's
    # BiT-1k 82.85 % vs 77.44 %, carried over as a ratio of errors); smoke: any model below the high ones
    "training-methods/fig05_greedy_low_accuracy": _merge(_COMMON, {
        "common": {"n_high": 3, "low_gap": round(PAPER_LOW_ERROR_RATIO, 4), "low_mode": "error_ratio", "max_size": 5},
        "smoke": {"n_high": 2, "low_gap": 0.0, "low_mode": "points"}}),
    # paper: §4.6 pairs the base with ResNet-50, EfficientNet-B0 and CLIP-S (one model per category)
    "training-methods/fig06_feature_overlap": _merge(_COMMON, _PROBE, _PAIRS, {
        "paper": {"prefer_arch": "EfficientNet-B0", "per_category": 1}}),
    "training-methods/fig07_downstream_transfer": _merge(_COMMON, _PROBE, {
        "common": {"downstream_set": "pretrain/digits", "down_models": _DOWN_MODELS},
        "paper": {"down_models": PAPER_DOWN_MODELS},  # §4.7's three; [] = every model with role 'high'
        "types": {"down_models": list[str]}}),
    "training-methods/fig08_pair_counts": _merge(_COMMON),
    "training-methods/tabA_model_table": _merge(_COMMON),
}
# a dry run of the paper presets (ensdiv run --dry-run): the fake folder of DRY_POPULATION, small probes
add_dry_blocks(PRESETS, {"n_resamples": 200, "n_perm": 50, "draws": 1, "probe_iter": 10, "k_step": 4,
                         "l2_grid": list(probe.DEFAULT_L2_GRID)[:2]})


def preset(stem: str, scale: str = "cpu", /, *, verbose: bool = True, **overrides: Any):
    """The resolved preset ``training-methods/<stem>`` at ``scale`` (see :func:`ensdiv.config.resolve_preset`)."""
    return chapter_preset(SLUG, PRESETS, stem, scale, verbose=verbose, **overrides)


def setup(cfg: Any) -> tuple[Outputs, torch.Tensor, Population]:
    """What every page starts from: the outputs, the temperatures (fitted on the validation split) and the
    analysis population (warnings name every model the band leaves out)."""
    out = load_outputs(cfg)
    temps = fit_temperatures(out.logits["val"], out.labels["val"], split="val")
    pop = population(cfg, out)
    print(pop.describe())
    if cfg["band_mode"] == "error_ratio":
        print(band_reading(pop, cfg["band_mode"]))
    return out, temps, pop
