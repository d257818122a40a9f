"""Shared input validators: each bad input raises :class:`~ensdiv.errors.EnsdivError` with one sentence.

The checks are cheap (a few reductions) compared with the metrics they guard. They also convert
array-likes (numpy arrays, lists) to tensors, so every metric accepts them.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from ensdiv.errors import EnsdivError

__all__ = [
    "as_tensor",
    "check_ensemble",
    "check_probs",
    "check_preds",
    "check_labels",
    "check_same_shape",
    "check_members",
    "nan_with_warning",
]

PROB_TOL = 1e-3


def as_tensor(x: Any, name: str) -> torch.Tensor:
    """Convert ``x`` to a tensor and reject NaN (and infinite floats)."""
    if not isinstance(x, torch.Tensor):
        try:
            x = torch.as_tensor(np.asarray(x))  # via numpy: Python floats stay float64
        except (TypeError, ValueError, RuntimeError) as err:
            raise EnsdivError(f"{name} must be a tensor or array, got a {type(x).__name__}.") from err
    if x.is_floating_point() and x.numel() and not bool(torch.isfinite(x).all()):
        bad = "NaN" if bool(torch.isnan(x).any()) else "infinite"
        raise EnsdivError(f"{name} contains {bad} values; remove or replace them before computing metrics.")
    return x


def check_ensemble(x: Any, name: str, *, ndim: int | tuple[int, ...] = 3) -> torch.Tensor:
    """A floating tensor shaped (M, N, C) (or (N, C) where ``ndim`` allows 2)."""
    x = as_tensor(x, name)
    dims = (ndim,) if isinstance(ndim, int) else ndim
    if x.ndim not in dims:
        want = " or ".join({3: "(M, N, C)", 2: "(N, C)"}[d] for d in dims)
        raise EnsdivError(f"{name} must be shaped {want}, got shape {tuple(x.shape)}.")
    if not x.is_floating_point():
        raise EnsdivError(f"{name} must be a floating tensor of scores, got dtype {x.dtype}.")
    return x


def check_probs(x: Any, name: str = "probs", *, ndim: int | tuple[int, ...] = 3) -> torch.Tensor:
    """Probabilities: non-negative rows summing to 1 (rejects logits with a hint)."""
    x = check_ensemble(x, name, ndim=ndim)
    if x.numel() and (bool((x < -PROB_TOL).any()) or bool(((x.sum(-1) - 1).abs() > PROB_TOL).any())):
        raise EnsdivError(
            f"{name} must be probabilities (non-negative, each row summing to 1) but looks like logits; "
            f"pass probs = logits.softmax(-1)."
        )
    return x


def check_preds(x: Any, name: str = "preds", *, ndim: int = 2) -> torch.Tensor:
    """Integer class predictions shaped (M, N) (or (N,) with ``ndim=1``)."""
    x = as_tensor(x, name)
    want = "(M, N)" if ndim == 2 else "(N,)"
    if x.ndim != ndim:
        raise EnsdivError(
            f"{name} must be integer class predictions shaped {want}, got shape {tuple(x.shape)}."
        )
    if x.is_floating_point() or x.dtype == torch.bool:
        raise EnsdivError(
            f"{name} must hold integer class indices, got dtype {x.dtype}; use scores.argmax(-1)."
        )
    if x.numel() and int(x.min()) < 0:
        raise EnsdivError(f"{name} holds negative class indices (min {int(x.min())}); classes are 0..C-1.")
    return x.long()


def check_labels(
    labels: Any, n: int | None = None, num_classes: int | None = None, name: str = "labels"
) -> torch.Tensor:
    """Integer labels shaped (N,) with values in [0, num_classes)."""
    labels = as_tensor(labels, name)
    if labels.ndim != 1:
        raise EnsdivError(f"{name} must be shaped (N,), got shape {tuple(labels.shape)}.")
    if labels.is_floating_point() or labels.dtype == torch.bool:
        raise EnsdivError(f"{name} must hold integer class indices, got dtype {labels.dtype}.")
    if n is not None and labels.shape[0] != n:
        raise EnsdivError(
            f"{name} must be shaped (N,) = ({n},) to match the predictions, got ({labels.shape[0]},)."
        )
    if labels.numel():
        lo, hi = int(labels.min()), int(labels.max())
        if lo < 0 or (num_classes is not None and hi >= num_classes):
            rng = f"0..{num_classes - 1}" if num_classes is not None else "non-negative"
            raise EnsdivError(f"{name} must be class indices in {rng}, got values from {lo} to {hi}.")
    return labels.long()


def check_same_shape(a: torch.Tensor, b: torch.Tensor, name_a: str, name_b: str) -> None:
    if a.shape != b.shape:
        raise EnsdivError(
            f"{name_a} and {name_b} must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}."
        )


def check_members(
    m: int, name: str, *, at_least: int = 2, what: str = "is defined over pairs of members"
) -> None:
    if m < at_least:
        raise EnsdivError(f"{name} {what} and needs at least {at_least} members, got M = {m}.")


def nan_with_warning(message: str) -> float:
    warnings.warn(message, RuntimeWarning, stacklevel=3)
    return float("nan")
