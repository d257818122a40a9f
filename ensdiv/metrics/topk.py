"""Top-k accuracy (design-diversity Table 1: ImageNet top-1 / top-5).

A sample counts as correct at ``k`` when its label is among the ``k`` highest-scoring classes. With
ten classes (Fashion-MNIST) top-5 is nearly trivial, so the chapter also reports top-2.
"""

from __future__ import annotations

from typing import Any

import torch

from ensdiv.errors import InvalidInputError
from ensdiv.metrics.checks import check_ensemble, check_labels

__all__ = ["topk_accuracy"]


def topk_accuracy(scores: Any, labels: Any, *, k: int = 1, validate_args: bool = True) -> torch.Tensor:
    """Top-k accuracy: the fraction of samples whose label is among the ``k`` highest scores.

    design-diversity Table 1 (top1 / top5). Ambiguity resolved: ties at the k-th place are counted
    in the label's favour — the label's rank is the number of classes with a *strictly* higher score,
    and a sample is correct when that rank is below ``k`` (so ``k = 1`` may differ from the argmax rule
    only on exact ties). ``k`` larger than the number of classes counts every sample as correct.

    Args:
        scores: logits or probabilities (any monotone score), shape (N, C).
        labels: true classes, shape (N,).
        k: how many top classes count, a positive int.
        validate_args: check the inputs (``False`` skips every check; a bad ``k`` raises either way).

    Returns:
        A fraction in [0, 1], in float64.

    Shape:
        scores (N, C), labels (N,) -> () (0-d).

    Example:
        >>> s = torch.tensor([[0.1, 0.5, 0.4], [0.7, 0.2, 0.1], [0.2, 0.3, 0.5]])
        >>> y = torch.tensor([2, 0, 0])  # label ranks: 1, 0, 2
        >>> [round(float(topk_accuracy(s, y, k=k)), 4) for k in (1, 2, 3)]
        [0.3333, 0.6667, 1.0]
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInputError(f"k must be a positive int, got {k!r}.")
    s = check_ensemble(scores, "scores", ndim=2, validate=validate_args)
    if validate_args and s.shape[0] == 0:
        raise InvalidInputError("topk_accuracy needs at least one sample, got N = 0.")
    y = check_labels(labels, s.shape[0], s.shape[1], validate=validate_args).long()
    s_y = s.gather(1, y[:, None])
    rank = (s > s_y).sum(1)
    return (rank < k).double().mean()
