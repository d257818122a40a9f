"""Per-sample uncertainty and OOD scores of an ensemble (SED §3.3, packed-ensembles Appendix E).

Inputs are member probabilities ``probs`` (M, N, C) (or logits for :func:`max_logit`). Every
function returns one score per sample, shape (N,). Direction: :func:`pds`, the entropies and
:func:`mutual_information` grow with uncertainty (higher = more OOD); :func:`bma_confidence`,
:func:`max_softmax` and :func:`max_logit` are confidences (higher = more in-distribution), so pass
their negation as an OOD score to :func:`~ensdiv.metrics.auroc`.
"""

from __future__ import annotations

from typing import Any

import torch

from ensdiv.metrics._checks import check_ensemble, check_probs

__all__ = [
    "pds",
    "bma_confidence",
    "predictive_entropy",
    "expected_entropy",
    "mutual_information",
    "max_softmax",
    "max_logit",
]


def _entropy(p: torch.Tensor) -> torch.Tensor:
    return -torch.special.xlogy(p, p).sum(-1) + 0.0  # + 0.0 turns -0.0 into 0.0


def pds(probs: Any, *, normalize: bool = True) -> torch.Tensor:
    """Predictive Diversity Score, Eq. 8 of SED: η = (1/C) Σ_c max_m p_c^m(x).

    A continuous relaxation of #unique: for one-hot members Σ_c max_m p_c^m is the number of
    distinct predicted classes. Higher = more diverse members = more likely OOD.

    Args:
        probs: member probabilities, shape (M, N, C).
        normalize: divide by C as in Eq. 8 (range [1/C, min(M, C)/C]); ``False`` gives the
            un-normalised sum (range [1, min(M, C)], equal to #unique for one-hot members). Both
            rank samples identically, so AUROC does not depend on it.

    Returns:
        Shape (N,).
    """
    probs = check_probs(probs)
    s = probs.max(dim=0).values.sum(-1)
    return s / probs.shape[-1] if normalize else s


def bma_confidence(probs: Any) -> torch.Tensor:
    """Bayesian-model-averaging confidence, Eq. 7 of SED: η = max_c (1/M) Σ_m p_c^m(x).

    This is the maximum softmax probability of the mean prediction; higher = more confident
    (in-distribution). Use ``-bma_confidence(probs)`` as an OOD score.

    Args:
        probs: member probabilities, shape (M, N, C).

    Returns:
        Shape (N,).
    """
    probs = check_probs(probs)
    return probs.mean(0).max(-1).values


def predictive_entropy(probs: Any) -> torch.Tensor:
    """Entropy of the mean prediction, H[(1/M) Σ_m p^m] (total uncertainty), natural log.

    Args:
        probs: member probabilities (M, N, C), or a single model's (N, C).
    """
    probs = check_probs(probs, ndim=(2, 3))
    mean = probs.mean(0) if probs.ndim == 3 else probs
    return _entropy(mean)


def expected_entropy(probs: Any) -> torch.Tensor:
    """Mean of the members' entropies, (1/M) Σ_m H[p^m] (aleatoric part), natural log.

    Args:
        probs: member probabilities, shape (M, N, C).
    """
    probs = check_probs(probs)
    return _entropy(probs).mean(0)


def mutual_information(probs: Any) -> torch.Tensor:
    """Mutual information between prediction and member (epistemic part): predictive - expected entropy.

    Non-negative by Jensen's inequality; tiny negative rounding errors are clamped to 0.

    Args:
        probs: member probabilities, shape (M, N, C).
    """
    probs = check_probs(probs)
    return (_entropy(probs.mean(0)) - _entropy(probs).mean(0)).clamp_min(0.0)


def max_softmax(probs: Any) -> torch.Tensor:
    """Maximum softmax probability (MSP) of the mean prediction (or of one model's (N, C) probs)."""
    probs = check_probs(probs, ndim=(2, 3))
    mean = probs.mean(0) if probs.ndim == 3 else probs
    return mean.max(-1).values


def max_logit(logits: Any) -> torch.Tensor:
    """Maximum logit (of the mean logits for an (M, N, C) ensemble, or of one model's (N, C))."""
    logits = check_ensemble(logits, "logits", ndim=(2, 3))
    mean = logits.mean(0) if logits.ndim == 3 else logits
    return mean.max(-1).values
