"""Diversity, similarity, uncertainty and calibration measures of the five papers, as functions on tensors.

Shapes: member logits/probabilities (M, N, C), member predictions (M, N), labels (N,).
Submodules: :mod:`~ensdiv.metrics.diversity` (prediction diversity), :mod:`~ensdiv.metrics.uncertainty`
(per-sample OOD scores), :mod:`~ensdiv.metrics.calibration` (accuracy, NLL, ECE, AUROC, ...),
:mod:`~ensdiv.metrics.gain` (ensemble gain), :mod:`~ensdiv.metrics.representation` (CKA),
:mod:`~ensdiv.metrics.attribution` (Eq. 7/8 of design-diversity), :mod:`~ensdiv.metrics.similarity`
(SAT score), :mod:`~ensdiv.metrics.sweep` (all C(M, k) ensembles at once).
"""

from ensdiv.metrics.attribution import attribution_diversity, attribution_variance_penalty, attributions
from ensdiv.metrics.calibration import accuracy, aupr, auroc, brier, ece, fpr_at_tpr, nll
from ensdiv.metrics.diversity import (
    conversion_rate,
    correlation_coefficient,
    disagreement,
    disagreement_matrix,
    double_fault,
    equitability,
    error_consistency,
    error_inconsistency,
    num_unique,
    oracle_disagreement,
    pair_counts,
    q_statistic,
    specialization_angle,
)
from ensdiv.metrics.gain import all_wrong_ratio, ensemble_improvement, error_reduction_rate
from ensdiv.metrics.representation import MinibatchCKA, cka, cka_map, gram_linear, gram_rbf, hsic
from ensdiv.metrics.similarity import SAT_EPS, SAT_IDENTICAL, sat_score, sat_score_one_side
from ensdiv.metrics.sweep import combination_index, ensemble_sweep
from ensdiv.metrics.uncertainty import (
    bma_confidence,
    expected_entropy,
    max_logit,
    max_softmax,
    mutual_information,
    pds,
    predictive_entropy,
)

__all__ = [
    # diversity
    "disagreement",
    "disagreement_matrix",
    "oracle_disagreement",
    "pair_counts",
    "q_statistic",
    "correlation_coefficient",
    "double_fault",
    "equitability",
    "num_unique",
    "error_inconsistency",
    "error_consistency",
    "conversion_rate",
    "specialization_angle",
    # uncertainty / OOD scores
    "pds",
    "bma_confidence",
    "predictive_entropy",
    "expected_entropy",
    "mutual_information",
    "max_softmax",
    "max_logit",
    # calibration / detection
    "accuracy",
    "nll",
    "brier",
    "ece",
    "auroc",
    "aupr",
    "fpr_at_tpr",
    # gain
    "ensemble_improvement",
    "error_reduction_rate",
    "all_wrong_ratio",
    # representation
    "cka",
    "hsic",
    "gram_linear",
    "gram_rbf",
    "MinibatchCKA",
    "cka_map",
    # attribution
    "attributions",
    "attribution_diversity",
    "attribution_variance_penalty",
    # attack similarity
    "sat_score",
    "sat_score_one_side",
    "SAT_EPS",
    "SAT_IDENTICAL",
    # sweeps
    "ensemble_sweep",
    "combination_index",
]
