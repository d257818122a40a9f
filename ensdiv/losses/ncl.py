"""Negative-correlation losses of design-diversity (Rosales et al., Sec. 2.1 and 4.3), on member logits (M, B, C).

* :func:`gncl` — Generalised Negative Correlation Learning (Eq. 2; Buschjäger et al. 2020), *exact* form,
  with four consensus rules (``mean``, ``median``, ``geometric``, ``vote``) and a ``masked`` variant;
* :func:`balanced` — the balance of the ensemble's and the members' losses (Eq. 3);
* :func:`attribution_penalty` — the attribution-variance training loss (Eq. 8), which needs the members
  and the inputs (not only logits), built on :func:`ensdiv.losses.attribution_variance`.

:data:`NCL_LOSSES` registers the logits losses by name with the calling convention of
:data:`ensdiv.losses.ENSEMBLE_LOSSES`: ``loss(logits (M, B, C), target, lam=λ, **options)``;
:data:`INPUT_LOSSES` registers those that need the members and the inputs (the attribution penalty), called as
``loss(members, x, target, lam=λ, **options)`` with ``members`` a module mapping x to ``(M, B, C)`` logits.

Readings of what the paper leaves open (each said again where it is used):

* **Eq. 2's scaling.** The paper prints ``Σ_i l(h^i, y) − λ/(2M) Σ_i d_iᵀ D d_i``. Buschjäger et al. (and
  their Pysembles code, mode "exact") scale the member term by 1/M as well, so that λ = 0 is the mean
  member loss and λ = 1 the ensemble's own second-order loss: ``(1/M) Σ_i [l(h^i, y) − (λ/2) d_iᵀ D d_i]``.
  That is what :func:`gncl` computes (batch mean); the paper drops the 1/M (its λ = 0.2 is then a
  different weight relative to the member losses by a factor M).
* **D and f.** D is the Hessian of the cross-entropy with respect to the logits at the consensus,
  ``D = diag(p_f) − p_f p_fᵀ``, and ``d_i = h^i − f``, ``f = log p_f``. For the average consensus
  ``p_f = softmax(mean_i h^i)``, so f differs from the mean logits by a per-sample constant, which D
  annihilates (``D 1 = 0``): the penalty is exactly Pysembles' with ``f = mean logits``. Gradients flow
  through f and D (the exact mode), except for the vote consensus.
* **Consensus rules the paper names but does not define** (median, geometric mean, majority vote):
  ``median`` — the element-wise median over members of the members' softmax probabilities (the mean of
  the two middle values for an even M), renormalised; ``geometric`` — the normalised geometric mean of the
  members' probabilities, ``p_f ∝ Π_i p_i^{1/M}``. Because ``log softmax(h) = h − lse(h)``, this *equals*
  ``softmax(mean_i h^i)``: the geometric-mean consensus is identical to the average consensus (a
  consequence of the paper's menu, tested, and said in the book); ``vote`` — the members' argmax votes,
  smoothed: ``p_f = (n_c + α) / (M + α C)`` with ``α = vote_smoothing`` (default 0.5), no gradient
  through p_f (a vote has none).
* **Masked GNCL** (heuristic f): the penalty is off, per sample and member, where that member is wrong,
  ``argmax h^i ≠ y``; the members' cross-entropies stay.
* **Eq. 3** prints ``(1/M) Σ_i (λ l(f, y) + (1−λ)/M Σ_i l(h^i, y))`` with the index i used twice; the
  outer sum is over a term that does not depend on i, so it is read as
  ``λ · CE(f, y) + (1 − λ) · (1/M) Σ_i CE(h^i, y)`` with f the mean logits (the printed indices are a typo).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ensdiv.errors import InvalidInputError, unknown_name
from ensdiv.losses.core import attribution_variance, cross_entropy, independent

__all__ = ["CONSENSUS", "consensus_distribution", "gncl_penalty", "gncl", "balanced", "attribution_penalty",
           "NCL_LOSSES", "INPUT_LOSSES"]

CONSENSUS = ("mean", "median", "geometric", "vote")


def _check(logits: Tensor, target: Tensor) -> None:
    if not isinstance(logits, Tensor) or logits.dim() != 3:
        raise InvalidInputError(f"Member logits must be shaped (M, B, C), got {tuple(getattr(logits, 'shape', ()))}.")
    if logits.shape[0] < 1:
        raise InvalidInputError("The NCL losses need at least one member.")
    if target.dim() not in (1, 2) or target.shape[0] != logits.shape[1]:
        raise InvalidInputError(
            f"The target must be (B,) class indices or (B, C) soft targets with B = {logits.shape[1]}, "
            f"got {tuple(target.shape)}."
        )
    if not torch.is_floating_point(logits):
        raise InvalidInputError(f"Member logits must be floating point, got {logits.dtype}.")


def consensus_distribution(logits: Tensor, how: str = "mean", *, vote_smoothing: float = 0.5) -> Tensor:
    """The ensemble's consensus distribution p_f of GNCL (Eq. 2) under one of four rules.

    ``mean``: ``softmax(mean_i h^i)``; ``median``: element-wise median over members of their softmax
    probabilities, renormalised; ``geometric``: normalised geometric mean of the members' probabilities
    (equal to ``mean``, see the module docstring); ``vote``: argmax vote frequencies smoothed by
    ``vote_smoothing`` (α), ``(n_c + α) / (M + αC)``, detached.

    Shape:
        logits (M, B, C) -> (B, C), rows summing to 1.

    Example:
        >>> h = torch.tensor([[[2.0, 0.0]], [[0.0, 2.0]], [[3.0, 0.0]]])
        >>> consensus_distribution(h, "vote", vote_smoothing=0.5)  # votes 2 : 1
        tensor([[0.6250, 0.3750]])
    """
    if logits.dim() != 3:
        raise InvalidInputError(f"Member logits must be shaped (M, B, C), got {tuple(logits.shape)}.")
    z = logits.float()
    if how == "mean":
        return z.mean(0).softmax(-1)
    if how == "geometric":
        return z.log_softmax(-1).mean(0).softmax(-1)
    if how == "median":
        med = torch.quantile(z.softmax(-1), 0.5, dim=0)
        return med / med.sum(-1, keepdim=True)
    if how == "vote":
        if vote_smoothing <= 0:
            raise InvalidInputError(f"vote_smoothing must be positive (log of a zero frequency), got {vote_smoothing}.")
        m, _, c = z.shape
        with torch.no_grad():
            counts = F.one_hot(z.argmax(-1), c).sum(0).float()
            return (counts + vote_smoothing) / (m + vote_smoothing * c)
    raise unknown_name("GNCL consensus", how, CONSENSUS)


def gncl_penalty(logits: Tensor, p_f: Tensor) -> Tensor:
    """Per member and sample, the GNCL quadratic form ``d_iᵀ D d_i`` with ``d_i = h^i − log p_f`` and
    ``D = diag(p_f) − p_f p_fᵀ`` (the cross-entropy's Hessian in the logits at the consensus), computed as
    ``Σ_c p_c d_c² − (Σ_c p_c d_c)²`` (the variance of d under p_f, so it is ≥ 0).

    Shape:
        logits (M, B, C), p_f (B, C) -> (M, B).

    Example:
        >>> h = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]])
        >>> p = consensus_distribution(h)  # uniform: f = log 0.5; d = (1, 0) - f, up to a constant
        >>> gncl_penalty(h, p)  # 0.5·1 + 0.5·0 - 0.5² = 0.25 for both members
        tensor([[0.2500],
                [0.2500]])
    """
    p = p_f.float()
    d = logits.float() - p.clamp_min(1e-30).log()
    pd = (p * d).sum(-1)
    return (p * d * d).sum(-1) - pd * pd


def gncl(logits: Tensor, target: Tensor, *, lam: float = 0.2, consensus: str = "mean", masked: bool = False,
         vote_smoothing: float = 0.5, label_smoothing: float = 0.0) -> Tensor:
    """GNCL, Eq. 2 of design-diversity (Buschjäger et al.'s exact form, with their 1/M on the member term):
    ``mean_b (1/M) Σ_i [CE(h^i_b, y_b) − (λ/2) m_ib d_ibᵀ D_b d_ib]``.

    Args:
        logits: member logits (M, B, C).
        target: (B,) class indices or (B, C) soft targets.
        lam: λ (the paper uses 0.2). λ = 0 is :func:`ensdiv.losses.independent`.
        consensus: ``mean`` (average of the logits), ``median``, ``geometric``, ``vote`` (see
            :func:`consensus_distribution`).
        masked: heuristic (f): ``m_ib = 0`` where member i is wrong on sample b (``argmax h^i_b ≠ y_b``; with
            soft targets the target's argmax), else 1. Without it every ``m_ib = 1``.
        vote_smoothing: α of the vote consensus.
        label_smoothing: of the members' cross-entropies.

    Returns:
        A 0-d tensor.

    Shape:
        logits (M, B, C); target (B,) or (B, C) -> ().

    Example:
        >>> h = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]]); y = torch.tensor([0])
        >>> round(float(gncl(h, y, lam=0.0) - independent(h, y)), 6)
        0.0
        >>> round(float(independent(h, y) - gncl(h, y, lam=1.0)), 4)  # (1/2) · mean_i 0.25
        0.125
    """
    _check(logits, target)
    ce = independent(logits, target, label_smoothing=label_smoothing)
    if lam == 0:
        return ce
    pen = gncl_penalty(logits, consensus_distribution(logits, consensus, vote_smoothing=vote_smoothing))
    if masked:
        labels = target.argmax(-1) if target.dim() == 2 else target
        pen = pen * (logits.argmax(-1) == labels[None]).to(pen.dtype)
    return ce - 0.5 * lam * pen.mean()


def balanced(logits: Tensor, target: Tensor, *, lam: float = 0.2, label_smoothing: float = 0.0) -> Tensor:
    """The balanced loss, Eq. 3 of design-diversity read as ``λ · CE(f, y) + (1 − λ) · (1/M) Σ_i CE(h^i, y)``
    with f the mean of the member logits (the printed Eq. 3 reuses the index i; see the module docstring).

    Shape:
        logits (M, B, C); target (B,) or (B, C) -> ().

    Example:
        >>> h = torch.tensor([[[2.0, 0.0]], [[0.0, 2.0]]]); y = torch.tensor([0])
        >>> round(float(balanced(h, y, lam=1.0)), 4)  # CE of the mean logits (0, 0): log 2
        0.6931
    """
    _check(logits, target)
    if not 0.0 <= lam <= 1.0:
        raise InvalidInputError(f"The balanced loss needs 0 <= lam <= 1, got {lam}.")
    members = independent(logits, target, label_smoothing=label_smoothing)
    if lam == 0:
        return members
    return lam * cross_entropy(logits.float().mean(0), target, label_smoothing=label_smoothing) + (1 - lam) * members


def attribution_penalty(members: Sequence[nn.Module] | Callable[[Tensor], Tensor], x: Tensor, target: Tensor, *,
                        lam: float = 0.001, abs: bool = True, label_smoothing: float = 0.0) -> Tensor:
    """The attribution-diversity training loss, Eq. 8 of design-diversity: ``(1/M) Σ_i CE(h^i, y) − λ A``,
    with A the differentiable Saliency variance of :func:`ensdiv.losses.attribution_variance` (Eq. 7 on
    ``|∂ logit_y / ∂x|``, mean over the batch), computed on the same forward pass as the cross-entropies.

    Takes the members (or a callable ``x -> (M, B, C)``) and the inputs, not logits: A differentiates the
    logits with respect to x. Hard labels only.

    Shape:
        x (B, C, H, W); target (B,) -> ().

    Example:
        >>> members = [nn.Sequential(nn.Flatten(), nn.Linear(4, 2)) for _ in range(2)]
        >>> x, y = torch.ones(3, 1, 2, 2), torch.tensor([0, 1, 0])
        >>> bool(attribution_penalty(members, x, y, lam=0.0) > 0)
        True
    """
    target = torch.as_tensor(target)
    if target.dim() != 1:
        raise InvalidInputError(
            f"attribution_penalty needs (B,) class indices, got a target shaped {tuple(target.shape)}."
        )
    a, logits = attribution_variance(members, x, target, abs=abs, return_logits=True)
    return independent(logits, target, label_smoothing=label_smoothing) - lam * a


def _named(consensus: str, masked: bool = False) -> Callable[..., Tensor]:
    def loss(logits: Tensor, target: Tensor, *, lam: float = 0.2, **options: Any) -> Tensor:
        return gncl(logits, target, lam=lam, consensus=consensus, masked=masked, **options)

    loss.__name__ = loss.__qualname__ = f"gncl_{'masked' if masked else consensus}"
    loss.__doc__ = f"GNCL (Eq. 2) with the {consensus} consensus{' and the wrong-member mask' if masked else ''}."
    return loss


#: ensemble losses of design-diversity, called as ``loss(logits (M, B, C), target, lam=λ, **options)``
NCL_LOSSES: dict[str, Callable[..., Tensor]] = {
    "gncl": gncl,
    **{f"gncl_{c}": _named(c) for c in CONSENSUS},
    "gncl_masked": _named("mean", masked=True),
    "balanced": balanced,
}

#: ensemble losses that need the members and the inputs, not only logits; called as
#: ``loss(members, x, target, lam=λ, **options)`` where ``members`` is a module (or callable) mapping x to
#: ``(M, B, C)`` logits or a sequence of members (a jointly trained ``ed.Joint`` recipe may name them)
INPUT_LOSSES: dict[str, Callable[..., Tensor]] = {"attribution_penalty": attribution_penalty}
