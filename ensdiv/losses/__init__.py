"""Training losses of the five papers, as functions on member logits ``(M, B, C)`` with plain arguments.

Every loss here takes logits (never a model) and returns a 0-d tensor, so it can be tested against a
naive loop and reused by any training set-up. A jointly trained ensemble (:class:`ensdiv.train.Joint`)
or a set of heads (:class:`ensdiv.train.Heads`) names its loss by a key of :data:`ENSEMBLE_LOSSES`;
each of those is called as ``loss(logits, target, lam=λ, **options)``. A jointly trained ensemble may
also name a loss of :data:`INPUT_LOSSES`, which needs the inputs as well (design-diversity's Eq. 8
attribution penalty), called as ``loss(members, x, target, lam=λ, **options)``.

* :func:`independent` — the mean of the members' cross-entropies (a deep ensemble trained in one step).
* :func:`distillation` — Hinton et al.'s soft (tempered KL) or DeiT's hard (teacher argmax) distillation.
* :func:`nt_xent` — SimCLR's contrastive loss between two views' embeddings.
* :func:`attribution_variance` — design-diversity's attribution diversity A (Eq. 8), differentiable:
  the training loss is ``(1/M) Σ CE − λ A``.

The later chapters add theirs (GNCL family, balanced, attribution penalty, A2D, DivDis, SED).

Modules: :mod:`~ensdiv.losses.core` (cross-entropy, independent members, distillation, NT-Xent, the
attribution variance of design-diversity's Eq. 8, and SED's A2D / DivDis / SED) and
:mod:`~ensdiv.losses.ncl` (design-diversity's negative-correlation family: GNCL with four consensus
rules, masked GNCL, the balanced loss). Every ensemble loss of both is in :data:`ENSEMBLE_LOSSES`.
"""

from ensdiv.losses.core import (
    ENSEMBLE_LOSSES,
    PAIRINGS,
    UNLABELED_LOSSES,
    a2d_pairs,
    attribution_variance,
    cross_entropy,
    distillation,
    divdis_kl,
    divdis_mi,
    ensemble_loss,
    independent,
    naive_a2d,
    naive_divdis,
    nt_xent,
    sample_members,
    sed,
    sed_weights,
)
from ensdiv.losses.ncl import (
    CONSENSUS,
    INPUT_LOSSES,
    NCL_LOSSES,
    attribution_penalty,
    balanced,
    consensus_distribution,
    gncl,
    gncl_penalty,
)

ENSEMBLE_LOSSES.update(NCL_LOSSES)

__all__ = [
    "CONSENSUS",
    "ENSEMBLE_LOSSES",
    "INPUT_LOSSES",
    "NCL_LOSSES",
    "PAIRINGS",
    "UNLABELED_LOSSES",
    "a2d_pairs",
    "attribution_penalty",
    "attribution_variance",
    "balanced",
    "consensus_distribution",
    "cross_entropy",
    "distillation",
    "divdis_kl",
    "divdis_mi",
    "ensemble_loss",
    "gncl",
    "gncl_penalty",
    "independent",
    "naive_a2d",
    "naive_divdis",
    "nt_xent",
    "sample_members",
    "sed",
    "sed_weights",
]
