"""Ensembles as one module: M members (or M heads over one backbone) returning ``(M, B, C)`` logits.

:class:`MemberStack` holds separately parameterised members (a deep ensemble, or the members of a
jointly trained ensemble); :class:`HeadStack` holds M classifier heads over a shared feature input
(SED's heads over a frozen backbone, training-methods' linear probes); :class:`BackboneWithHeads`
puts a frozen backbone in front of a :class:`HeadStack` so that predictions, features and attributions
work on it like on any model. Each member keeps its own parameters (no stacked parameter tensor), so
a member that receives no gradient in a step is not moved by the optimiser.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from ensdiv.errors import InvalidInputError

__all__ = ["MemberStack", "HeadStack", "BackboneWithHeads", "penultimate"]

LogitsLoss = Callable[[Tensor, Tensor], Tensor]


def penultimate(model: nn.Module, x: Tensor) -> Tensor:
    """The input of ``model``'s classifier: timm's ``forward_head(forward_features(x), pre_logits=True)``."""
    if not (hasattr(model, "forward_features") and hasattr(model, "forward_head")):
        raise InvalidInputError(
            f"A {type(model).__name__} has no forward_features / forward_head pair to take features from."
        )
    return model.forward_head(model.forward_features(x), pre_logits=True)


class MemberStack(nn.Module):
    """M members applied to the same input.

    Args:
        members: the member modules, each mapping (B, ...) to (B, C) logits.
        loss_fn: optional ``loss_fn(logits (M, B, C), target) -> loss`` used by :meth:`training_loss`
            (a jointly trained ensemble); without it the members are trained on the mean member
            cross-entropy by the engine's default.

    Shape:
        ``(B, ...) -> (M, B, C)``.
    """

    def __init__(self, members: Sequence[nn.Module], *, loss_fn: LogitsLoss | None = None) -> None:
        super().__init__()
        if len(members) == 0:
            raise InvalidInputError("A MemberStack needs at least one member.")
        self.members = nn.ModuleList(members)
        self.num_estimators = len(members)
        self.loss_fn = loss_fn

    def forward(self, x: Tensor) -> Tensor:
        return torch.stack([m(x) for m in self.members])

    def member_features(self, x: Tensor) -> Tensor:
        """Each member's penultimate features ``(M, B, D)`` (members must share D)."""
        return torch.stack([penultimate(m, x) for m in self.members])

    def training_loss(self, x: Tensor, y: Tensor) -> Tensor:
        logits = self(x)
        if self.loss_fn is not None:
            return self.loss_fn(logits, y)
        m = logits.shape[0]
        flat_y = y.repeat(m) if y.dim() == 1 else y.repeat(m, 1)
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), flat_y)


class HeadStack(MemberStack):
    """M linear heads over shared features ``(B, D)`` (or ``(B, D, 1, 1)``, as cached feature sets are
    stored image-shaped).

    Shape:
        ``(B, D) -> (M, B, C)``.
    """

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x.flatten(1))

    def member_features(self, x: Tensor) -> Tensor:
        f = x.flatten(1)
        return f.expand(self.num_estimators, *f.shape)


class BackboneWithHeads(nn.Module):
    """A frozen backbone's penultimate features fed to a :class:`HeadStack`.

    Shape:
        ``(B, ...) -> (M, B, C)``; :meth:`member_features` gives ``(M, B, D)`` (the shared features).
    """

    def __init__(self, backbone: nn.Module, heads: HeadStack) -> None:
        super().__init__()
        self.backbone = backbone.requires_grad_(False)
        self.heads = heads
        self.num_estimators = heads.num_estimators

    def forward(self, x: Tensor) -> Tensor:
        return self.heads(penultimate(self.backbone, x))

    def member_features(self, x: Tensor) -> Tensor:
        return self.heads.member_features(penultimate(self.backbone, x))
