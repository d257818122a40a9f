"""Ensembles as one module: M members (or M heads over one backbone) returning ``(M, B, C)`` logits.

:class:`MemberStack` holds separately parameterised members (a deep ensemble, or the members of a
jointly trained ensemble); :class:`HeadStack` holds M classifier heads over a shared feature input
(SED's heads over a frozen backbone, training-methods' linear probes); :class:`BackboneWithHeads`
puts a frozen backbone in front of a :class:`HeadStack` so that predictions, features and attributions
work on it like on any model. Each member keeps its own parameters (no stacked parameter tensor), so
a member that receives no gradient in a step is not moved by the optimiser.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from ensdiv.errors import InvalidInputError

__all__ = ["MemberStack", "HeadStack", "BackboneWithHeads", "penultimate", "TokenMLPHead", "vit_block_head",
           "cut_features", "draw_subset"]

LogitsLoss = Callable[[Tensor, Tensor], Tensor]
_CUTS = ("head", "block")


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


def draw_subset(num_members: int, size: int) -> Tensor:
    """``size`` distinct members of ``num_members`` drawn from torch's global generator, sorted (all of
    them when ``size`` is 0 or >= ``num_members``); the same draw as ``ensdiv.losses.sample_members``."""
    if size <= 0 or size >= num_members:
        return torch.arange(num_members)
    return torch.randperm(num_members)[:size].sort().values


class TokenMLPHead(nn.Module):
    """The last two layers of a ViT applied to its class token: the last block's MLP branch (norm, MLP,
    layer scale, residual), the final norm, the pre-logits norm and the classifier (SED's "last two layers").

    Shape:
        ``(B, D) -> (B, C)``.
    """

    def __init__(self, norm2: nn.Module, mlp: nn.Module, ls2: nn.Module, norm: nn.Module, fc_norm: nn.Module,
                 head: nn.Linear) -> None:
        super().__init__()
        self.norm2, self.mlp, self.ls2, self.norm, self.fc_norm, self.head = norm2, mlp, ls2, norm, fc_norm, head
        self.in_features = head.in_features

    def forward(self, t: Tensor) -> Tensor:
        t = t + self.ls2(self.mlp(self.norm2(t)))
        return self.head(self.fc_norm(self.norm(t)))


def _check_vit(model: nn.Module) -> None:
    ok = all(hasattr(model, a) for a in ("blocks", "patch_embed", "_pos_embed", "norm", "fc_norm", "head"))
    if not ok or getattr(model, "global_pool", None) != "token" or hasattr(model, "head_dist"):
        raise InvalidInputError(
            f"The 'block' cut needs a timm VisionTransformer pooling its class token (no distillation token), "
            f"got a {type(model).__name__}; use cut='head'."
        )


def vit_block_head(model: nn.Module) -> TokenMLPHead:
    """A copy of ``model``'s last two layers (its last block's MLP branch, final norms and classifier) as a
    :class:`TokenMLPHead` with the model's own weights."""
    _check_vit(model)
    blk = model.blocks[-1]
    parts = (blk.norm2, blk.mlp, blk.ls2, model.norm, model.fc_norm, model.head)
    return TokenMLPHead(*(copy.deepcopy(p) for p in parts))


def cut_features(model: nn.Module, x: Tensor, cut: str = "head") -> Tensor:
    """The frozen part's output at a cut point: ``head`` — the penultimate features (:func:`penultimate`);
    ``block`` — a ViT's class token after the last block's attention branch (input of :class:`TokenMLPHead`).

    Shape:
        ``(B, ...) -> (B, D)``.
    """
    if cut == "head":
        return penultimate(model, x)
    if cut != "block":
        raise InvalidInputError(f"Unknown cut point {cut!r}; valid: 'head', 'block'.")
    _check_vit(model)
    x = model.norm_pre(model.patch_drop(model._pos_embed(model.patch_embed(x))))
    for blk in model.blocks[:-1]:
        x = blk(x)
    blk = model.blocks[-1]
    x = x + blk.drop_path1(blk.ls1(blk.attn(blk.norm1(x))))
    return x[:, 0]


