"""Ensemble gain over members: improvement over the best member, error reduction rate, all-wrong ratio.

Results are tensors: 0-d for one ensemble, (K,) for K ensembles, in
:func:`~ensdiv.metrics.checks.compute_dtype` of the inputs (float64 for Python numbers).
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from ensdiv.errors import InvalidInputError
from ensdiv.metrics.checks import as_tensor, check_labels, check_preds, compute_dtype

__all__ = ["ensemble_improvement", "error_reduction_rate", "all_wrong_ratio"]


def _rates(ens: Any, members: Any, names: tuple[str, str], validate: bool) -> tuple[torch.Tensor, torch.Tensor]:
    e = as_tensor(ens, names[0], validate=validate)
    m = as_tensor(members, names[1], validate=validate)
    if validate and (m.ndim == 0 or m.shape[-1] == 0):
        raise InvalidInputError(f"{names[1]} must hold at least one member value, shaped (M,) or (K, M).")
    dt = compute_dtype(torch.promote_types(e.dtype, m.dtype))
    return e.to(dt), m.to(dt)


def ensemble_improvement(ens_acc: Any, member_accs: Any, *, validate_args: bool = True) -> torch.Tensor:
    """Improvement of an ensemble over its most accurate member, Y = A_ens - A_top (design-diversity Fig. 5).

    Args:
        ens_acc: ensemble accuracy, a number or shape (K,) for K ensembles.
        member_accs: member accuracies, shape (M,) or (K, M).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        Positive where the ensemble beats its best member.

    Shape:
        (), (M,) -> () (0-d); (K,), (K, M) -> (K,).

    Example:
        >>> ensemble_improvement(0.80, [0.70, 0.75])
        tensor(0.0500, dtype=torch.float64)
    """
    ens, mem = _rates(ens_acc, member_accs, ("ens_acc", "member_accs"), validate_args)
    return ens - mem.max(-1).values


def error_reduction_rate(
    ens_err: Any,
    member_errs: Any,
    *,
    reference: Literal["mean", "min"] = "mean",
    validate_args: bool = True,
) -> torch.Tensor:
    """Error Reduction Rate of attack-similarity §4.1 (Fig. 2-4): ERR = 1 - Err_ens / Err_ref.

    The paper's text is cut after "ERR as 1 - Err_ens(M)"; it motivates ERR by "the ensemble
    performance is sensitive to the original model performances", i.e. the ensemble error is
    normalised by its members' errors. The default ``reference="mean"`` uses the mean member
    error (1/M) Σ_m Err(m) (the definition of the arXiv version); ``"min"`` uses the best member.
    Multiply by 100 for the paper's %. Ambiguity resolved: when the reference error is 0 (the
    members make no error) there is no error to reduce and ERR is NaN, never ±inf.

    Args:
        ens_err: ensemble error rate (a number, or shape (K,)).
        member_errs: member error rates, shape (M,) or (K, M).
        reference: normalise by the mean (default) or the smallest member error.
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        At most 1 (1 = the ensemble makes no error); negative when the ensemble is worse.

    Shape:
        (), (M,) -> () (0-d); (K,), (K, M) -> (K,).

    Example:
        >>> error_reduction_rate(0.2, [0.3, 0.5])  # 1 - 0.2 / 0.4
        tensor(0.5000, dtype=torch.float64)
    """
    ens, mem = _rates(ens_err, member_errs, ("ens_err", "member_errs"), validate_args)
    if reference == "mean":
        ref = mem.mean(-1)
    elif reference == "min":
        ref = mem.min(-1).values
    else:
        raise InvalidInputError(f"reference must be 'mean' or 'min', got {reference!r}.")
    return torch.where(
        ref > 0, 1.0 - ens / ref.clamp_min(torch.finfo(ref.dtype).tiny), torch.full_like(ref, float("nan"))
    )


def all_wrong_ratio(preds: Any, labels: Any, *, validate_args: bool = True) -> torch.Tensor:
    """Fraction of samples that every member misclassifies (attack-similarity Fig. 3c, "all wrong").

    Args:
        preds: class predictions, shape (M, N).
        labels: true classes, shape (N,).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        float64 in [0, 1].

    Shape:
        preds (M, N), labels (N,) -> () (0-d).

    Example:
        >>> all_wrong_ratio(torch.tensor([[1, 1, 0, 0], [2, 0, 2, 0]]), torch.tensor([0, 1, 2, 3]))
        tensor(0.5000, dtype=torch.float64)
    """
    preds = check_preds(preds, validate=validate_args)
    labels = check_labels(labels, preds.shape[1], validate=validate_args)
    if validate_args and (preds.shape[0] == 0 or preds.shape[1] == 0):
        raise InvalidInputError(
            f"all_wrong_ratio needs at least one member and one sample, got shape {tuple(preds.shape)}."
        )
    return (preds != labels).all(0).double().mean()
