"""Prediction diversity: pairwise oracle measures (Kuncheva & Whitaker 2003), equitability, #unique.

All functions take integer predictions ``preds`` shaped (M, N) (members, samples) and, where the
measure depends on correctness, ``labels`` shaped (N,). Pairwise measures return a 0-d tensor,
the mean over the M(M-1)/2 member pairs (pairs where the measure is undefined are left out; NaN
when none is defined), or with ``pairwise=True`` the (M, M) matrix (diagonal = a member with
itself). Counts are exact, and every result is float64.
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from ensdiv.errors import InvalidInputError
from ensdiv.metrics.checks import check_labels, check_members, check_preds

__all__ = [
    "pair_counts",
    "disagreement",
    "disagreement_matrix",
    "oracle_disagreement",
    "q_statistic",
    "correlation_coefficient",
    "double_fault",
    "equitability",
    "num_unique",
]


def _pair_mean(mat: torch.Tensor, pairwise: bool) -> torch.Tensor:
    if pairwise:
        return mat
    m = mat.shape[0]
    iu = torch.triu_indices(m, m, offset=1)
    return mat[iu[0], iu[1]].nanmean()  # NaN when no pair is defined


def _counts(preds: Any, labels: Any, name: str, validate: bool) -> tuple[torch.Tensor, ...]:
    """N11, N10, N01, N00 as (M, M) float64 matrices (i right/wrong, j right/wrong)."""
    preds = check_preds(preds, validate=validate)
    check_members(preds.shape[0], name, validate=validate)
    labels = check_labels(labels, preds.shape[1], validate=validate)
    if validate and preds.shape[1] == 0:
        raise InvalidInputError(f"{name} needs at least one sample, got N = 0.")
    c = (preds == labels).double()
    w = 1.0 - c
    return c @ c.T, c @ w.T, w @ c.T, w @ w.T


def pair_counts(preds: Any, labels: Any, *, validate_args: bool = True) -> dict[str, torch.Tensor]:
    """Oracle counts N^{ab} of every member pair, the table under Eq. 4 of design-diversity.

    a = 1 when the first member of the pair is correct, b likewise for the second.

    Args:
        preds: class predictions, shape (M, N).
        labels: true classes, shape (N,).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        ``{"n11", "n10", "n01", "n00"}``, each float64; ``n10[i, j]`` counts the samples where member i
        is right and member j is wrong. A dict, not a tensor: four named tables.

    Shape:
        preds (M, N), labels (N,) -> four (M, M) tensors.

    Example:
        >>> c = pair_counts(torch.tensor([[0, 1, 0], [0, 0, 0]]), torch.tensor([0, 1, 1]))
        >>> c["n10"].tolist()  # member 0 right where member 1 is wrong: sample 1
        [[0.0, 1.0], [0.0, 0.0]]
    """
    preds = check_preds(preds, validate=validate_args)
    labels = check_labels(labels, preds.shape[1], validate=validate_args)
    c = (preds == labels).double()
    w = 1.0 - c
    return {"n11": c @ c.T, "n10": c @ w.T, "n01": w @ c.T, "n00": w @ w.T}


def disagreement_matrix(preds: Any, *, validate_args: bool = True) -> torch.Tensor:
    """Fraction of samples on which members i and j predict different classes, for every pair.

    Computed one member at a time (memory O(M·N), not O(M·N·C)).

    Args:
        preds: class predictions, shape (M, N), N >= 1 (integer class indices >= 0).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        float64, symmetric, zero diagonal.

    Raises:
        InvalidInputError: ``preds`` not a 2-d integer tensor or array, negative, or with no samples.

    Shape:
        preds (M, N) -> (M, M).

    Example:
        >>> disagreement_matrix(torch.tensor([[0, 1], [0, 2]])).tolist()
        [[0.0, 0.5], [0.5, 0.0]]
    """
    preds = check_preds(preds, validate=validate_args)
    if validate_args and preds.shape[1] == 0:
        raise InvalidInputError(f"preds must hold at least one sample per member, got shape {tuple(preds.shape)}.")
    if preds.shape[0] == 0:
        return torch.zeros(0, 0, dtype=torch.float64)
    return torch.stack([(preds[i] != preds).double().mean(1) for i in range(preds.shape[0])])


def disagreement(preds: Any, *, pairwise: bool = False, validate_args: bool = True) -> torch.Tensor:
    """Label-free disagreement: mean over member pairs of the fraction of samples predicted differently.

    Ho (1998); the "disagreement" of SED and of most deep-ensemble papers. Unlike the oracle
    disagreement of Eq. 4 of design-diversity (:func:`oracle_disagreement`), two members that are
    both wrong with different classes *do* disagree here.

    Args:
        preds: class predictions, shape (M, N), M >= 2, N >= 1.
        pairwise: return the (M, M) matrix instead of the mean over pairs.
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        float64 in [0, 1].

    Shape:
        preds (M, N) -> () (0-d), or (M, M) with ``pairwise=True``.

    Example:
        >>> disagreement(torch.tensor([[0, 1, 2], [0, 1, 1]]))  # members differ on 1 of 3 samples
        tensor(0.3333, dtype=torch.float64)
    """
    preds = check_preds(preds, validate=validate_args)
    check_members(preds.shape[0], "disagreement", validate=validate_args)
    if validate_args and preds.shape[1] == 0:
        raise InvalidInputError("disagreement needs at least one sample, got N = 0.")
    return _pair_mean(disagreement_matrix(preds, validate_args=False), pairwise)


def oracle_disagreement(preds: Any, labels: Any, *, pairwise: bool = False, validate_args: bool = True) -> torch.Tensor:
    """Disagreement measure of Eq. 4 of design-diversity: D = (N^{01} + N^{10}) / N, mean over pairs.

    It counts samples where exactly one member of a pair is correct (the "oracle" outputs), so two
    members that are wrong with different classes do *not* disagree here (unlike :func:`disagreement`).

    Args:
        preds: class predictions, shape (M, N), M >= 2.
        labels: true classes, shape (N,).
        pairwise: return the (M, M) matrix instead of the mean over pairs.
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        float64 in [0, 1].

    Shape:
        preds (M, N), labels (N,) -> () (0-d), or (M, M) with ``pairwise=True``.

    Example:
        >>> oracle_disagreement(torch.tensor([[0, 1, 2], [0, 1, 1]]), torch.tensor([0, 1, 0]))
        tensor(0., dtype=torch.float64)
    """
    n11, n10, n01, n00 = _counts(preds, labels, "oracle_disagreement", validate_args)
    return _pair_mean((n10 + n01) / (n11 + n10 + n01 + n00), pairwise)


def q_statistic(preds: Any, labels: Any, *, pairwise: bool = False, validate_args: bool = True) -> torch.Tensor:
    """Yule's Q statistic (Kuncheva & Whitaker 2003; design-diversity §2), mean over pairs.

    Q = (N11 N00 - N01 N10) / (N11 N00 + N01 N10). Ambiguity resolved: a pair whose denominator is
    0 (e.g. one member always right) has no defined Q; it is NaN in the matrix and left out of the
    mean (NaN when no pair is defined).

    Args:
        preds: class predictions, shape (M, N), M >= 2.
        labels: true classes, shape (N,).
        pairwise: return the (M, M) matrix instead of the mean over pairs.
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        float64 in [-1, 1] (or NaN).

    Shape:
        preds (M, N), labels (N,) -> () (0-d), or (M, M) with ``pairwise=True``.

    Example:
        >>> y = torch.tensor([0, 1, 2, 3])  # N11 = N10 = N01 = N00 = 1: independent errors
        >>> q_statistic(torch.tensor([[0, 1, 0, 0], [0, 0, 2, 0]]), y)
        tensor(0., dtype=torch.float64)
    """
    n11, n10, n01, n00 = _counts(preds, labels, "q_statistic", validate_args)
    num, den = n11 * n00 - n01 * n10, n11 * n00 + n01 * n10
    q = torch.where(den > 0, num / den.clamp_min(1e-300), torch.full_like(num, float("nan")))
    return _pair_mean(q, pairwise)


def correlation_coefficient(
    preds: Any, labels: Any, *, pairwise: bool = False, validate_args: bool = True
) -> torch.Tensor:
    """Correlation ρ of the oracle outputs (Kuncheva & Whitaker 2003; design-diversity §2), mean over pairs.

    ρ = (N11 N00 - N01 N10) / sqrt((N11+N10)(N01+N00)(N11+N01)(N10+N00)); the Pearson (phi)
    correlation of the two members' 0/1 correctness. Ambiguity resolved: undefined pairs (a member
    always right or always wrong) are NaN and left out of the mean.

    Args:
        preds: class predictions, shape (M, N), M >= 2.
        labels: true classes, shape (N,).
        pairwise: return the (M, M) matrix instead of the mean over pairs.
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        float64 in [-1, 1] (or NaN).

    Shape:
        preds (M, N), labels (N,) -> () (0-d), or (M, M) with ``pairwise=True``.

    Example:
        >>> y = torch.tensor([0, 1, 2, 3])  # identical correctness patterns: rho = 1
        >>> correlation_coefficient(torch.tensor([[0, 1, 0, 0], [0, 1, 1, 1]]), y)
        tensor(1., dtype=torch.float64)
    """
    n11, n10, n01, n00 = _counts(preds, labels, "correlation_coefficient", validate_args)
    den = ((n11 + n10) * (n01 + n00) * (n11 + n01) * (n10 + n00)).sqrt()
    rho = torch.where(den > 0, (n11 * n00 - n01 * n10) / den.clamp_min(1e-300), torch.full_like(den, float("nan")))
    return _pair_mean(rho, pairwise)


def double_fault(preds: Any, labels: Any, *, pairwise: bool = False, validate_args: bool = True) -> torch.Tensor:
    """Double-fault measure N^{00} / N (Kuncheva & Whitaker 2003): fraction both members get wrong.

    The pairwise analogue of attack-similarity's "all wrong" ratio (:func:`all_wrong_ratio`).

    Args:
        preds: class predictions, shape (M, N), M >= 2.
        labels: true classes, shape (N,).
        pairwise: return the (M, M) matrix instead of the mean over pairs.
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        float64 in [0, 1].

    Shape:
        preds (M, N), labels (N,) -> () (0-d), or (M, M) with ``pairwise=True``.

    Example:
        >>> double_fault(torch.tensor([[1, 1, 2], [1, 0, 2]]), torch.tensor([0, 1, 2]))
        tensor(0.3333, dtype=torch.float64)
    """
    n11, n10, n01, n00 = _counts(preds, labels, "double_fault", validate_args)
    return _pair_mean(n00 / (n11 + n10 + n01 + n00), pairwise)


def _class_counts(preds: torch.Tensor, num_classes: int) -> torch.Tensor:
    counts = torch.zeros(preds.shape[1], num_classes, dtype=torch.float64, device=preds.device)
    counts.scatter_add_(1, preds.T, torch.ones(preds.T.shape, dtype=torch.float64, device=preds.device))
    return counts  # (N, C)


def equitability(
    preds: Any,
    *,
    num_species: Literal["members", "classes", "observed"] | int = "members",
    num_classes: int | None = None,
    validate_args: bool = True,
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
        preds: class predictions, shape (M, N), M >= 1.
        num_species: how S is chosen (see above).
        num_classes: C; default the largest prediction + 1.
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        Per-sample equitability, float64 in [0, 1] (take ``.mean()`` for a set).

    Shape:
        preds (M, N) -> (N,).

    Example:
        >>> preds = torch.tensor([[0, 0, 0], [0, 1, 1], [0, 2, 1]])  # 3 members; S = min(3, 10) = 3
        >>> equitability(preds, num_classes=10)  # all agree / all differ / a 2-1 split
        tensor([0.0000, 1.0000, 0.5794], dtype=torch.float64)
    """
    preds = check_preds(preds, validate=validate_args)
    m = preds.shape[0]
    check_members(m, "equitability", at_least=1, what="is defined over members", validate=validate_args)
    c = int(num_classes) if num_classes is not None else (int(preds.max()) + 1 if preds.numel() else 1)
    if validate_args and preds.numel() and int(preds.max()) >= c:
        raise InvalidInputError(f"preds hold class {int(preds.max())} but num_classes is {c}.")
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
        raise InvalidInputError(
            f"num_species must be 'members', 'classes', 'observed' or a positive int, got {num_species!r}."
        )
    return torch.where(s > 1, h / s.log().clamp_min(1e-300), torch.zeros_like(h)) + 0.0  # + 0.0: no -0.0


def num_unique(preds: Any, *, validate_args: bool = True) -> torch.Tensor:
    """Number of distinct classes the members predict on each sample (#unique of SED Table 1).

    Args:
        preds: class predictions, shape (M, N), M >= 1.
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        float64 values in 1..min(M, C) (the mean over samples is the table's #unique).

    Shape:
        preds (M, N) -> (N,).

    Example:
        >>> num_unique(torch.tensor([[0, 1, 2], [0, 2, 2], [0, 3, 1]]))
        tensor([1., 3., 2.], dtype=torch.float64)
    """
    preds = check_preds(preds, validate=validate_args)
    check_members(preds.shape[0], "num_unique", at_least=1, what="is defined over members", validate=validate_args)
    s = preds.sort(dim=0).values
    return 1.0 + (s[1:] != s[:-1]).sum(0).double()
