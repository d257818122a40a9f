"""Input validators shared by every metric (and by :mod:`ensdiv.ensembles`), and the dtype rule.

Each bad input raises :class:`~ensdiv.errors.InvalidInputError`, which is both an
:class:`~ensdiv.errors.EnsdivError` (one sentence for the user) and a :class:`ValueError`. Every
check takes ``validate``: with ``validate=False`` it only converts array-likes (numpy arrays, lists)
to tensors and runs no check, which is what a metric's ``validate_args=False`` does.

Dtype rule of the metrics: floating inputs are computed in :func:`compute_dtype` of their dtype,
float32 for bfloat16/float16 (so low-precision inputs lose nothing more in the reduction) and the
input's own dtype otherwise; the result has that dtype. Metrics of integer or boolean inputs
(predictions, labels, indicators) count exactly and return float64.

The probability check allows row sums within :func:`prob_tolerance` of 1, which grows with the
dtype's machine epsilon, so a bfloat16 softmax (eps 2^-7) passes.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from ensdiv.errors import InvalidInputError, UndefinedMetricWarning

__all__ = [
    "as_tensor",
    "compute_dtype",
    "prob_tolerance",
    "check_ensemble",
    "check_probs",
    "check_preds",
    "check_labels",
    "check_same_shape",
    "check_members",
    "check_choice",
    "nan_with_warning",
]


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a metric computes in and returns: float32 for bf16/fp16, the float dtype itself, else float64.

    >>> compute_dtype(torch.bfloat16), compute_dtype(torch.float64), compute_dtype(torch.long)
    (torch.float32, torch.float64, torch.float64)
    """
    if dtype in (torch.bfloat16, torch.float16):
        return torch.float32
    if dtype.is_floating_point:
        return dtype
    return torch.float64


def prob_tolerance(dtype: torch.dtype) -> float:
    """Allowed |row sum - 1| (and negative slack) of probabilities: max(1e-4, 8 · eps(dtype)).

    >>> prob_tolerance(torch.float32), prob_tolerance(torch.bfloat16)
    (0.0001, 0.0625)
    """
    return max(1e-4, 8.0 * torch.finfo(dtype).eps) if dtype.is_floating_point else 1e-4


def as_tensor(x: Any, name: str, *, validate: bool = True) -> torch.Tensor:
    """Convert ``x`` to a tensor (numpy arrays and lists too) and reject NaN and infinite floats."""
    if not isinstance(x, torch.Tensor):
        try:
            x = torch.as_tensor(np.asarray(x))  # via numpy: Python floats stay float64
        except (TypeError, ValueError, RuntimeError) as err:
            raise InvalidInputError(f"{name} must be a tensor or array, got a {type(x).__name__}.") from err
    if validate and x.is_floating_point() and x.numel() and not bool(torch.isfinite(x).all()):
        bad = "NaN" if bool(torch.isnan(x).any()) else "infinite"
        raise InvalidInputError(f"{name} contains {bad} values; remove or replace them before computing metrics.")
    return x


def check_ensemble(x: Any, name: str, *, ndim: int | tuple[int, ...] = 3, validate: bool = True) -> torch.Tensor:
    """A floating tensor shaped (M, N, C) (or (N, C) where ``ndim`` allows 2)."""
    x = as_tensor(x, name, validate=validate)
    if not validate:
        return x
    dims = (ndim,) if isinstance(ndim, int) else ndim
    if x.ndim not in dims:
        want = " or ".join({3: "(M, N, C)", 2: "(N, C)"}[d] for d in dims)
        raise InvalidInputError(f"{name} must be shaped {want}, got shape {tuple(x.shape)}.")
    if not x.is_floating_point():
        raise InvalidInputError(f"{name} must be a floating tensor of scores, got dtype {x.dtype}.")
    return x


