"""The efficient-ensemble baselines of Table 1 of packed-ensembles: BatchEnsemble, MIMO, Masksembles.

All three are built on the same ResNet as Packed-Ensembles (:class:`ensdiv.models.packed_resnet.PackedResNet`
with α = M = γ = 1, i.e. an ordinary ResNet), so the comparison changes only the ensembling
mechanism. Each model returns member logits ``(M, B, C)`` in eval mode and defines
``training_loss(x, y)`` for the shared training engine. The single model and Deep Ensembles need
no class: a single model is ``single_<arch>`` and a Deep Ensemble is M seeded recipes of it.

* **BatchEnsemble** (Wen et al., 2020): every conv/dense layer keeps one shared weight ``W`` and
  gives member m two rank-1 "fast weights" ``r_m`` (input) and ``s_m`` (output) and its own bias:
  ``y = ((x ∘ r_m) ⊛ W) ∘ s_m + b_m``. The batch is repeated M times (training and test), as in the
  reference implementations; batch-norm statistics are shared.
* **MIMO** (Havasi et al., 2021): one network with ``M·C_in`` input channels and ``M·K`` outputs.
  In training, member m gets its own shuffle of the batch (a fraction ``rho`` of the batch gets
  the same image in every member); at test time the image is given to every member.
* **Masksembles** (Durasov et al., 2021): M fixed binary channel masks, applied after every stage
  of the network; in training the batch is split into M contiguous chunks, chunk m using mask m;
  at test time the batch is repeated M times.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ensdiv.errors import EnsdivError
from ensdiv.models.layers.packed import PackedLinear, to_members
from ensdiv.models.packed_resnet import PackedResNet, packed_resnet
from ensdiv.models.registry import register_model

__all__ = [
    "BatchEnsembleConv2d",
    "BatchEnsembleLinear",
    "BatchEnsembleResNet",
    "MIMOResNet",
    "MasksemblesResNet",
    "masksembles_masks",
    "member_index",
]


def member_index(n: int, num_estimators: int, device: torch.device | None = None) -> Tensor:
    """Member of each row of a member-major batch of ``n`` rows: contiguous chunks ``[0..0, 1..1, ...]``."""
    return torch.arange(n, device=device) * num_estimators // n


def _per_member(x: Tensor, table: Tensor) -> Tensor:
    """Row ``m`` of ``table`` (M, C) for member ``m``'s rows of the member-major batch ``x``, shaped to
    broadcast over ``x`` (``(N, C, 1, 1)`` for images, ``(N, C)`` for features)."""
    n = x.shape[0]
    return table[member_index(n, table.shape[0], x.device)].view(n, -1, *([1] * (x.dim() - 2)))


def _fast_weight(m: int, c: int, generator: torch.Generator) -> nn.Parameter:
    # Random-sign initialisation of the rank-1 factors (BatchEnsemble, §3 / reference code).
    return nn.Parameter(torch.randint(0, 2, (m, c), generator=generator).float() * 2 - 1)


class BatchEnsembleConv2d(nn.Module):
    """Shared convolution with per-member rank-1 input/output scalings (BatchEnsemble, Eq. 2).

    Args:
        conv: the shared convolution (its bias, if any, is replaced by per-member biases).
        num_estimators: M.
        seed: seed of the random-sign initialisation of ``r`` and ``s``.

    Shape:
        ``(M·B, C_in, H, W) -> (M·B, C_out, H', W')``, member-major batch.
    """

    def __init__(self, conv: nn.Conv2d, num_estimators: int, *, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.conv = nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size, stride=conv.stride,
                              padding=conv.padding, dilation=conv.dilation, groups=conv.groups, bias=False)
        self.conv.weight = conv.weight
        self.num_estimators = num_estimators
        self.r = _fast_weight(num_estimators, conv.in_channels, g)
        self.s = _fast_weight(num_estimators, conv.out_channels, g)
        self.bias = nn.Parameter(torch.zeros(num_estimators, conv.out_channels))

    def forward(self, x: Tensor) -> Tensor:
        out = self.conv(x * _per_member(x, self.r))
        return out * _per_member(out, self.s) + _per_member(out, self.bias)


class BatchEnsembleLinear(nn.Module):
    """Shared dense layer with per-member rank-1 scalings (BatchEnsemble).

    Shape: ``(M·B, in) -> (M·B, out)``, member-major batch.
    """

    def __init__(self, in_features: int, out_features: int, num_estimators: int, *, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.num_estimators = num_estimators
        self.r = _fast_weight(num_estimators, in_features, g)
        self.s = _fast_weight(num_estimators, out_features, g)
        self.bias = nn.Parameter(torch.zeros(num_estimators, out_features))

    def forward(self, x: Tensor) -> Tensor:
        out = self.linear(x * _per_member(x, self.r))
        return out * _per_member(out, self.s) + _per_member(out, self.bias)


def _check_m(num_estimators: int) -> None:
    if isinstance(num_estimators, bool) or not isinstance(num_estimators, int) or num_estimators < 1:
        raise EnsdivError(f"num_estimators (M) must be an integer >= 1, got {num_estimators!r}.")


class _RepeatEnsemble(nn.Module):
    """Base: a backbone run on the batch repeated M times, member-major."""

    num_estimators: int
    backbone: PackedResNet

    def forward(self, x: Tensor) -> Tensor:
        b = x.shape[0]
        if self.training and self._split_in_training:
            return self.backbone.head(self.backbone.dropout(self.backbone.forward_features(x)))
        out = self.backbone.head(self.backbone.dropout(self.backbone.forward_features(x.repeat(
            self.num_estimators, *([1] * (x.dim() - 1))))))
        return out.view(self.num_estimators, b, -1)

    def member_features(self, x: Tensor) -> Tensor:
        """Each member's penultimate features (its pass over the repeated batch): ``(M, B, D)``."""
        rep = x.repeat(self.num_estimators, *([1] * (x.dim() - 1)))
        return self.backbone.forward_features(rep).view(self.num_estimators, x.shape[0], -1)

    def training_loss(self, x: Tensor, y: Tensor) -> Tensor:
        logits = self(x)
        if self._split_in_training:
            return F.cross_entropy(logits, y)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.repeat(self.num_estimators))


