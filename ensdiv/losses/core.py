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


# ---- SED chapter: A2D, DivDis and Scalable Ensemble Diversification (Rubinstein et al.) ------------
_A2D_EPS = 1e-9
PAIRINGS = ("all", "one_vs_rest")


def sample_members(num_members: int, size: int, *, generator: torch.Generator | None = None) -> Tensor:
    """SED's stochastic subset I (§3.2.2): ``size`` distinct members of ``num_members``, drawn uniformly.

    Draws ``torch.randperm`` from ``generator`` (default: torch's global generator, which the training
    engine re-seeds every epoch from the data-order seed, so a run is deterministic and resumes
    identically). ``size`` of 0 or ``>= num_members`` returns every member.

    Shape:
        returns (min(size, M),) sorted member indices (int64).

    Example:
        >>> sample_members(5, 2, generator=torch.Generator().manual_seed(0)).tolist()
        [0, 4]
    """
    if num_members < 1:
        raise InvalidInputError(f"sample_members needs at least one member, got {num_members}.")
    if size < 0:
        raise InvalidInputError(f"The subset size must be zero or positive, got {size}.")
    if size == 0 or size >= num_members:
        return torch.arange(num_members)
    return torch.randperm(num_members, generator=generator)[:size].sort().values


def _pairs(m: int, pairs: str, generator: torch.Generator | None) -> list[tuple[int, int]]:
    """Ordered pairs (i, j): ŷ is taken from member i. ``all``: i < j (Eq. 3); ``one_vs_rest``: a random
    member r and every other i as (i, r) (the reference implementation)."""
    if pairs not in PAIRINGS:
        raise unknown_name("A2D pairing", pairs, PAIRINGS)
    if pairs == "all":
        return [(i, j) for i in range(m) for j in range(i + 1, m)]
    r = int(torch.randint(0, m, (1,), generator=generator))
    return [(i, r) for i in range(m) if i != r]


def a2d_pairs(probs: Tensor, *, pairs: str = "all", generator: torch.Generator | None = None) -> Tensor:
    """Per-sample A2D disagreement (Eq. 2 of SED, Pagliardini et al. 2023) averaged over member pairs.

    For a pair (i, j) with ŷ = argmax_c p^i_c(x): ``−log[p^i_ŷ (1 − p^j_ŷ) + (1 − p^i_ŷ) p^j_ŷ]`` (plus 1e-9
    inside the log). Argmax convention: ŷ comes from the first member of the pair; the gradient flows
    through both members' probabilities (the argmax index itself is not differentiated), as in the
    reference code. Pairings: ``all`` — every i < j (Eq. 3, cost O(M²)); ``one_vs_rest`` — the reference
    code's: one random member r, and ŷ taken from each other member i against r (cost O(M)). All pairs are
    computed in one tensor operation (no Python loop over pairs), from an (M, B, M) gather.

    Args:
        probs: member probabilities (M, B, C), M >= 2.
        pairs: ``"all"`` or ``"one_vs_rest"``.
        generator: draws r for ``one_vs_rest`` (default torch's global generator).

    Shape:
        probs (M, B, C) -> (B,).

    Example:
        >>> p = torch.tensor([[[0.9, 0.1]], [[0.9, 0.1]]])  # two members agreeing
        >>> round(float(a2d_pairs(p)), 4)  # -log(0.9*0.1 + 0.1*0.9)
        1.7148
    """
    if probs.dim() != 3 or probs.shape[0] < 2:
        raise InvalidInputError(f"A2D needs member probabilities (M >= 2, B, C), got {tuple(probs.shape)}.")
    m, b, _ = probs.shape
    ij = torch.tensor(_pairs(m, pairs, generator), device=probs.device)  # (P, 2)
    i, j = ij[:, 0], ij[:, 1]
    top, yhat = probs.max(-1)  # (M, B): each member's top probability and class
    # at[k, n, l] = p^k_{ŷ_l(x_n)}: every member's probability of every member's top class, (M, B, M) —
    # one gather for all pairs, never a (pairs, B, C) copy of the probabilities
    at = probs.gather(-1, yhat.T.unsqueeze(0).expand(m, b, m))
    p_i, p_j = top[i], at[j, :, i]  # (P, B)
    return (-torch.log(p_i * (1 - p_j) + (1 - p_i) * p_j + _A2D_EPS)).mean(0)


