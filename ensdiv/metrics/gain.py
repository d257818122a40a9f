"""Ensemble gain over members: improvement over the best member, error reduction rate, all-wrong ratio."""

from __future__ import annotations

from typing import Any, Literal

import torch

from ensdiv.errors import EnsdivError
from ensdiv.metrics._checks import as_tensor, check_labels, check_preds

__all__ = ["ensemble_improvement", "error_reduction_rate", "all_wrong_ratio"]


def ensemble_improvement(ens_acc: Any, member_accs: Any) -> torch.Tensor | float:
    """Improvement of an ensemble over its most accurate member, Y = A_ens - A_top (design-diversity Fig. 5).

    Args:
        ens_acc: ensemble accuracy, a number or a tensor of shape (K,) for K ensembles.
        member_accs: member accuracies, shape (M,) or (K, M).

    Returns:
        A float (or shape (K,)); positive when the ensemble beats its best member.
    """
    ens = as_tensor(ens_acc, "ens_acc").double()
    mem = as_tensor(member_accs, "member_accs").double()
    if mem.ndim == 0 or mem.shape[-1] == 0:
        raise EnsdivError("member_accs must hold at least one member accuracy, shaped (M,) or (K, M).")
    out = ens - mem.max(-1).values
    return float(out) if out.ndim == 0 else out


def error_reduction_rate(
    ens_err: Any, member_errs: Any, *, reference: Literal["mean", "min"] = "mean"
) -> torch.Tensor | float:
    """Error Reduction Rate of attack-similarity §4.1: ERR = 1 - Err_ens / Err_ref.

    The paper's text is cut after "ERR as 1 - Err_ens(M)"; it motivates ERR by "the ensemble
    performance is sensitive to the original model performances", i.e. the ensemble error is
    normalised by its members' errors. The default ``reference="mean"`` uses the mean member
    error (1/N) Σ_m Err(m) (the definition of the arXiv version); ``"min"`` uses the best member.
    Multiply by 100 for the paper's %.

    Args:
        ens_err: ensemble error rate (number, or shape (K,)).
        member_errs: member error rates, shape (M,) or (K, M).
        reference: normalise by the mean (default) or the smallest member error.

    Returns:
        A float (or shape (K,)); NaN where the reference error is 0.
    """
    ens = as_tensor(ens_err, "ens_err").double()
    mem = as_tensor(member_errs, "member_errs").double()
    if mem.ndim == 0 or mem.shape[-1] == 0:
        raise EnsdivError("member_errs must hold at least one member error, shaped (M,) or (K, M).")
    if reference == "mean":
        ref = mem.mean(-1)
    elif reference == "min":
        ref = mem.min(-1).values
    else:
        raise EnsdivError(f"reference must be 'mean' or 'min', got {reference!r}.")
    out = torch.where(ref > 0, 1.0 - ens / ref.clamp_min(1e-300), torch.full_like(ref, float("nan")))
    return float(out) if out.ndim == 0 else out


def all_wrong_ratio(preds: Any, labels: Any) -> float:
    """Fraction of samples that every member misclassifies (attack-similarity Fig. 3, "all wrong").

    Args:
        preds: class predictions, shape (M, N).
        labels: true classes, shape (N,).
    """
    preds = check_preds(preds)
    labels = check_labels(labels, preds.shape[1])
    if preds.shape[0] == 0 or preds.shape[1] == 0:
        raise EnsdivError(
            f"all_wrong_ratio needs at least one member and one sample, got shape {tuple(preds.shape)}."
        )
    return float((preds != labels).all(0).double().mean())
