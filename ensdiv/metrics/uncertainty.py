"""Per-sample uncertainty and OOD scores of an ensemble (SED §3.3, packed-ensembles Appendix E).

Inputs are member probabilities ``probs`` (M, N, C) (or logits for :func:`max_logit`). Every
function returns one score per sample, shape (N,), computed and returned in
:func:`~ensdiv.metrics.checks.compute_dtype` of the input (float32 for bf16/fp16 input, so a
bfloat16 softmax is accepted and summed without further loss). Direction: :func:`pds`, the
entropies and :func:`mutual_information` grow with uncertainty (higher = more OOD);
:func:`bma_confidence`, :func:`max_softmax` and :func:`max_logit` are confidences (higher = more
in-distribution), so pass their negation as an OOD score to :func:`~ensdiv.metrics.auroc`.
Entropies use the natural log.
"""

from __future__ import annotations

from typing import Any

import torch

from ensdiv.metrics.checks import check_ensemble, check_probs, compute_dtype

__all__ = [
    "pds",
    "bma_confidence",
    "predictive_entropy",
    "expected_entropy",
    "mutual_information",
    "max_softmax",
    "max_logit",
]


def _probs(probs: Any, validate: bool, ndim: int | tuple[int, ...] = 3) -> torch.Tensor:
    p = check_probs(probs, ndim=ndim, validate=validate)
    return p.to(compute_dtype(p.dtype))


def _entropy(p: torch.Tensor) -> torch.Tensor:
    return -torch.special.xlogy(p, p).sum(-1) + 0.0  # + 0.0 turns -0.0 into 0.0


def pds(probs: Any, *, normalize: bool = True, validate_args: bool = True) -> torch.Tensor:
    """Predictive Diversity Score, Eq. 8 of SED: η = (1/C) Σ_c max_m p_c^m(x).

    A continuous relaxation of #unique: for one-hot members Σ_c max_m p_c^m is the number of
    distinct predicted classes. Higher = more diverse members = more likely OOD. Ambiguity
    resolved: the 1/C of Eq. 8 is kept by default; both versions rank samples identically.

    Args:
        probs: member probabilities, shape (M, N, C).
        normalize: divide by C as in Eq. 8 (range [1/C, min(M, C)/C]); ``False`` gives the
            un-normalised sum (range [1, min(M, C)], equal to #unique for one-hot members).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        One score per sample.

    Shape:
        probs (M, N, C) -> (N,).

    Example:
        >>> p = torch.tensor([[[1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]])  # M=2, N=2, C=2
        >>> pds(p)  # members agree on sample 0, differ on sample 1
        tensor([0.5000, 1.0000])
    """
    p = _probs(probs, validate_args)
    s = p.max(dim=0).values.sum(-1)
    return s / p.shape[-1] if normalize else s


def bma_confidence(probs: Any, *, validate_args: bool = True) -> torch.Tensor:
    """Bayesian-model-averaging confidence, Eq. 7 of SED: η = max_c (1/M) Σ_m p_c^m(x).

    The maximum softmax probability of the mean prediction (Eq. 4 of packed-ensembles); higher =
    more confident (in-distribution). Use ``-bma_confidence(probs)`` as an OOD score.

    Args:
        probs: member probabilities, shape (M, N, C).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        One confidence per sample.

    Shape:
        probs (M, N, C) -> (N,).

    Example:
        >>> bma_confidence(torch.tensor([[[0.9, 0.1]], [[0.5, 0.5]]]))
        tensor([0.7000])
    """
    return _probs(probs, validate_args).mean(0).max(-1).values


def predictive_entropy(probs: Any, *, validate_args: bool = True) -> torch.Tensor:
    """Entropy of the mean prediction, H[(1/M) Σ_m p^m] (total uncertainty; packed-ensembles App. E).

    Args:
        probs: member probabilities (M, N, C), or a single model's (N, C).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        One entropy per sample, in nats.

    Shape:
        probs (M, N, C) or (N, C) -> (N,).

    Example:
        >>> predictive_entropy(torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]]))  # mean (0.5, 0.5): ln 2
        tensor([0.6931])
    """
    p = _probs(probs, validate_args, ndim=(2, 3))
    return _entropy(p.mean(0) if p.ndim == 3 else p)


def expected_entropy(probs: Any, *, validate_args: bool = True) -> torch.Tensor:
    """Mean of the members' entropies, (1/M) Σ_m H[p^m] (aleatoric part; packed-ensembles App. E).

    Args:
        probs: member probabilities, shape (M, N, C).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        One entropy per sample, in nats.

    Shape:
        probs (M, N, C) -> (N,).

    Example:
        >>> expected_entropy(torch.tensor([[[1.0, 0.0]], [[0.5, 0.5]]]))  # (0 + ln 2) / 2
        tensor([0.3466])
    """
    return _entropy(_probs(probs, validate_args)).mean(0)


def mutual_information(probs: Any, *, validate_args: bool = True) -> torch.Tensor:
    """Mutual information between prediction and member (epistemic part; packed-ensembles App. E).

    MI = H[(1/M) Σ_m p^m] - (1/M) Σ_m H[p^m] (predictive minus expected entropy). Non-negative by
    Jensen's inequality; tiny negative rounding errors are clamped to 0.

    Args:
        probs: member probabilities, shape (M, N, C).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        One score per sample, in nats, in [0, ln min(M, C)].

    Shape:
        probs (M, N, C) -> (N,).

    Example:
        >>> mutual_information(torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]]))  # ln 2 - 0
        tensor([0.6931])
    """
    p = _probs(probs, validate_args)
    return (_entropy(p.mean(0)) - _entropy(p).mean(0)).clamp_min(0.0)


def max_softmax(probs: Any, *, validate_args: bool = True) -> torch.Tensor:
    """Maximum softmax probability (MSP) of the mean prediction, packed-ensembles §4 / App. E.

    Equal to :func:`bma_confidence` for an ensemble; also accepts one model's (N, C).

    Args:
        probs: member probabilities (M, N, C), or a single model's (N, C).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        One confidence per sample.

    Shape:
        probs (M, N, C) or (N, C) -> (N,).

    Example:
        >>> max_softmax(torch.tensor([[0.2, 0.8], [0.6, 0.4]]))
        tensor([0.8000, 0.6000])
    """
    p = _probs(probs, validate_args, ndim=(2, 3))
    return (p.mean(0) if p.ndim == 3 else p).max(-1).values


def max_logit(logits: Any, *, validate_args: bool = True) -> torch.Tensor:
    """Maximum logit (packed-ensembles App. E): of the mean logits of an (M, N, C) ensemble, or of one model's (N, C).

    Args:
        logits: member logits (M, N, C), or a single model's (N, C).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        One confidence per sample.

    Shape:
        logits (M, N, C) or (N, C) -> (N,).

    Example:
        >>> max_logit(torch.tensor([[[1.0, 3.0]], [[2.0, -1.0]]]))  # mean logits (1.5, 1.0)
        tensor([1.5000])
    """
    z = check_ensemble(logits, "logits", ndim=(2, 3), validate=validate_args)
    z = z.to(compute_dtype(z.dtype))
    return (z.mean(0) if z.ndim == 3 else z).max(-1).values