def sed_weights(logits: Tensor, target: Tensor) -> Tensor:
    """SED's sample weights α_n (Eq. 4): CE of the logit-averaged ensemble on each sample divided by the
    square of its batch mean, under stop-gradient. Their batch mean is 1 / (batch mean CE) (Eq. 5).

    Shape:
        logits (M, B, C); target (B,) class indices or (B, C) soft targets -> (B,), detached.

    Example:
        >>> w = sed_weights(torch.tensor([[[2.0, 0.0], [0.0, 2.0]]]), torch.tensor([0, 0]))
        >>> [round(float(v), 3) for v in w]
        [0.1, 1.675]
    """
    _check_members(logits, target)
    with torch.no_grad():
        mean_logits = logits.float().mean(0)
        if target.dim() == 2:
            ce = torch.sum(-target * F.log_softmax(mean_logits, -1), -1)
        else:
            ce = F.cross_entropy(mean_logits, target, reduction="none")
        return ce / ce.mean().clamp_min(1e-12) ** 2


def sed(logits: Tensor, target: Tensor, *, lam: float = 0.1, pairs: str = "one_vs_rest", subset: int = 0,
        label_smoothing: float = 0.0, generator: torch.Generator | None = None) -> Tensor:
    """SED-A2D (Eq. 6): ``mean_m CE(f_m, y) + λ · mean_n[stopgrad(α_n) · A2D_n]`` on the labelled batch.

    ``λ`` is the weight relative to the main loss (the released configs' ``manual_lambda``; their
    ``0.5·main + 0.5·manual_lambda·div`` is this loss times 0.5). Eq. 6 divides a sum over m < l by
    M(M−1), i.e. half the mean over pairs; here the mean over pairs is used and the factor 2 is part of λ.
    With ``subset`` > 0 the members of a random subset I (:func:`sample_members`) are kept before
    everything else, so main loss, α_n and A2D all use I, as in the reference code. A training set-up
    that wants unsampled members to receive no gradient at all draws I itself and forwards only those
    members (:class:`ensdiv.models.HeadStack` does), then calls this with ``subset=0``.

    Shape:
        logits (M, B, C); target (B,) or (B, C); returns a 0-d tensor.

    Example:
        >>> x = torch.tensor([[[2.0, 0.0]], [[0.0, 2.0]]]); y = torch.tensor([0])
        >>> bool(sed(x, y, lam=0.0) == independent(x, y))
        True
    """
    _check_members(logits, target)
    if subset:
        logits = logits[sample_members(logits.shape[0], subset, generator=generator).to(logits.device)]
    main = independent(logits, target, label_smoothing=label_smoothing)
    if lam == 0 or logits.shape[0] < 2:
        return main
    div = a2d_pairs(logits.float().softmax(-1), pairs=pairs, generator=generator)
    return main + lam * (sed_weights(logits, target) * div).mean()


