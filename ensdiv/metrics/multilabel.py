"""Multi-label classification scores: Pascal VOC's 11-point interpolated average precision.

training-methods Fig. 7 measures downstream transfer on Pascal VOC "by 11-point mAP" (Everingham et al.,
2010, the VOC2007 devkit's rule): per class, the precision interpolated at the eleven recalls
0, 0.1, …, 1, averaged; mAP is the mean over classes. It is *not* scikit-learn's or torchmetrics' average
precision (the step-wise Σ (R_k − R_{k−1}) P_k, no interpolation).
"""

from __future__ import annotations

from typing import Any

import torch

from ensdiv.errors import InvalidInputError
from ensdiv.metrics.checks import as_tensor, compute_dtype

__all__ = ["average_precision_11pt", "mean_average_precision_11pt"]

#: 0, 0.1, ..., 1 as k / 10 (correctly rounded, like a recall of 3 out of 10: ``linspace`` gives 0.1 · 3 > 0.3)
_RECALLS = torch.arange(11, dtype=torch.float64) / 10


def average_precision_11pt(scores: Any, targets: Any, *, validate_args: bool = True) -> torch.Tensor:
    """VOC2007's 11-point interpolated average precision of one class.

    AP = (1/11) Σ_{t ∈ {0, 0.1, …, 1}} max {P(r) : r ≥ t}, where (r, P(r)) are the recall and precision
    of the ranking by descending score cut after each item, and the max over an empty set is 0 (the
    devkit's ``VOCevalcls``). Ambiguity resolved: the devkit cuts after every item, so tied scores are
    ranked by their order in the input; here a cut falls only between distinct scores (tied items enter
    together), as scikit-learn's and torchmetrics' precision-recall curves do, so the result does not
    depend on the input order; unlike those curves, no point (recall 0, precision 1) is added.

    Args:
        scores: classifier scores, higher = more likely positive, shape (N,).
        targets: 1 for a positive, 0 for a negative, shape (N,); at least one positive (recall is
            undefined without one).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        A fraction in [0, 1], computed in float64 (precision and recall are ratios of counts) and returned
        in the scores' dtype (float32 for 16-bit floats, float64 for integer scores).

    Shape:
        (N,), (N,) -> () (0-d).

    Example:
        >>> s = torch.tensor([0.9, 0.8, 0.7, 0.6, 0.5])
        >>> average_precision_11pt(s, torch.tensor([1, 0, 1, 0, 1]))  # (4·1 + 3·(2/3) + 4·(3/5)) / 11
        tensor(0.7636)
    """
    s, y = _inputs("average_precision_11pt", scores, targets, 1, validate_args)
    return _ap11(s.unsqueeze(1), y.unsqueeze(1))[0]


def _inputs(name: str, scores: Any, targets: Any, ndim: int, validate: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``scores`` and ``targets`` as tensors of one shape, (N,) for ``ndim`` 1 or (N, C) for 2, targets 0/1, every
    column with a positive (recall is undefined without one)."""
    shape = "(N,)" if ndim == 1 else "(N, C)"
    s, y = as_tensor(scores, "scores", validate=validate), as_tensor(targets, "targets", validate=validate)
    if not validate:
        return s, y
    if s.dim() != ndim or y.shape != s.shape:
        raise InvalidInputError(f"{name} needs scores and targets of one shape {shape}, got {tuple(s.shape)} and "
                                f"{tuple(y.shape)}.")
    if not ((y == 0) | (y == 1)).all():
        raise InvalidInputError(f"{name} needs targets of 0 (negative) and 1 (positive).")
    if not (y == 1).reshape(len(y), -1).any(0).all():
        raise InvalidInputError(f"{name} needs at least one positive in every class (recall is undefined).")
    return s, y


def _ap11(scores: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """11-point AP of every column of ``scores`` / ``targets`` (N, C) at once -> (C,), in the scores' dtype.

    The cuts are computed by hand in float64 (torchmetrics' curve computes precision in float32, 1e-9 off the
    devkit): per column, the items ranked by descending score, true and false positives accumulated, and a cut
    after the last item of each run of tied scores; a position inside a run is not a cut and gets precision 0,
    which never raises a maximum.
    """
    ranked, order = torch.sort(scores, dim=0, descending=True, stable=True)
    positive = torch.gather(targets, 0, order).double()
    tp, fp = positive.cumsum(0), (1 - positive).cumsum(0)
    cut = torch.ones_like(ranked, dtype=torch.bool)
    cut[:-1] = ranked[1:] != ranked[:-1]
    precision = torch.where(cut, tp / (tp + fp), torch.zeros((), dtype=torch.float64))  # (N, C)
    recall = tp / tp[-1:]
    reached = recall.unsqueeze(0) >= _RECALLS.view(-1, 1, 1)  # (11, N, C)
    best = torch.where(reached, precision.unsqueeze(0), torch.zeros((), dtype=torch.float64)).amax(dim=1)
    return best.mean(0).to(compute_dtype(scores.dtype))


def mean_average_precision_11pt(scores: Any, targets: Any, *, validate_args: bool = True) -> torch.Tensor:
    """VOC's 11-point mAP: :func:`average_precision_11pt` of every class, averaged over classes.

    Args:
        scores: per-class scores, shape (N, C).
        targets: multi-label 0/1 indicators, shape (N, C); every class needs a positive.
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        A fraction in [0, 1], in the dtype of :func:`average_precision_11pt`.

    Shape:
        (N, C), (N, C) -> () (0-d).

    Example:
        >>> s = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.6, 0.7]])
        >>> mean_average_precision_11pt(s, torch.tensor([[1, 0], [0, 1], [0, 1]]))  # (1 + 1) / 2
        tensor(1.)
    """
    s, y = _inputs("mean_average_precision_11pt", scores, targets, 2, validate_args)
    return _ap11(s, y).mean()  # every class at once
