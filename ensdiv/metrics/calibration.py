"""Accuracy, NLL, Brier, ECE and OOD-detection metrics (packed-ensembles Table 1 and 2, SED Table 3).

Classification metrics take (N, C) scores of one model or of a combined ensemble (combine an
(M, N, C) ensemble first with :func:`ensdiv.ensembles.combine`). ECE uses torchmetrics, AUROC /
AUPR / FPR@TPR use scikit-learn.

OOD convention: **OOD samples are the positive class, and a higher score means "more OOD"**. Pass
uncertainties (entropy, mutual information, PDS) as they are and confidences (MSP, max logit, BMA)
negated. All three detection metrics are returned as fractions in [0, 1] (the papers print %).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ensdiv.errors import EnsdivError
from ensdiv.metrics._checks import as_tensor, check_ensemble, check_labels, check_probs

__all__ = ["accuracy", "nll", "brier", "ece", "auroc", "aupr", "fpr_at_tpr"]


def _tm_calibration_error():
    """torchmetrics' ECE, imported on first use (torchmetrics pulls in torchvision: seconds to import)."""
    from torchmetrics.functional.classification import multiclass_calibration_error

    return multiclass_calibration_error


def _scores_labels(scores: Any, labels: Any, name: str, *, probs: bool) -> tuple[torch.Tensor, torch.Tensor]:
    scores = check_probs(scores, name, ndim=2) if probs else check_ensemble(scores, name, ndim=2)
    labels = check_labels(labels, scores.shape[0], scores.shape[1])
    if scores.shape[0] == 0:
        raise EnsdivError(f"{name} holds no samples (N = 0).")
    return scores, labels


def accuracy(scores: Any, labels: Any) -> float:
    """Top-1 accuracy of (N, C) probabilities or logits (argmax), a fraction in [0, 1]."""
    scores, labels = _scores_labels(scores, labels, "scores", probs=False)
    return float((scores.argmax(-1) == labels).double().mean())


def nll(probs: Any, labels: Any, *, eps: float = 1e-12) -> float:
    """Mean negative log-likelihood -ln p_y of (N, C) probabilities (clamped at ``eps``)."""
    probs, labels = _scores_labels(probs, labels, "probs", probs=True)
    py = probs.gather(1, labels[:, None]).squeeze(1).double()
    return float(-py.clamp_min(eps).log().mean())


def brier(probs: Any, labels: Any) -> float:
    """Brier score Σ_c (p_c - [y = c])², averaged over samples (range [0, 2]; not divided by C)."""
    probs, labels = _scores_labels(probs, labels, "probs", probs=True)
    onehot = torch.nn.functional.one_hot(labels, probs.shape[1]).to(probs.dtype)
    return float(((probs - onehot) ** 2).sum(-1).double().mean())


def ece(probs: Any, labels: Any, *, n_bins: int = 15) -> float:
    """Expected calibration error: top-label, ``n_bins`` equal-width bins, L1 (Guo et al. 2017).

    ECE = Σ_b (|B_b| / N) |acc(B_b) - conf(B_b)| with conf the maximum probability; the definition
    packed-ensembles uses (through torch-uncertainty, 15 bins). Computed by torchmetrics'
    ``multiclass_calibration_error(norm="l1")``; bins are [k/n, (k+1)/n).

    Args:
        probs: probabilities, shape (N, C).
        labels: true classes, shape (N,).
        n_bins: number of equal-width confidence bins.

    Returns:
        A fraction in [0, 1].
    """
    probs, labels = _scores_labels(probs, labels, "probs", probs=True)
    if not isinstance(n_bins, int) or n_bins < 1:
        raise EnsdivError(f"n_bins must be a positive int, got {n_bins!r}.")
    return float(
        _tm_calibration_error()(
            probs.double(), labels, num_classes=probs.shape[1], n_bins=n_bins, norm="l1", validate_args=False
        )
    )


def _detection(score_id: Any, score_ood: Any) -> tuple[np.ndarray, np.ndarray]:
    sid = as_tensor(score_id, "score_id")
    sood = as_tensor(score_ood, "score_ood")
    for name, s in (("score_id", sid), ("score_ood", sood)):
        if s.ndim != 1:
            raise EnsdivError(
                f"{name} must be one score per sample, shaped (N,), got shape {tuple(s.shape)}."
            )
        if s.shape[0] == 0:
            raise EnsdivError(f"{name} is empty; OOD detection needs samples of both kinds.")
    y = np.concatenate([np.zeros(sid.shape[0]), np.ones(sood.shape[0])])
    s = np.concatenate([sid.double().cpu().numpy(), sood.double().cpu().numpy()])
    return y, s


def auroc(score_id: Any, score_ood: Any) -> float:
    """Area under the ROC curve for separating OOD (positive) from in-distribution samples.

    Higher score = more OOD. Ties count one half, so constant scores give 0.5.

    Args:
        score_id: scores of in-distribution samples, shape (N_id,).
        score_ood: scores of OOD samples, shape (N_ood,).
    """
    y, s = _detection(score_id, score_ood)
    from sklearn.metrics import roc_auc_score  # imported here: sklearn is slow to import

    return float(roc_auc_score(y, s))


def aupr(score_id: Any, score_ood: Any) -> float:
    """Area under the precision–recall curve with OOD as the positive class (average precision).

    Computed as scikit-learn's ``average_precision_score`` (step-wise, no interpolation). Its
    chance level is the OOD fraction N_ood / (N_id + N_ood).
    """
    y, s = _detection(score_id, score_ood)
    from sklearn.metrics import average_precision_score

    return float(average_precision_score(y, s))


def fpr_at_tpr(score_id: Any, score_ood: Any, *, tpr: float = 0.95) -> float:
    """False-positive rate at the first threshold where the OOD recall (TPR) reaches ``tpr`` (FPR95).

    OOD is positive and flagged when score >= threshold; the value is the fraction of
    in-distribution samples flagged at the highest threshold whose TPR is at least ``tpr``.
    """
    if not 0.0 < tpr <= 1.0:
        raise EnsdivError(f"tpr must be in (0, 1], got {tpr!r}.")
    y, s = _detection(score_id, score_ood)
    from sklearn.metrics import roc_curve

    fpr, tpr_curve, _ = roc_curve(y, s, drop_intermediate=False)
    return float(fpr[np.searchsorted(tpr_curve, tpr - 1e-12, side="left")])
