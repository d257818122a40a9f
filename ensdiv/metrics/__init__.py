"""Diversity, similarity, uncertainty and calibration measures of the five papers, as functions on tensors.

Shapes: member logits/probabilities (M, N, C), member predictions (M, N), labels (N,).
Submodules: :mod:`~ensdiv.metrics.diversity` (prediction diversity), :mod:`~ensdiv.metrics.consistency`
(two-model measures of training-methods), :mod:`~ensdiv.metrics.uncertainty` (per-sample OOD
scores), :mod:`~ensdiv.metrics.calibration` (accuracy, NLL, ECE, AUROC, ...),
:mod:`~ensdiv.metrics.gain` (ensemble gain), :mod:`~ensdiv.metrics.multilabel` (VOC's 11-point mAP),
:mod:`~ensdiv.metrics.representation` (CKA),
:mod:`~ensdiv.metrics.attribution` (Eq. 7/8 of design-diversity), :mod:`~ensdiv.metrics.similarity`
(SAT score), :mod:`~ensdiv.metrics.sweep` (all C(M, k) ensembles at once),
:mod:`~ensdiv.metrics.combine` (the combination rules, re-exported by :mod:`ensdiv.ensembles`) and
:mod:`~ensdiv.metrics.checks` (the shared input checks and dtype rule).

The contract (torchmetrics' functional style):

* Every metric returns a :class:`torch.Tensor`, 0-d for a scalar. Floating inputs are computed in
  float32 for bfloat16/float16 and in their own dtype otherwise, and the result has that dtype;
  metrics of integer predictions, labels or boolean indicators return float64 (CKA/HSIC compute in
  float64 and return their inputs' dtype). See :func:`~ensdiv.metrics.checks.compute_dtype`.
* Every metric takes a keyword-only ``validate_args: bool = True``; ``False`` runs no input check
  (array-likes are still converted to tensors). Options that select a formula (an unknown
  ``reduction``, ``kernel``, ...) raise either way.
* A bad input raises :class:`~ensdiv.errors.InvalidInputError`, both an
  :class:`~ensdiv.errors.EnsdivError` and a :class:`ValueError`. The probability check accepts row
  sums within max(1e-4, 8 · eps(dtype)) of 1, so a bfloat16 softmax passes.

Exceptions to "returns a tensor", where a tensor makes no sense:

* :func:`pair_counts` returns a dict of four named (M, M) tensors (N11, N10, N01, N00).
* :func:`ensemble_sweep` returns a pandas DataFrame: one row of mixed columns (member tuples,
  names, numbers) per ensemble.
* :class:`MinibatchCKA` is an accumulator class, not a metric (its ``compute`` returns a tensor).
* :data:`SAT_EPS` and :data:`SAT_IDENTICAL` are float constants.
* the attribution-variance penalty of Eq. 8 is a training loss: :func:`ensdiv.losses.attribution_variance`.
* :func:`attributions` and :func:`gram_linear` / :func:`gram_rbf` / :func:`combination_index`
  return tensors but are inputs to metrics rather than metrics.
"""

from ensdiv.metrics.attribution import attribution_diversity, attributions
from ensdiv.metrics.attribution_sweep import attribution_gram, ensemble_attribution_diversity, normalize_attributions
from ensdiv.metrics.calibration import accuracy, aupr, auroc, brier, ece, fpr_at_tpr, nll
from ensdiv.metrics.consistency import conversion_rate, error_consistency, error_inconsistency, specialization_angle
from ensdiv.metrics.diversity import (
    correlation_coefficient,
    disagreement,
    disagreement_matrix,
    double_fault,
    equitability,
    num_unique,
    oracle_disagreement,
    pair_counts,
    q_statistic,
)
from ensdiv.metrics.gain import all_wrong_ratio, ensemble_improvement, error_reduction_rate
from ensdiv.metrics.multilabel import average_precision_11pt, mean_average_precision_11pt
from ensdiv.metrics.representation import MinibatchCKA, cka, cka_map, gram_linear, gram_rbf, hsic
from ensdiv.metrics.similarity import SAT_EPS, SAT_IDENTICAL, sat_score, sat_score_one_side
from ensdiv.metrics.sweep import combination_index, ensemble_sweep
from ensdiv.metrics.topk import topk_accuracy
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
    "attribution_gram",
    "ensemble_attribution_diversity",
    "normalize_attributions",
    # multi-label (VOC's 11-point mAP)
    "average_precision_11pt",
    "mean_average_precision_11pt",
    # top-k
    "topk_accuracy",
    # attack similarity
    "sat_score",
    "sat_score_one_side",
    "SAT_EPS",
    "SAT_IDENTICAL",
    # sweeps
    "ensemble_sweep",
    "combination_index",
]