class BatchEnsembleResNet(_RepeatEnsemble):
    """BatchEnsemble of a ResNet (Wen et al., 2020): every conv/dense layer made rank-1 per member.

    Args:
        arch: ``resnet18``, ``resnet50``, ``small``, ``test`` (see :func:`packed_resnet`).
        num_estimators: M. seed: seed of the fast-weight initialisation.
        **kw: ``num_classes``, ``in_chans``, ``img_size``, ``widths``, ``drop_rate``.

    Shape: ``(B, C, H, W) -> (M, B, num_classes)``.
    """

    _split_in_training = False

    def __init__(self, arch: str, *, num_estimators: int = 4, seed: int = 0, **kw) -> None:
        super().__init__()
        _check_m(num_estimators)
        self.num_estimators = num_estimators
        self.backbone = packed_resnet(arch, alpha=1, num_estimators=1, gamma=1, **kw)
        counter = iter(range(10_000))

        def convert(module: nn.Module) -> None:
            for name, child in module.named_children():
                if isinstance(child, nn.Conv2d):
                    new_conv = BatchEnsembleConv2d(child, num_estimators, seed=seed + next(counter))
                    setattr(module, name, new_conv)
                elif isinstance(child, PackedLinear):
                    new = BatchEnsembleLinear(child.in_features, child.out_features, num_estimators,
                                              seed=seed + next(counter))
                    new.linear.weight = child.weight
                    setattr(module, name, new)
                else:
                    convert(child)

        convert(self.backbone)


