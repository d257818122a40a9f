"""Accuracy, NLL, Brier, ECE and OOD-detection metrics (packed-ensembles Table 1 and 2, SED Table 3).

Classification metrics take (N, C) scores of one model or of a combined ensemble (combine an
(M, N, C) ensemble first, e.g. with :func:`ensdiv.ensembles.combine`). Library calls: ECE is
torchmetrics' ``multiclass_calibration_error``; AUROC, AUPR and FPR@TPR are torchmetrics'
``binary_auroc``, ``binary_average_precision`` and ``binary_roc``. Accuracy, NLL and Brier are
one line each and are tested against scikit-learn and torchmetrics.

OOD convention: **OOD samples are the positive class, and a higher score means "more OOD"**. Pass
uncertainties (entropy, mutual information, PDS) as they are and confidences (MSP, max logit, BMA)
negated. All three detection metrics are fractions in [0, 1] (the papers print %). They depend on
the scores only through their order, so the scores are replaced by their normalised ranks before
torchmetrics sees them: torchmetrics would otherwise apply a sigmoid to scores outside [0, 1],
which rounds large scores to 1.0 and creates false ties.

Every result is a 0-d tensor in :func:`~ensdiv.metrics.checks.compute_dtype` of the scores; the
torchmetrics-backed ones accumulate in float32 internally, so they carry ~1e-7 relative precision.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ensdiv.errors import InvalidInputError
from ensdiv.metrics.checks import as_tensor, check_ensemble, check_labels, check_probs, compute_dtype

__all__ = ["accuracy", "nll", "brier", "ece", "auroc", "aupr", "fpr_at_tpr"]


def _scores_labels(
    scores: Any, labels: Any, name: str, *, probs: bool, validate: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    check = check_probs if probs else check_ensemble
    scores = check(scores, name, ndim=2, validate=validate)
    labels = check_labels(labels, scores.shape[0], scores.shape[1], validate=validate)
    if validate and scores.shape[0] == 0:
        raise InvalidInputError(f"{name} holds no samples (N = 0).")
    return scores.to(compute_dtype(scores.dtype)), labels


def accuracy(scores: Any, labels: Any, *, validate_args: bool = True) -> torch.Tensor:
    """Top-1 accuracy (packed-ensembles Table 1 "Acc"): the fraction of samples whose argmax is the label.

    Args:
        scores: probabilities or logits (any monotone score), shape (N, C).
        labels: true classes, shape (N,).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        A fraction in [0, 1].

    Shape:
        scores (N, C), labels (N,) -> () (0-d).

    Example:
        >>> accuracy(torch.tensor([[0.9, 0.1], [0.4, 0.6], [0.7, 0.3]]), torch.tensor([0, 1, 1]))
        tensor(0.6667)
    """
    scores, labels = _scores_labels(scores, labels, "scores", probs=False, validate=validate_args)
    return (scores.argmax(-1) == labels).to(scores.dtype).mean()


def nll(probs: Any, labels: Any, *, eps: float = 1e-12, validate_args: bool = True) -> torch.Tensor:
    """Mean negative log-likelihood -(1/N) Σ_n ln p_{y_n} (packed-ensembles Table 1 "NLL").

    Ambiguity resolved: probabilities are clamped at ``eps`` so a zero probability of the true
    class gives a large finite value, not infinity.

    Args:
        probs: probabilities, shape (N, C).
        labels: true classes, shape (N,).
        eps: floor of p_y.
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        Non-negative, in nats.

    Shape:
        probs (N, C), labels (N,) -> () (0-d).

    Example:
        >>> nll(torch.tensor([[0.5, 0.5], [0.25, 0.75]], dtype=torch.float64), torch.tensor([0, 1]))
        tensor(0.4904, dtype=torch.float64)
    """
    probs, labels = _scores_labels(probs, labels, "probs", probs=True, validate=validate_args)
    return torch.nn.functional.nll_loss(probs.clamp_min(eps).log(), labels)


def brier(probs: Any, labels: Any, *, validate_args: bool = True) -> torch.Tensor:
    """Multiclass Brier score (1/N) Σ_n Σ_c (p_nc - [y_n = c])² (Brier 1950).

    Ambiguity resolved: summed over classes and not halved (range [0, 2]), as scikit-learn's
    multiclass ``brier_score_loss``.

    Args:
        probs: probabilities, shape (N, C).
        labels: true classes, shape (N,).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        A value in [0, 2].

    Shape:
        probs (N, C), labels (N,) -> () (0-d).

    Example:
        >>> brier(torch.tensor([[1.0, 0.0], [0.5, 0.5]]), torch.tensor([0, 1]))  # (0 + 0.5) / 2
        tensor(0.2500)
    """
    probs, labels = _scores_labels(probs, labels, "probs", probs=True, validate=validate_args)
    onehot = torch.nn.functional.one_hot(labels, probs.shape[1]).to(probs.dtype)
    return ((probs - onehot) ** 2).sum(-1).mean()


def ece(probs: Any, labels: Any, *, n_bins: int = 15, validate_args: bool = True) -> torch.Tensor:
    """Expected calibration error: top-label, ``n_bins`` equal-width bins, L1 (Guo et al. 2017).

    ``ECE = Σ_b (|B_b| / N) |acc(B_b) - conf(B_b)|`` with conf the maximum probability; the definition
    packed-ensembles uses (Table 1, through torch-uncertainty, 15 bins). Computed by torchmetrics'
    ``multiclass_calibration_error(norm="l1")`` in float64; bins are [k/n, (k+1)/n).

    Args:
        probs: probabilities, shape (N, C).
        labels: true classes, shape (N,).
        n_bins: number of equal-width confidence bins.
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        A fraction in [0, 1].

    Shape:
        probs (N, C), labels (N,) -> () (0-d).

    Example:
        >>> p = torch.tensor([[0.8, 0.2], [0.8, 0.2], [0.4, 0.6]])  # confidences 0.8, 0.8, 0.6
        >>> ece(p, torch.tensor([0, 1, 1]), n_bins=10)  # 2/3 |0.5 - 0.8| + 1/3 |1 - 0.6|
        tensor(0.3333)
    """
    probs, labels = _scores_labels(probs, labels, "probs", probs=True, validate=validate_args)
    if not isinstance(n_bins, int) or n_bins < 1:
        raise InvalidInputError(f"n_bins must be a positive int, got {n_bins!r}.")
    from torchmetrics.functional.classification import multiclass_calibration_error  # slow import

    out = multiclass_calibration_error(
        probs.double(), labels, num_classes=probs.shape[1], n_bins=n_bins, norm="l1", validate_args=False
    )
    return out.to(probs.dtype)


def _detection(score_id: Any, score_ood: Any, validate: bool) -> tuple[torch.Tensor, torch.Tensor, torch.dtype]:
    """Normalised ranks in [0, 1] of the concatenated scores, OOD targets (1 = OOD), result dtype."""
    sid = as_tensor(score_id, "score_id", validate=validate)
    sood = as_tensor(score_ood, "score_ood", validate=validate)
    if validate:
        for name, s in (("score_id", sid), ("score_ood", sood)):
            if s.ndim != 1:
                raise InvalidInputError(
                    f"{name} must be one score per sample, shaped (N,), got shape {tuple(s.shape)}."
                )
            if s.shape[0] == 0:
                raise InvalidInputError(f"{name} is empty; OOD detection needs samples of both kinds.")
    dt = compute_dtype(torch.promote_types(sid.dtype, sood.dtype))
    s = torch.cat([sid.reshape(-1).to(torch.float64), sood.reshape(-1).to(torch.float64)])
    values, rank = torch.unique(s, return_inverse=True)
    ranks = rank.to(torch.float64) / max(values.numel() - 1, 1)
    target = torch.cat([torch.zeros(sid.numel(), dtype=torch.long), torch.ones(sood.numel(), dtype=torch.long)])
    return ranks, target.to(ranks.device), dt


def auroc(score_id: Any, score_ood: Any, *, validate_args: bool = True) -> torch.Tensor:
    """Area under the ROC curve for separating OOD (positive) from in-distribution samples.

    packed-ensembles Table 1 "AUC", SED Table 3. Higher score = more OOD. Ties count one half, so
    constant scores give 0.5. Computed by torchmetrics' ``binary_auroc`` (exact, no binning).

    Args:
        score_id: scores of in-distribution samples, shape (N_id,).
        score_ood: scores of OOD samples, shape (N_ood,).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        A fraction in [0, 1] (0.5 = chance).

    Shape:
        (N_id,), (N_ood,) -> () (0-d).

    Example:
        >>> auroc(torch.tensor([0.1, 0.4]), torch.tensor([0.3, 0.9]))  # 3 of 4 pairs ordered right
        tensor(0.7500)
    """
    ranks, target, dt = _detection(score_id, score_ood, validate_args)
    from torchmetrics.functional.classification import binary_auroc

    return binary_auroc(ranks, target, validate_args=False).to(dt)


def aupr(score_id: Any, score_ood: Any, *, validate_args: bool = True) -> torch.Tensor:
    """Area under the precision–recall curve with OOD as the positive class (packed-ensembles Table 1 "AUPR").

    Ambiguity resolved: average precision, Σ_k (R_k - R_{k-1}) P_k (step-wise, no interpolation),
    as torchmetrics' ``binary_average_precision`` and scikit-learn compute it. Its chance level is
    the OOD fraction N_ood / (N_id + N_ood).

    Args:
        score_id: scores of in-distribution samples, shape (N_id,).
        score_ood: scores of OOD samples, shape (N_ood,).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        A fraction in [0, 1].

    Shape:
        (N_id,), (N_ood,) -> () (0-d).

    Example:
        >>> aupr(torch.tensor([0.1, 0.4]), torch.tensor([0.3, 0.9]))  # (1/2)·1 + (1/2)·(2/3)
        tensor(0.8333)
    """
    ranks, target, dt = _detection(score_id, score_ood, validate_args)
    from torchmetrics.functional.classification import binary_average_precision

    return binary_average_precision(ranks, target, validate_args=False).to(dt)


def fpr_at_tpr(score_id: Any, score_ood: Any, *, tpr: float = 0.95, validate_args: bool = True) -> torch.Tensor:
    """False-positive rate at the first threshold where the OOD recall (TPR) reaches ``tpr`` (FPR95).

    packed-ensembles Table 1 "FPR95". OOD is positive and flagged when score >= threshold; the
    value is the fraction of in-distribution samples flagged at the highest threshold whose TPR is
    at least ``tpr``. The ROC curve is torchmetrics' ``binary_roc`` (every threshold kept).

    Args:
        score_id: scores of in-distribution samples, shape (N_id,).
        score_ood: scores of OOD samples, shape (N_ood,).
        tpr: the recall to reach, in (0, 1].
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        A fraction in [0, 1].

    Shape:
        (N_id,), (N_ood,) -> () (0-d).

    Example:
        >>> fpr_at_tpr(torch.tensor([0.1, 0.4]), torch.tensor([0.3, 0.9]))  # catching 0.3 flags 0.4 too
        tensor(0.5000)
    """
    if not 0.0 < tpr <= 1.0:
        raise InvalidInputError(f"tpr must be in (0, 1], got {tpr!r}.")
    ranks, target, dt = _detection(score_id, score_ood, validate_args)
    from torchmetrics.functional.classification import binary_roc

    fpr, tpr_curve, _ = binary_roc(ranks, target, validate_args=False)
    n_ood = int(target.sum())
    tps = (tpr_curve.double() * n_ood).round()  # exact true-positive counts
    need = torch.tensor([float(math.ceil(tpr * n_ood - 1e-9))], dtype=torch.float64, device=tps.device)
    idx = torch.searchsorted(tps, need, side="left")
    return fpr[idx.clamp_max(fpr.numel() - 1)].reshape(()).to(dt)
