"""Prediction diversity: pairwise oracle measures (Kuncheva & Whitaker 2003), equitability, #unique.

All functions take integer predictions ``preds`` shaped (M, N) (members, samples) and, where the
measure depends on correctness, ``labels`` shaped (N,). Pairwise measures return the mean over the
M(M-1)/2 member pairs, or the (M, M) matrix with ``pairwise=True`` (diagonal = the value of a
member with itself).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import torch

from ensdiv.errors import EnsdivError
from ensdiv.metrics._checks import (
    as_tensor,
    check_labels,
    check_members,
    check_preds,
    check_same_shape,
    nan_with_warning,
)

__all__ = [
    "pair_counts",
    "disagreement",
    "oracle_disagreement",
    "q_statistic",
    "correlation_coefficient",
    "double_fault",
    "equitability",
    "num_unique",
    "error_inconsistency",
    "error_consistency",
    "conversion_rate",
    "specialization_angle",
]


def _pair_mean(mat: torch.Tensor, pairwise: bool) -> torch.Tensor | float:
    if pairwise:
        return mat
    m = mat.shape[0]
    iu = torch.triu_indices(m, m, offset=1)
    vals = mat[iu[0], iu[1]]
    if bool(torch.isnan(vals).all()):
        return float("nan")
    return float(vals[~torch.isnan(vals)].mean())


def _correct(preds: Any, labels: Any, name: str) -> torch.Tensor:
    preds = check_preds(preds)
    check_members(preds.shape[0], name)
    labels = check_labels(labels, preds.shape[1])
    return (preds == labels).double()


def pair_counts(preds: Any, labels: Any) -> dict[str, torch.Tensor]:
    """Oracle counts N^{ab} for every member pair (a, b = 1 if correct, 0 if wrong).

    Args:
        preds: class predictions, shape (M, N).
        labels: true classes, shape (N,).

    Returns:
        ``{"n11", "n10", "n01", "n00"}``, each an (M, M) float64 tensor; ``n10[i, j]`` counts the
        samples where member i is right and member j is wrong.
    """
    preds = check_preds(preds)
    labels = check_labels(labels, preds.shape[1])
    c = (preds == labels).double()
    w = 1.0 - c
    return {"n11": c @ c.T, "n10": c @ w.T, "n01": w @ c.T, "n00": w @ w.T}


def disagreement(preds: Any, *, pairwise: bool = False) -> torch.Tensor | float:
    """Mean pairwise fraction of samples on which two members predict different classes.

    Label-free disagreement (Ho 1998; the "disagreement" of SED and of most deep-ensemble papers).

    Args:
        preds: class predictions, shape (M, N), M >= 2.
        pairwise: return the (M, M) matrix instead of the mean over pairs.

    Returns:
        A float in [0, 1] (or an (M, M) tensor).
    """
    preds = check_preds(preds)
    check_members(preds.shape[0], "disagreement")
    n = preds.shape[1]
    if n == 0:
        raise EnsdivError("disagreement needs at least one sample, got N = 0.")
    return _pair_mean(disagreement_matrix(preds), pairwise)


def disagreement_matrix(preds: torch.Tensor) -> torch.Tensor:
    """(M, M) fractions of differing predictions; one row at a time (memory O(M·N), not O(M·N·C))."""
    return torch.stack([(preds[i] != preds).double().mean(1) for i in range(preds.shape[0])])


def oracle_disagreement(preds: Any, labels: Any, *, pairwise: bool = False) -> torch.Tensor | float:
    """Disagreement measure of Eq. 4 of design-diversity: D = (N^{01} + N^{10}) / N, mean over pairs.

    It counts samples where exactly one member of a pair is correct (the "oracle" outputs), so two
    members that are wrong with different classes do *not* disagree here (unlike :func:`disagreement`).

    Args:
        preds: class predictions, shape (M, N), M >= 2.
        labels: true classes, shape (N,).
        pairwise: return the (M, M) matrix instead of the mean over pairs.
    """
    c = _correct(preds, labels, "oracle_disagreement")
    n = c.shape[1]
    return _pair_mean((c @ (1 - c).T + (1 - c) @ c.T) / n, pairwise)


def q_statistic(preds: Any, labels: Any, *, pairwise: bool = False) -> torch.Tensor | float:
    """Yule's Q statistic, Q = (N11 N00 - N01 N10) / (N11 N00 + N01 N10), mean over pairs.

    Pairs whose denominator is 0 (e.g. one member always right) have no defined Q: they are NaN in
    the matrix and left out of the mean (NaN when no pair is defined).
    """
    c = _correct(preds, labels, "q_statistic")
    n11, n10, n01, n00 = c @ c.T, c @ (1 - c).T, (1 - c) @ c.T, (1 - c) @ (1 - c).T
    num, den = n11 * n00 - n01 * n10, n11 * n00 + n01 * n10
    q = torch.where(den > 0, num / den.clamp_min(1e-300), torch.full_like(num, float("nan")))
    return _pair_mean(q, pairwise)


def correlation_coefficient(preds: Any, labels: Any, *, pairwise: bool = False) -> torch.Tensor | float:
    """Correlation ρ of the oracle outputs (Kuncheva & Whitaker 2003), mean over pairs.

    ρ = (N11 N00 - N01 N10) / sqrt((N11+N10)(N01+N00)(N11+N01)(N10+N00)); undefined pairs (a member
    always right or always wrong) are NaN and left out of the mean.
    """
    c = _correct(preds, labels, "correlation_coefficient")
    n11, n10, n01, n00 = c @ c.T, c @ (1 - c).T, (1 - c) @ c.T, (1 - c) @ (1 - c).T
    den = ((n11 + n10) * (n01 + n00) * (n11 + n01) * (n10 + n00)).sqrt()
    rho = torch.where(
        den > 0, (n11 * n00 - n01 * n10) / den.clamp_min(1e-300), torch.full_like(den, float("nan"))
    )
    return _pair_mean(rho, pairwise)


def double_fault(preds: Any, labels: Any, *, pairwise: bool = False) -> torch.Tensor | float:
    """Double-fault measure N^{00} / N: fraction of samples both members get wrong, mean over pairs."""
    c = _correct(preds, labels, "double_fault")
    return _pair_mean((1 - c) @ (1 - c).T / c.shape[1], pairwise)


def _class_counts(preds: torch.Tensor, num_classes: int) -> torch.Tensor:
    counts = torch.zeros(preds.shape[1], num_classes, dtype=torch.float64)
    counts.scatter_add_(1, preds.T, torch.ones_like(preds.T, dtype=torch.float64))
    return counts  # (N, C)


def equitability(
    preds: Any,
    *,
    num_species: Literal["members", "classes", "observed"] | int = "members",
    num_classes: int | None = None,
) -> torch.Tensor:
    """Shannon equitability of the members' votes on each sample, Eq. 5 of design-diversity.

    E = -Σ_i p_i ln p_i / ln S, where p_i is the fraction of the M members predicting class i.
    The paper says S is "the total number of prediction species/classes", which is ambiguous:

    * ``"members"`` (default): S = min(M, C), the largest number of distinct predictions M members
      can make. E is then 0 when all agree and 1 when all differ. This is the only reading that
      fits Table 2 of the paper (values up to 0.77 with three members on ImageNet: with S = C = 1000
      the maximum would be ln 3 / ln 1000 = 0.16).
    * ``"classes"``: S = C (``num_classes``, or the largest prediction + 1).
    * ``"observed"``: S = number of distinct classes predicted on that sample (Pielou's J); a
      sample where all members agree gets E = 0.
    * an int: that S.

    S = 1 gives E = 0 (one species has no diversity).

    Args:
        preds: class predictions, shape (M, N).
        num_species: how S is chosen (see above).
        num_classes: C; default the largest prediction + 1.

    Returns:
        Per-sample equitability, shape (N,), float64 in [0, 1] (take ``.mean()`` for a set).
    """
    preds = check_preds(preds)
    m, _ = preds.shape
    if m == 0:
        raise EnsdivError("equitability needs at least one member, got M = 0.")
    c = int(num_classes) if num_classes is not None else (int(preds.max()) + 1 if preds.numel() else 1)
    if preds.numel() and int(preds.max()) >= c:
        raise EnsdivError(f"preds hold class {int(preds.max())} but num_classes is {c}.")
    counts = _class_counts(preds, c)
    p = counts / m
    h = -torch.special.xlogy(p, p).sum(-1)
    if num_species == "members":
        s = torch.full_like(h, float(min(m, c)))
    elif num_species == "classes":
        s = torch.full_like(h, float(c))
    elif num_species == "observed":
        s = (counts > 0).sum(-1).double()
    elif isinstance(num_species, int) and not isinstance(num_species, bool) and num_species >= 1:
        s = torch.full_like(h, float(num_species))
    else:
        raise EnsdivError(
            f"num_species must be 'members', 'classes', 'observed' or a positive int, got {num_species!r}."
        )
    ln_s = s.log()
    return torch.where(s > 1, h / ln_s.clamp_min(1e-300), torch.zeros_like(h)) + 0.0  # + 0.0: no -0.0


def num_unique(preds: Any) -> torch.Tensor:
    """Number of distinct classes the members predict on each sample (#unique of SED, Table 1).

    Args:
        preds: class predictions, shape (M, N).

    Returns:
        Shape (N,), float values in 1..M (mean over samples gives the table's #unique).
    """
    preds = check_preds(preds)
    if preds.shape[0] == 0:
        raise EnsdivError("num_unique needs at least one member, got M = 0.")
    s = preds.sort(dim=0).values
    return 1.0 + (s[1:] != s[:-1]).sum(0).double()


def _two_models(preds_a: Any, preds_b: Any, labels: Any) -> tuple[torch.Tensor, torch.Tensor]:
    a = check_preds(preds_a, "preds_a", ndim=1)
    b = check_preds(preds_b, "preds_b", ndim=1)
    check_same_shape(a, b, "preds_a", "preds_b")
    labels = check_labels(labels, a.shape[0])
    if a.shape[0] == 0:
        raise EnsdivError("Need at least one sample, got N = 0.")
    return a == labels, b == labels


def error_inconsistency(preds_a: Any, preds_b: Any, labels: Any) -> float:
    """Error inconsistency of training-methods §4: fraction of samples where exactly one model is right.

    Args:
        preds_a, preds_b: class predictions of the two models, shape (N,) each.
        labels: true classes, shape (N,).
    """
    ca, cb = _two_models(preds_a, preds_b, labels)
    return float((ca != cb).double().mean())


def error_consistency(preds_a: Any, preds_b: Any, labels: Any) -> float:
    """Error consistency κ of Geirhos et al. (2020): agreement of correctness beyond chance.

    κ = (c_obs - c_exp) / (1 - c_exp), c_obs = fraction where both right or both wrong,
    c_exp = p_a p_b + (1 - p_a)(1 - p_b) with p the accuracies. NaN (with a warning) when
    c_exp = 1 (both models always right, or always wrong).
    """
    ca, cb = _two_models(preds_a, preds_b, labels)
    c_obs = float((ca == cb).double().mean())
    pa, pb = float(ca.double().mean()), float(cb.double().mean())
    c_exp = pa * pb + (1 - pa) * (1 - pb)
    if c_exp >= 1.0 - 1e-12:
        return nan_with_warning(
            "error_consistency is undefined when both models are always right or always wrong."
        )
    return (c_obs - c_exp) / (1 - c_exp)


def conversion_rate(ens_preds: Any, preds_a: Any, preds_b: Any, labels: Any) -> float:
    """Conversion rate of training-methods §4.2: the fraction of inconsistent errors the ensemble gets right.

    Over the samples where exactly one of models A and B is correct, the fraction where the
    ensemble's prediction is correct. NaN (with a warning) when there is no such sample.

    Args:
        ens_preds: predictions of the ensemble of A and B, shape (N,).
        preds_a, preds_b: predictions of the two models, shape (N,).
        labels: true classes, shape (N,).
    """
    ca, cb = _two_models(preds_a, preds_b, labels)
    e = check_preds(ens_preds, "ens_preds", ndim=1)
    check_same_shape(e, ca, "ens_preds", "labels")
    mask = ca != cb
    if not bool(mask.any()):
        return nan_with_warning("conversion_rate is undefined: no sample where exactly one model is correct.")
    labels = torch.as_tensor(labels).long()
    return float((e[mask] == labels[mask]).double().mean())


def specialization_angle(conf_a: Any, conf_b: Any, *, degrees: bool = True) -> torch.Tensor:
    """Angle in the confidence–confidence plane, training-methods §4.3 (Fig. 3): θ = atan2(conf_a, conf_b).

    θ is measured from the model-B axis, so it is high (towards 90°) when model A is the more
    confident one, 45° when both are equally confident, low when B is more confident (the paper:
    "when θ is high, Model 1 is more confident"). Confidences are typically each model's
    (temperature-calibrated) maximum softmax probability, or its probability of the true class.

    Args:
        conf_a, conf_b: non-negative confidences, shape (N,) each.
        degrees: return degrees in [0, 90] (default) instead of radians.

    Returns:
        Shape (N,).
    """
    a = as_tensor(conf_a, "conf_a").double()
    b = as_tensor(conf_b, "conf_b").double()
    check_same_shape(a, b, "conf_a", "conf_b")
    if bool((a < 0).any()) or bool((b < 0).any()):
        raise EnsdivError("Confidences must be non-negative (e.g. maximum softmax probabilities).")
    theta = torch.atan2(a, b)
    return theta * (180.0 / math.pi) if degrees else theta
