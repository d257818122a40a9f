"""Training losses of the five papers, as functions on member logits ``(M, B, C)`` with plain arguments.

Every loss here takes logits (never a model) and returns a 0-d tensor, so it can be tested against a
naive loop and reused by any training set-up. A jointly trained ensemble (:class:`ensdiv.train.Joint`)
or a set of heads (:class:`ensdiv.train.Heads`) names its loss by a key of :data:`ENSEMBLE_LOSSES`;
each of those is called as ``loss(logits, target, lam=λ, **options)``.

* :func:`independent` — the mean of the members' cross-entropies (a deep ensemble trained in one step).
* :func:`distillation` — Hinton et al.'s soft (tempered KL) or DeiT's hard (teacher argmax) distillation.
* :func:`nt_xent` — SimCLR's contrastive loss between two views' embeddings.
* :func:`attribution_variance` — design-diversity's attribution diversity A (Eq. 8), differentiable:
  the training loss is ``(1/M) Σ CE − λ A``.

The later chapters add theirs (GNCL family, balanced, attribution penalty, A2D, DivDis, SED).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ensdiv.errors import InvalidInputError, unknown_name

__all__ = [
    "independent", "distillation", "nt_xent", "attribution_variance", "ENSEMBLE_LOSSES", "ensemble_loss",
    "cross_entropy",
]


def _check_members(logits: Tensor, target: Tensor) -> None:
    if logits.dim() != 3:
        raise InvalidInputError(f"Member logits must be shaped (M, B, C), got {tuple(logits.shape)}.")
    if target.dim() == 1 and target.shape[0] != logits.shape[1]:
        raise InvalidInputError(
            f"The target has {target.shape[0]} samples but the logits {logits.shape[1]}."
        )


def cross_entropy(logits: Tensor, target: Tensor, *, label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy of ``(B, C)`` logits against class indices ``(B,)`` or soft targets ``(B, C)``."""
    if target.dim() == 2:  # mixup / cutmix soft targets
        return torch.sum(-target * F.log_softmax(logits.float(), dim=-1), dim=-1).mean()
    return F.cross_entropy(logits.float(), target, label_smoothing=label_smoothing)


def independent(logits: Tensor, target: Tensor, *, lam: float = 0.0, label_smoothing: float = 0.0) -> Tensor:
    """Mean over members of each member's cross-entropy: ``(1/M) Σ_m CE(f_m, y)``.

    ``lam`` is accepted (and ignored) so that every ensemble loss has one calling convention.

    Shape:
        logits (M, B, C); target (B,) class indices or (B, C) soft targets; returns a 0-d tensor.

    Example:
        >>> logits = torch.zeros(2, 3, 4)
        >>> round(float(independent(logits, torch.tensor([0, 1, 2]))), 4)  # log(4)
        1.3863
    """
    _check_members(logits, target)
    m, b, c = logits.shape
    flat_target = target.repeat(m) if target.dim() == 1 else target.repeat(m, 1)
    return cross_entropy(logits.reshape(m * b, c), flat_target, label_smoothing=label_smoothing)


def distillation(
    student: Tensor,
    teacher: Tensor,
    target: Tensor,
    *,
    mode: str = "soft",
    temperature: float = 4.0,
    alpha: float = 0.9,
    label_smoothing: float = 0.0,
) -> Tensor:
    """Knowledge distillation: ``(1 − α) CE(s, y) + α · KD``.

    ``soft`` (Hinton et al., 2015): ``KD = T² KL(softmax(t/T) ‖ softmax(s/T))``, batch mean;
    ``hard`` (DeiT's hard-label distillation, used by attack-similarity's re-trained ViTs):
    ``KD = CE(s, argmax t)``. The teacher receives no gradient.

    Shape:
        student, teacher (B, C) logits; target (B,) or (B, C); returns a 0-d tensor.

    Example:
        >>> s = torch.tensor([[2.0, 0.0]]); t = torch.tensor([[2.0, 0.0]])
        >>> float(distillation(s, t, torch.tensor([0]), alpha=1.0))  # same distribution: KL = 0
        0.0
    """
    if student.shape != teacher.shape:
        raise InvalidInputError(
            f"Student logits {tuple(student.shape)} and teacher logits {tuple(teacher.shape)} differ in shape."
        )
    if mode not in ("soft", "hard"):
        raise unknown_name("distillation mode", mode, ("soft", "hard"))
    s, t = student.float(), teacher.detach().float()
    ce = cross_entropy(s, target, label_smoothing=label_smoothing)
    if mode == "hard":
        kd = F.cross_entropy(s, t.argmax(-1))
    else:
        kd = F.kl_div(
            F.log_softmax(s / temperature, -1), F.log_softmax(t / temperature, -1), log_target=True,
            reduction="batchmean",
        ) * temperature**2
    return (1 - alpha) * ce + alpha * kd


