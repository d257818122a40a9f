"""Similarity of two models from adversarial attack transferability (SAT score, attack-similarity §2).

The attack itself (PGD) lives in :mod:`ensdiv.attacks`; these functions take its outcome as
boolean "fooled" indicators, so they are cheap and exactly testable. Scores are float64 tensors:
0-d for 1-D indicators, shape (...) for batched ones.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch

from ensdiv.errors import InvalidInputError, UndefinedMetricWarning
from ensdiv.metrics.checks import as_tensor, check_same_shape

__all__ = ["sat_score", "sat_score_one_side", "SAT_EPS", "SAT_IDENTICAL"]

#: ε_s of the paper ("a small scalar", value not given), in %: 0.01 % is the smallest non-zero
#: transfer rate measurable on the paper's 5,000 images (100 / (2 · 5000)), so scores never jump
#: below a measurable value; the score range is then [ln 0.01, ln 100] = [-4.61, 4.61].
SAT_EPS = 0.01
#: The score of a model with itself under a perfect attack: ln 100 = 4.605.
SAT_IDENTICAL = math.log(100.0)


def _indicator(x: Any, name: str, validate: bool) -> torch.Tensor:
    x = as_tensor(x, name, validate=validate)
    if not validate:
        return x.bool()
    if x.dtype != torch.bool:
        if x.numel() and not bool(((x == 0) | (x == 1)).all()):
            raise InvalidInputError(f"{name} must be a boolean (or 0/1) indicator tensor shaped (..., N).")
        x = x.bool()
    if x.ndim == 0:
        raise InvalidInputError(f"{name} must be shaped (..., N), one indicator per input, got a scalar.")
    return x


def _score(rate_sum: torch.Tensor, count: torch.Tensor, eps: float) -> torch.Tensor:
    rate = 100.0 * rate_sum / count.clamp_min(1)
    out = torch.log(torch.clamp(rate, min=eps))
    empty = count == 0
    if bool(empty.any()):
        warnings.warn(
            "The SAT score is undefined when no input is classified correctly by both models (empty X_AB); "
            "returning NaN.",
            UndefinedMetricWarning,
            stacklevel=3,
        )
        out = torch.where(empty, torch.full_like(out, float("nan")), out)
    return out


def _masked(ia: torch.Tensor, both_correct: Any, validate: bool) -> torch.Tensor:
    mask = torch.ones_like(ia) if both_correct is None else _indicator(both_correct, "both_correct", validate)
    try:
        return mask.expand_as(ia).double()
    except RuntimeError:
        raise InvalidInputError(
            f"both_correct must have the indicators' shape {tuple(ia.shape)}, got {tuple(mask.shape)}."
        ) from None


def _check_eps(eps: float) -> None:
    if eps <= 0:
        raise InvalidInputError(f"eps must be positive (the score's floor, in %), got {eps!r}.")


def sat_score(
    a_fooled_by_xb: Any,
    b_fooled_by_xa: Any,
    both_correct: Any = None,
    *,
    eps: float = SAT_EPS,
    validate_args: bool = True,
) -> torch.Tensor:
    """Two-side SAT similarity, Eq. 1 of attack-similarity: s(A, B) = ln max(ε, 100 · ½ mean_{X_AB}(I_A + I_B)).

    I_A = [A(x_B) ≠ y] (A fooled by the adversarial example made on B), I_B = [B(x_A) ≠ y]; the mean
    runs over X_AB, the inputs both models classify correctly. Natural log: identical models under
    a perfect attack score ln 100 = 4.605, models that never transfer score ln ε. Ambiguities
    resolved: the rate is in percent and ε_s = :data:`SAT_EPS` (the paper gives no value); an empty
    X_AB gives NaN with a warning, never ln 0.

    Args:
        a_fooled_by_xb: bool (or 0/1), shape (..., N): A misclassifies x_B.
        b_fooled_by_xa: bool (or 0/1), same shape: B misclassifies x_A.
        both_correct: bool mask of X_AB, same shape (or broadcastable); ``None`` when the
            indicators are already restricted to X_AB.
        eps: the floor ε_s, in percent (default :data:`SAT_EPS` = 0.01).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        float64 in [ln ε, ln 100], NaN where X_AB is empty.

    Shape:
        (..., N), (..., N), (..., N) -> (...); 1-D indicators give a 0-d tensor.

    Example:
        >>> ia, ib = torch.tensor([True, False]), torch.tensor([True, True])  # rate 100 · 3/4 = 75 %
        >>> sat_score(ia, ib)  # ln 75
        tensor(4.3175, dtype=torch.float64)
    """
    ia = _indicator(a_fooled_by_xb, "a_fooled_by_xb", validate_args)
    ib = _indicator(b_fooled_by_xa, "b_fooled_by_xa", validate_args)
    check_same_shape(ia, ib, "a_fooled_by_xb", "b_fooled_by_xa", validate=validate_args)
    m = _masked(ia, both_correct, validate_args)
    _check_eps(eps)
    hits = ((ia.double() + ib.double()) * m).sum(-1) / 2.0
    return _score(hits, m.sum(-1), eps)


def sat_score_one_side(
    a_fooled_by_xb: Any, both_correct: Any = None, *, eps: float = SAT_EPS, validate_args: bool = True
) -> torch.Tensor:
    """One-side variant of Eq. 1 (attack-similarity Fig. G.2): ln max(ε, 100 · mean_{X_AB} [A(x_B) ≠ y]).

    Args:
        a_fooled_by_xb: bool (or 0/1), shape (..., N): the target model misclassifies the source's
            adversarial input.
        both_correct: bool mask of X_AB (or ``None`` if already restricted).
        eps: the floor ε_s, in percent.
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        float64 in [ln ε, ln 100], NaN where X_AB is empty.

    Shape:
        (..., N), (..., N) -> (...); 1-D indicators give a 0-d tensor.

    Example:
        >>> sat_score_one_side(torch.tensor([True, False, True]), torch.tensor([True, True, False]))  # ln 50
        tensor(3.9120, dtype=torch.float64)
    """
    ia = _indicator(a_fooled_by_xb, "a_fooled_by_xb", validate_args)
    m = _masked(ia, both_correct, validate_args)
    _check_eps(eps)
    return _score((ia.double() * m).sum(-1), m.sum(-1), eps)