class HeadStack(MemberStack):
    """M heads (linear classifiers, or :class:`TokenMLPHead`) over shared features ``(B, D)`` (or
    ``(B, D, 1, 1)``, as cached feature sets are stored image-shaped).

    Args:
        members: the heads.
        loss_fn: ``loss_fn(logits (K, B', C), target)`` of :meth:`training_loss`.
        subset: members trained per batch (SED's I, drawn by :func:`draw_subset` before the forward pass so
            the others take no part in the graph and get no gradient at all); 0 = every member.
        paired_ood: training inputs are ``(B, 2D)``: each labelled sample's features followed by those of
            an unlabeled OOD sample; :meth:`training_loss` then feeds ``(K, 2B, C)`` logits (labelled first)
            to ``loss_fn``. ``forward`` uses the first D features.
        cut: the backbone cut point these heads take features from (read by :class:`BackboneWithHeads`).

    Shape:
        ``(B, D) -> (M, B, C)``.
    """

    def __init__(self, members: Sequence[nn.Module], *, loss_fn: LogitsLoss | None = None, subset: int = 0,
                 paired_ood: bool = False, cut: str = "head") -> None:
        super().__init__(members, loss_fn=loss_fn)
        self.cut = cut
        self.subset = subset
        self.paired_ood = paired_ood
        self.in_features = int(getattr(members[0], "in_features", 0))

    def _flat(self, x: Tensor) -> Tensor:
        f = x.flatten(1)
        d = self.in_features
        return f[:, :d] if self.paired_ood and d and f.shape[1] == 2 * d else f

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(self._flat(x))

    def member_features(self, x: Tensor) -> Tensor:
        f = self._flat(x)
        return f.expand(self.num_estimators, *f.shape)

    def training_loss(self, x: Tensor, y: Tensor) -> Tensor:
        f = x.flatten(1)
        if self.paired_ood:
            d = self.in_features
            f = torch.cat([f[:, :d], f[:, d:]])
        idx = draw_subset(self.num_estimators, self.subset).tolist()
        logits = torch.stack([self.members[i](f) for i in idx])
        if self.loss_fn is not None:
            return self.loss_fn(logits, y)
        flat_y = y.repeat(len(idx)) if y.dim() == 1 else y.repeat(len(idx), 1)
        return nn.functional.cross_entropy(logits[:, : y.shape[0]].reshape(-1, logits.shape[-1]).float(), flat_y)


class BackboneWithHeads(nn.Module):
    """A frozen backbone cut at ``cut`` (:func:`cut_features`) feeding a :class:`HeadStack`.

    The cut point is saved in the state dict (buffer ``cut_code``); loading a ``block`` state dict into a
    model built with linear heads rebuilds the heads as copies of the backbone's last two layers first,
    so a cached model loads into the generic empty model.

    Shape:
        ``(B, ...) -> (M, B, C)``; :meth:`member_features` gives ``(M, B, D)`` (the shared features at the cut).
    """

    def __init__(self, backbone: nn.Module, heads: HeadStack, *, cut: str | None = None) -> None:
        super().__init__()
        self.backbone = backbone.requires_grad_(False)
        self.heads = heads
        self.num_estimators = heads.num_estimators
        self.register_buffer("cut_code", torch.tensor(_CUTS.index(cut or getattr(heads, "cut", "head"))))

    def features(self, x: Tensor) -> Tensor:
        return cut_features(self.backbone, x, self.cut)

    def forward(self, x: Tensor) -> Tensor:
        return self.heads(self.features(x))

    def member_features(self, x: Tensor) -> Tensor:
        return self.heads.member_features(self.features(x))

    @property
    def cut(self) -> str:
        return _CUTS[int(self.cut_code)]

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        code = state_dict.get(prefix + "cut_code")
        if code is not None and _CUTS[int(code)] == "block" and not isinstance(self.heads.members[0], TokenMLPHead):
            old = self.heads
            self.heads = HeadStack([vit_block_head(self.backbone) for _ in range(old.num_estimators)],
                                   loss_fn=old.loss_fn, subset=old.subset, paired_ood=old.paired_ood, cut="block")
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