def masksembles_masks(channels: int, num_estimators: int, *, scale: float = 2.0, seed: int = 0) -> Tensor:
    """M binary channel masks, each keeping ``round(channels / scale)`` channels (Masksembles).

    A simplification of the reference mask generator: each mask draws its kept channels uniformly
    at random (seeded); ``scale`` controls the overlap (1 = all masks keep every channel, larger =
    sparser and more diverse masks). Every channel is kept by at least one mask.

    Args:
        channels: feature channels C. num_estimators: M. scale: ≥ 1. seed: draw seed.

    Returns:
        ``(M, C)`` float tensor of 0/1.
    """
    if not scale >= 1:
        raise EnsdivError(f"Masksembles scale must be >= 1 (1 = no masking), got {scale!r}.")
    keep = max(1, round(channels / scale))
    g = torch.Generator().manual_seed(seed)
    masks = torch.zeros(num_estimators, channels)
    for m in range(num_estimators):
        masks[m, torch.randperm(channels, generator=g)[:keep]] = 1
    unused = (masks.sum(0) == 0).nonzero().flatten()
    for i, c in enumerate(unused.tolist()):
        masks[i % num_estimators, c] = 1
    return masks


class _ChannelMask(nn.Module):
    def __init__(self, masks: Tensor) -> None:
        super().__init__()
        self.register_buffer("masks", masks)

    def forward(self, x: Tensor) -> Tensor:
        return x * _per_member(x, self.masks)


class MasksemblesResNet(_RepeatEnsemble):
    """Masksembles of a ResNet (Durasov et al., 2021): fixed channel masks after every stage.

    Args:
        arch: ``resnet18``, ``resnet50``, ``small``, ``test``.
        num_estimators: M. scale: mask scale (see :func:`masksembles_masks`). seed: mask seed.
        **kw: ``num_classes``, ``in_chans``, ``img_size``, ``widths``, ``drop_rate``.

    Shape: ``(B, C, H, W) -> (M, B, num_classes)`` in eval mode; in training mode the batch is split
    into M chunks and the output is ``(B, num_classes)``.
    """

    _split_in_training = True

    def __init__(self, arch: str, *, num_estimators: int = 4, scale: float = 2.0, seed: int = 0,
                 **kw) -> None:
        super().__init__()
        _check_m(num_estimators)
        self.num_estimators = num_estimators
        self.backbone = packed_resnet(arch, alpha=1, num_estimators=1, gamma=1, **kw)
        pairs = zip(self.backbone.stages, self.backbone.stage_channels, strict=True)
        for i, (stage, channels) in enumerate(pairs):
            mask = masksembles_masks(channels, num_estimators, scale=scale, seed=seed + i)
            self.backbone.stages[i] = nn.Sequential(*stage, _ChannelMask(mask))