def check_probs(x: Any, name: str = "probs", *, ndim: int | tuple[int, ...] = 3, validate: bool = True) -> torch.Tensor:
    """Probabilities: non-negative rows summing to 1 within :func:`prob_tolerance` (rejects logits with a hint)."""
    x = check_ensemble(x, name, ndim=ndim, validate=validate)
    if not validate or not x.numel():
        return x
    tol = prob_tolerance(x.dtype)
    row_err = (x.sum(-1, dtype=torch.float64) - 1.0).abs()
    if bool((x < -tol).any()) or bool((row_err > tol).any()):
        raise InvalidInputError(
            f"{name} must be probabilities (non-negative, each row summing to 1 within {tol:g} for "
            f"{x.dtype}) but looks like logits; pass probs = logits.softmax(-1)."
        )
    return x


def check_preds(x: Any, name: str = "preds", *, ndim: int = 2, validate: bool = True) -> torch.Tensor:
    """Integer class predictions shaped (M, N) (or (N,) with ``ndim=1``), returned as int64."""
    x = as_tensor(x, name, validate=validate)
    if not validate:
        return x.long()
    want = "(M, N)" if ndim == 2 else "(N,)"
    if x.ndim != ndim:
        raise InvalidInputError(f"{name} must be integer class predictions shaped {want}, got shape {tuple(x.shape)}.")
    if x.is_floating_point() or x.dtype == torch.bool:
        raise InvalidInputError(f"{name} must hold integer class indices, got dtype {x.dtype}; use scores.argmax(-1).")
    if x.numel() and int(x.min()) < 0:
        raise InvalidInputError(f"{name} holds negative class indices (min {int(x.min())}); classes are 0..C-1.")
    return x.long()


def check_labels(
    labels: Any,
    n: int | None = None,
    num_classes: int | None = None,
    name: str = "labels",
    *,
    validate: bool = True,
) -> torch.Tensor:
    """Integer labels shaped (N,) with values in [0, num_classes), returned as int64."""
    labels = as_tensor(labels, name, validate=validate)
    if not validate:
        return labels.long()
    if labels.ndim != 1:
        raise InvalidInputError(f"{name} must be shaped (N,), got shape {tuple(labels.shape)}.")
    if labels.is_floating_point() or labels.dtype == torch.bool:
        raise InvalidInputError(f"{name} must hold integer class indices, got dtype {labels.dtype}.")
    if n is not None and labels.shape[0] != n:
        raise InvalidInputError(
            f"{name} must be shaped (N,) = ({n},) to match the predictions, got ({labels.shape[0]},)."
        )
    if labels.numel():
        lo, hi = int(labels.min()), int(labels.max())
        if lo < 0 or (num_classes is not None and hi >= num_classes):
            rng = f"0..{num_classes - 1}" if num_classes is not None else "non-negative"
            raise InvalidInputError(f"{name} must be class indices in {rng}, got values from {lo} to {hi}.")
    return labels.long()


def check_same_shape(a: torch.Tensor, b: torch.Tensor, name_a: str, name_b: str, *, validate: bool = True) -> None:
    """Raise unless ``a`` and ``b`` have the same shape."""
    if validate and a.shape != b.shape:
        raise InvalidInputError(
            f"{name_a} and {name_b} must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}."
        )


def check_members(
    m: int,
    name: str,
    *,
    at_least: int = 2,
    what: str = "is defined over pairs of members",
    validate: bool = True,
) -> None:
    """Raise unless there are at least ``at_least`` members (or samples: pass ``what``)."""
    if validate and m < at_least:
        raise InvalidInputError(f"{name} {what} and needs at least {at_least} members, got M = {m}.")


def check_choice(value: Any, name: str, choices: tuple, *, validate: bool = True) -> None:
    """Raise unless ``value`` is one of ``choices`` (a keyword option such as ``reduction``)."""
    if validate and value not in choices:
        raise InvalidInputError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}.")


def nan_with_warning(message: str, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Warn with ``message`` and return a 0-d NaN tensor (an undefined metric)."""
    warnings.warn(message, UndefinedMetricWarning, stacklevel=3)
    return torch.tensor(float("nan"), dtype=dtype)