def nt_xent(z1: Tensor, z2: Tensor, *, temperature: float = 0.5) -> Tensor:
    """NT-Xent (Eq. 1 of SimCLR, Chen et al. 2020): each view's cross-entropy against its partner
    among the other 2N − 1 embeddings, cosine similarity over ``temperature``.

    Shape:
        z1, z2 (N, D) embeddings of two views of the same N images; returns a 0-d tensor.

    Example:
        >>> z = torch.eye(2)
        >>> round(float(nt_xent(z, z, temperature=1.0)), 4)  # partner sim 1, others 0 and 0
        0.5514
    """
    if z1.shape != z2.shape or z1.dim() != 2:
        raise InvalidInputError(f"nt_xent needs two (N, D) embeddings of one shape, got {tuple(z1.shape)} "
                                f"and {tuple(z2.shape)}.")
    z = F.normalize(torch.cat([z1, z2]).float(), dim=1)
    n = z1.shape[0]
    sim = z @ z.t() / temperature
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool, device=z.device), float("-inf"))
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(n)]).to(z.device)
    return F.cross_entropy(sim, target)


def attribution_variance(
    models_or_logits_fn: Sequence[nn.Module] | Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    target: Any,
    *,
    abs: bool = True,
    return_logits: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Differentiable attribution diversity for the training loss of Eq. 8: (1/M) Σ_i l(h^i, y) - λ A.

    Saliency attributions ∂ logit_target / ∂x of every member are computed with
    ``torch.autograd.grad(create_graph=True)``, so A (the mean over samples of Eq. 7) can be
    back-propagated into the members' weights. The paper reports this costs about 2× a forward-
    backward pass (one extra backward per member).

    Args:
        models_or_logits_fn: a sequence of M members, or a callable x -> logits (M, N, C).
        x: inputs, shape (N, C, H, W) (not modified).
        target: classes to explain, shape (N,) (the labels during training).
        abs: absolute saliency (default, as in :func:`attributions`).
        return_logits: also return the (M, N, C) logits of the same forward pass (for the
            cross-entropy term).

    Returns:
        A scalar tensor A (and the logits when ``return_logits``). Subtract ``lam * A`` from the loss.

    Unlike the other losses here it takes the members (or a callable giving their logits), not
    logits: the penalty differentiates the logits with respect to the input.

    Shape:
        x (N, C, H, W); target (N,); returns a 0-d tensor (and logits (M, N, C)).

    Example:
        >>> members = [nn.Linear(3, 2, bias=False) for _ in range(2)]
        >>> with torch.no_grad():
        ...     _ = members[0].weight.copy_(torch.tensor([[1.0, 0, 0], [0, 1, 0]]))
        ...     _ = members[1].weight.copy_(torch.tensor([[1.0, 0, 0], [0, 1, 0]]))
        >>> float(attribution_variance(members, torch.ones(4, 3), torch.zeros(4)))  # identical members
        0.0
    """
    x = torch.as_tensor(x).detach().float().requires_grad_(True)
    t = torch.as_tensor(target).long()
    t = t.expand(x.shape[0]) if t.ndim == 0 else t
    if t.shape != (x.shape[0],):
        raise InvalidInputError(f"The target must be shaped (N,) = ({x.shape[0]},), got {tuple(t.shape)}.")
    if isinstance(models_or_logits_fn, nn.Module) and not isinstance(models_or_logits_fn, nn.ModuleList):
        out = models_or_logits_fn(x)
        if out.ndim != 3:
            raise InvalidInputError(
                f"A single module must return member logits (M, N, C), got shape {tuple(out.shape)}; "
                "pass a list of members."
            )
        outs = list(out)
    elif callable(models_or_logits_fn) and not isinstance(models_or_logits_fn, nn.ModuleList):
        outs = list(models_or_logits_fn(x))
    else:
        outs = [m(x) for m in models_or_logits_fn]
    if not outs:
        raise InvalidInputError("attribution_variance needs at least one member.")
    grads = []
    for o in outs:
        (g,) = torch.autograd.grad(o.gather(1, t[:, None]).sum(), x, create_graph=True)
        grads.append(g.abs() if abs else g)
    attr = torch.stack(grads)
    penalty = attr.var(dim=0, correction=0).reshape(x.shape[0], -1).sum(1).mean()
    return (penalty, torch.stack(outs)) if return_logits else penalty


#: losses of jointly trained ensembles, called as ``loss(logits (M, B, C), target, lam=λ, **options)``
ENSEMBLE_LOSSES: dict[str, Callable[..., Tensor]] = {"independent": independent}


def ensemble_loss(name: str) -> Callable[..., Tensor]:
    """The ensemble loss registered as ``name`` (one sentence with close matches if unknown)."""
    if name not in ENSEMBLE_LOSSES:
        raise unknown_name("ensemble loss", name, ENSEMBLE_LOSSES)
    return ENSEMBLE_LOSSES[name]