class _MIMOStem(nn.Conv2d):
    """MIMO's first convolution written as the sum of M member convolutions.

    ``conv(concat_m x_m, W) = Σ_m conv(x_m, W_m)``: each member's image goes through its own
    ``C_in → C_out`` convolution (one grouped convolution with groups = M) and the M results are
    summed. Same function and parameters as the full convolution on the channel-stacked input, but
    declared as a ``C_in → M·C_out`` convolution, so tools that read a model's input channels from
    its first convolution see the image's ``C_in``.

    Shape: ``(B, M·C_in, H, W) -> (B, C_out, H', W')``.
    """

    def __init__(self, conv: nn.Conv2d, num_estimators: int) -> None:
        m = num_estimators
        c_out, mc_in = conv.out_channels, conv.in_channels
        super().__init__(mc_in // m, m * c_out, conv.kernel_size, stride=conv.stride, padding=conv.padding,
                         bias=False)
        w = conv.weight.detach().view(c_out, m, mc_in // m, *conv.kernel_size).transpose(0, 1)
        with torch.no_grad():
            self.weight.copy_(w.reshape(m * c_out, mc_in // m, *conv.kernel_size))
        self.num_estimators, self.member_out = m, c_out

    def forward(self, x: Tensor) -> Tensor:
        y = F.conv2d(x, self.weight, stride=self.stride, padding=self.padding, groups=self.num_estimators)
        return y.view(y.shape[0], self.num_estimators, self.member_out, *y.shape[2:]).sum(1)


class MIMOResNet(nn.Module):
    """MIMO ResNet (Havasi et al., 2021): M inputs stacked on channels, M heads.

    Args:
        arch: ``resnet18``, ``resnet50``, ``small``, ``test``.
        num_estimators: M.
        rho: fraction of each training batch that every member sees in the same order (input
            repetition). 0 = fully independent members. Table 1 labels its MIMO "ρ = 1"; in the
            reference code's convention that would give every member the same inputs, which makes
            the members copies, so we default to 0.5 and expose the knob.
        num_classes, in_chans, img_size, widths, drop_rate: as :func:`packed_resnet`.

    Shape: ``(B, C, H, W) -> (M, B, num_classes)``.
    """

    def __init__(self, arch: str, *, num_estimators: int = 4, rho: float = 0.5, num_classes: int = 10,
                 in_chans: int = 3, seed: int = 0, **kw) -> None:
        super().__init__()
        _check_m(num_estimators)
        if not 0.0 <= rho <= 1.0:
            raise EnsdivError(f"MIMO rho is a fraction of the batch and must be in [0, 1], got {rho!r}.")
        self.num_estimators, self.rho, self.num_classes = num_estimators, rho, num_classes
        self.backbone = packed_resnet(arch, alpha=1, num_estimators=1, gamma=1,
                                      num_classes=num_classes * num_estimators,
                                      in_chans=in_chans * num_estimators, **kw)
        self.backbone.conv1 = _MIMOStem(self.backbone.conv1, num_estimators)
        self._gen = torch.Generator().manual_seed(seed)

    def _run(self, stacked: Tensor) -> Tensor:
        return to_members(self.backbone(stacked), self.num_estimators)

    def forward(self, x: Tensor) -> Tensor:
        return self._run(x.repeat(1, self.num_estimators, 1, 1))

    def member_features(self, x: Tensor) -> Tensor:
        """Penultimate features ``(M, B, D)``: MIMO's members share one trunk, so the M rows are the
        same features (each head reads all of them)."""
        f = self.backbone.forward_features(x.repeat(1, self.num_estimators, 1, 1))
        return f.unsqueeze(0).expand(self.num_estimators, -1, -1)

    def training_loss(self, x: Tensor, y: Tensor) -> Tensor:
        """Mean over members of the cross-entropy of member m on its own shuffle of the batch.

        The MIMO paper sums the members' losses; we average, like every other model of the chapter,
        so one learning rate serves them all (the sum is the mean times M).
        """
        b = x.shape[0]
        shared = torch.randperm(b, generator=self._gen)
        n_ind = int(round(b * (1 - self.rho)))
        perms = []
        for _ in range(self.num_estimators):
            own = shared.clone()
            own[:n_ind] = shared[:n_ind][torch.randperm(n_ind, generator=self._gen)]
            perms.append(own.to(x.device))
        logits = self._run(torch.cat([x[p] for p in perms], dim=1))  # (M, B, K)
        targets = torch.stack([y[p] for p in perms])
        return F.cross_entropy(logits.reshape(-1, self.num_classes), targets.reshape(-1))


def _register(name: str, cls: type, arch: str, what: str) -> None:
    def factory(num_classes: int, in_chans: int, img_size: int, **kw) -> nn.Module:
        return cls(arch, num_classes=num_classes, in_chans=in_chans, img_size=img_size, **kw)

    register_model(name, family="Efficient ensembles", description=what)(factory)


for _arch, _tag in (("resnet18", "CIFAR-style ResNet-18"), ("resnet50", "CIFAR-style ResNet-50"),
                    ("small", "small 3-stage ResNet for 28x28x1"), ("test", "tiny ResNet for smoke runs")):
    _prefix = "test_" if _arch == "test" else ""
    _suffix = "" if _arch == "test" else f"_{_arch}"
    _register(f"{_prefix}batchensemble{_suffix}", BatchEnsembleResNet, _arch, f"BatchEnsemble M=4, {_tag}")
    _register(f"{_prefix}mimo{_suffix}", MIMOResNet, _arch, f"MIMO M=4, {_tag}")
    _register(f"{_prefix}masksembles{_suffix}", MasksemblesResNet, _arch, f"Masksembles M=4 scale 2, {_tag}")