def _split_unlabeled(logits: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    if logits.dim() != 3:
        raise InvalidInputError(f"Member logits must be shaped (M, B, C), got {tuple(logits.shape)}.")
    b = target.shape[0]
    if logits.shape[1] <= b:
        raise InvalidInputError(
            f"A naive diversification loss needs the unlabeled OOD batch after the {b} labelled samples "
            f"(logits (M, B + B_ood, C)), got {logits.shape[1]} samples in all."
        )
    return logits[:, :b], logits[:, b:]


def naive_a2d(logits: Tensor, target: Tensor, *, lam: float = 1.0, pairs: str = "all",
              label_smoothing: float = 0.0, generator: torch.Generator | None = None) -> Tensor:
    """Naive A2D (Eqs. 1-3): cross-entropy on the labelled samples plus λ · A2D on a separate unlabeled
    OOD batch, every pair of members (``pairs="all"``) or one-vs-rest.

    Convention: ``logits`` holds the labelled batch first and the OOD batch after it, ``(M, B + B_ood, C)``;
    ``target`` labels the first B.

    Shape:
        logits (M, B + B_ood, C); target (B,); returns a 0-d tensor.

    Example:
        >>> x = torch.zeros(2, 3, 2)  # 1 labelled + 2 OOD samples, uniform members
        >>> round(float(naive_a2d(x, torch.tensor([0]), lam=1.0)), 4)  # log 2 + (-log 0.5)
        1.3863
    """
    labelled, ood = _split_unlabeled(logits, target)
    main = independent(labelled, target, label_smoothing=label_smoothing)
    if lam == 0 or logits.shape[0] < 2:
        return main
    return main + lam * a2d_pairs(ood.float().softmax(-1), pairs=pairs, generator=generator).mean()


def divdis_mi(probs: Tensor) -> Tensor:
    """DivDis's repulsion (Lee et al. 2023): mean over member pairs i < j of the mutual information between
    the two members' predictions on an unlabeled batch, with the joint distribution estimated over the batch:
    ``P_ij(c, d) = mean_b p^i_c(x_b) p^j_d(x_b)`` and ``MI = KL(P_ij ‖ P_i ⊗ P_j)``.

    Shape:
        probs (M, B, C), M >= 2 -> () (0-d).

    Example:
        >>> p = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]])  # identical members
        >>> round(float(divdis_mi(p)), 4)  # log 2
        0.6931
    """
    if probs.dim() != 3 or probs.shape[0] < 2:
        raise InvalidInputError(f"DivDis needs member probabilities (M >= 2, B, C), got {tuple(probs.shape)}.")
    p = probs.float()
    joint = torch.einsum("ibc,jbd->ijcd", p, p) / p.shape[1]
    marg = p.mean(1)
    prod = torch.einsum("ic,jd->ijcd", marg, marg)
    mi = (joint * (torch.log(joint + 1e-12) - torch.log(prod + 1e-12))).sum((-1, -2))
    iu = torch.triu_indices(p.shape[0], p.shape[0], 1)
    return mi[iu[0], iu[1]].mean()


def divdis_kl(labelled_probs: Tensor, ood_probs: Tensor) -> Tensor:
    """DivDis's optional regulariser: mean over members of KL(mean OOD prediction of the member ‖ mean
    labelled prediction of all members), the latter under stop-gradient (the reference's ``kl_backward``).

    Shape:
        labelled_probs (M, B, C), ood_probs (M, B_ood, C) -> () (0-d).
    """
    source = labelled_probs.float().mean((0, 1)).detach()
    target = ood_probs.float().mean(1)
    return (target * (torch.log(target + 1e-12) - torch.log(source + 1e-12))).sum(-1).mean()


def naive_divdis(logits: Tensor, target: Tensor, *, lam: float = 1.0, reg_weight: float = 0.0,
                 label_smoothing: float = 0.0) -> Tensor:
    """Naive DivDis: cross-entropy on the labelled samples + λ · :func:`divdis_mi` on the OOD batch
    (+ ``reg_weight`` · :func:`divdis_kl`). Layout as :func:`naive_a2d`: ``(M, B + B_ood, C)``.

    Shape:
        logits (M, B + B_ood, C); target (B,); returns a 0-d tensor.

    Example:
        >>> x = torch.zeros(2, 3, 2)
        >>> round(float(naive_divdis(x, torch.tensor([0]))), 4)  # log 2 + MI 0
        0.6931
    """
    labelled, ood = _split_unlabeled(logits, target)
    main = independent(labelled, target, label_smoothing=label_smoothing)
    if logits.shape[0] < 2:
        return main
    p_ood = ood.float().softmax(-1)
    out = main + lam * divdis_mi(p_ood) if lam else main
    if reg_weight:
        out = out + reg_weight * divdis_kl(labelled.float().softmax(-1), p_ood)
    return out


ENSEMBLE_LOSSES.update({"sed": sed, "naive_a2d": naive_a2d, "naive_divdis": naive_divdis})
#: ensemble losses whose logits carry an unlabeled OOD batch after the labelled one
UNLABELED_LOSSES = ("naive_a2d", "naive_divdis")
__all__ += ["sample_members", "a2d_pairs", "sed_weights", "sed", "naive_a2d", "divdis_mi", "divdis_kl",
            "naive_divdis", "PAIRINGS", "UNLABELED_LOSSES"]
