"""Combination rules of ensemble members: the one home of ``combine``, ``vote`` and their seeding.

They live in the metrics layer so that :func:`~ensdiv.metrics.ensemble_sweep` can use them without
importing :mod:`ensdiv.ensembles` (which sits above the metrics and re-exports these functions as
``ensdiv.ensembles.combine`` / ``vote`` / ``COMBINE_RULES``).
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from ensdiv.errors import InvalidInputError, unknown_name
from ensdiv.metrics.checks import check_ensemble, check_members, check_preds

__all__ = ["COMBINE_RULES", "Rule", "combine", "vote", "make_generator"]

COMBINE_RULES = ("mean_logits", "mean_probs", "median", "geometric_mean", "vote")
Rule = Literal["mean_logits", "mean_probs", "median", "geometric_mean", "vote"]


def make_generator(seed: int | None, generator: torch.Generator | None) -> torch.Generator:
    """The tie-break generator: ``generator`` if given, else a CPU generator seeded with ``seed`` (default 0)."""
    if generator is not None:
        return generator
    return torch.Generator().manual_seed(0 if seed is None else int(seed))


def vote(
    preds: Any,
    *,
    num_classes: int | None = None,
    seed: int | None = None,
    generator: torch.Generator | None = None,
    validate_args: bool = True,
) -> torch.Tensor:
    """Majority vote of member predictions; ties are broken uniformly at random (seeded).

    design-diversity Fig. 6 ("majority vote with random tie-break"). Every class gets its vote count
    plus an i.i.d. jitter in [0, 0.5); counts differ by at least 1, so the jitter only orders tied
    classes, each uniformly at random.

    Args:
        preds: class predictions, shape (M, N).
        num_classes: C; default the largest prediction + 1.
        seed: seed of the tie-break (default 0) when no ``generator`` is given.
        generator: a ``torch.Generator`` for the tie-break.
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        The voted class per sample, int64.

    Shape:
        preds (M, N) -> (N,).

    Example:
        >>> vote(torch.tensor([[0, 1], [0, 2], [1, 2]])).tolist()
        [0, 2]
    """
    preds = check_preds(preds, validate=validate_args)
    check_members(preds.shape[0], "vote", at_least=1, what="combines members", validate=validate_args)
    c = int(num_classes) if num_classes is not None else int(preds.max()) + 1
    if validate_args and preds.numel() and int(preds.max()) >= c:
        raise InvalidInputError(f"preds hold class {int(preds.max())} but num_classes is {c}.")
    counts = torch.zeros(preds.shape[1], c, dtype=torch.float64)
    counts.scatter_add_(1, preds.T.cpu(), torch.ones(preds.T.shape, dtype=torch.float64))
    jitter = torch.rand(counts.shape, generator=make_generator(seed, generator), dtype=torch.float64) * 0.5
    return (counts + jitter).argmax(-1).to(preds.device)


def combine(
    logits: Any,
    how: Rule = "mean_logits",
    *,
    seed: int | None = None,
    generator: torch.Generator | None = None,
    validate_args: bool = True,
) -> torch.Tensor:
    """Combine member logits (M, N, C) into ensemble scores (N, C).

    Rules (design-diversity §4.3 uses averaging, median, geometric mean and vote as consensus):

    * ``"mean_logits"``: mean of the logits (design-diversity Fig. 5, attack-similarity); returns logits.
    * ``"mean_probs"``: mean of the softmax probabilities (Eq. 4 of packed-ensembles, deep ensembles,
      SED); returns probabilities.
    * ``"median"``: per-class median of the members' probabilities, renormalised to sum to 1
      (for M even, the mean of the two middle values); returns probabilities.
    * ``"geometric_mean"``: normalised geometric mean of the probabilities, softmax of the mean
      log-probabilities; returns probabilities.
    * ``"vote"``: majority vote of the members' argmax, ties broken at random with ``seed`` /
      ``generator`` (:func:`vote`); returns the one-hot (N, C) of the voted class (not differentiable).

    Args:
        logits: member logits, shape (M, N, C).
        how: the rule.
        seed: tie-break seed for ``"vote"`` (default 0).
        generator: tie-break generator for ``"vote"`` (overrides ``seed``).
        validate_args: check the inputs (``False`` skips every check; an unknown rule still raises).

    Returns:
        Ensemble scores in the logits' dtype; ``argmax(-1)`` is the ensemble prediction.

    Shape:
        logits (M, N, C) -> (N, C).

    Example:
        >>> z = torch.tensor([[[2.0, 0.0]], [[0.0, 4.0]]])  # two members, one sample
        >>> combine(z, "mean_logits").tolist()
        [[1.0, 2.0]]
    """
    logits = check_ensemble(logits, "logits", validate=validate_args)
    m = logits.shape[0]
    check_members(m, "combine", at_least=1, what="combines members", validate=validate_args)
    if how == "mean_logits":
        return logits.mean(0)
    if how == "mean_probs":
        return logits.softmax(-1).mean(0)
    if how == "median":
        p = logits.softmax(-1).sort(dim=0).values
        med = p[(m - 1) // 2] if m % 2 else 0.5 * (p[m // 2 - 1] + p[m // 2])
        return med / med.sum(-1, keepdim=True)
    if how == "geometric_mean":
        return logits.log_softmax(-1).mean(0).softmax(-1)
    if how == "vote":
        c = logits.shape[-1]
        winner = vote(logits.argmax(-1), num_classes=c, seed=seed, generator=generator, validate_args=False)
        return torch.nn.functional.one_hot(winner, c).to(logits.dtype)
    raise unknown_name("combination rule", how, COMBINE_RULES)
