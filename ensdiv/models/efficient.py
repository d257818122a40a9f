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
  In training, member m gets its own shuffle of the batch, of which a fraction ``rho`` is shared
  by every member (torch-uncertainty's convention: ρ = 1, Table 1's setting, gives every member the
  same images — the members still differ, as they share the trunk and keep separate heads); the
  batch can be repeated ``batch_repeat`` times first. At test time the image is given to every member.
* **Masksembles** (Durasov et al., 2021): M fixed binary channel masks on the input of every
  convolution after the stem and of the classifier, as in torch-uncertainty's implementation; in
  training the batch is repeated M times (member m sees every image through mask m). The original
  paper's split-batch training (chunk m of the batch through mask m) is kept as
  ``train_mode="split"``.

BatchEnsemble's fast weights start as random signs ±1 (``fast_weight_init="random_sign"``, the
default, which the book's cpu and smoke models were trained with) or, as torch-uncertainty's
``BatchConv2d`` / ``BatchLinear`` do, from a normal distribution of mean 1 and standard deviation 0.5
(``fast_weight_init="normal"``, the paper-scale setting). BatchEnsemble's paper (Wen et al., 2020,
§3) initialises them with random signs, so neither is wrong; the reference is what Table 1 measured.

Randomness. The fast weights of BatchEnsemble and the masks of Masksembles are drawn at
construction from ``seed``, which defaults to a draw from torch's global generator — seeded by the
training engine from the recipe's initialisation seed, so every seed of a run gets its own draw. MIMO's
training shuffles use torch's global generator too, which the engine re-seeds at every epoch from the
data-order seed, so a resumed run shuffles exactly as an uninterrupted one.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ensdiv.errors import EnsdivError, unknown_name
from ensdiv.models.layers.packed import PackedLinear, to_members
from ensdiv.models.packed_resnet import PackedResNet, packed_resnet
from ensdiv.models.registry import register_model

__all__ = [
    "FAST_WEIGHT_INITS",
    "BatchEnsembleConv2d",
    "BatchEnsembleLinear",
    "BatchEnsembleResNet",
    "MIMOResNet",
    "MasksemblesResNet",
    "masksembles_masks",
    "member_index",
    "mimo_permutations",
]


def member_index(n: int, num_estimators: int, device: torch.device | None = None) -> Tensor:
    """Member of each row of a member-major batch of ``n`` rows: contiguous chunks ``[0..0, 1..1, ...]``."""
    return torch.arange(n, device=device) * num_estimators // n


def _per_member(x: Tensor, table: Tensor) -> Tensor:
    """Row ``m`` of ``table`` (M, C) for member ``m``'s rows of the member-major batch ``x``, shaped to
    broadcast over ``x`` (``(N, C, 1, 1)`` for images, ``(N, C)`` for features)."""
    n = x.shape[0]
    return table[member_index(n, table.shape[0], x.device)].view(n, -1, *([1] * (x.dim() - 2)))


FAST_WEIGHT_INITS = ("random_sign", "normal")


def _check_fast_weight_init(init: str) -> None:
    if init not in FAST_WEIGHT_INITS:
        raise unknown_name("BatchEnsemble fast_weight_init", init, FAST_WEIGHT_INITS)


def _fast_weight(m: int, c: int, generator: torch.Generator, init: str = "random_sign") -> nn.Parameter:
    """Rank-1 factors ``(m, c)``: random signs ±1 (BatchEnsemble, §3) or N(1, 0.5²) (torch-uncertainty)."""
    if init == "normal":
        return nn.Parameter(1.0 + 0.5 * torch.randn((m, c), generator=generator))
    return nn.Parameter(torch.randint(0, 2, (m, c), generator=generator).float() * 2 - 1)


class BatchEnsembleConv2d(nn.Module):
    """Shared convolution with per-member rank-1 input/output scalings (BatchEnsemble, Eq. 2).

    Args:
        conv: the shared convolution (its bias, if any, is replaced by per-member biases).
        num_estimators: M.
        seed: seed of the initialisation of ``r`` and ``s``.
        fast_weight_init: ``"random_sign"`` (±1) or ``"normal"`` (N(1, 0.5²), the reference's).

    Shape:
        ``(M·B, C_in, H, W) -> (M·B, C_out, H', W')``, member-major batch.
    """

    def __init__(self, conv: nn.Conv2d, num_estimators: int, *, seed: int = 0,
                 fast_weight_init: str = "random_sign") -> None:
        super().__init__()
        _check_fast_weight_init(fast_weight_init)
        g = torch.Generator().manual_seed(seed)
        self.conv = nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size, stride=conv.stride,
                              padding=conv.padding, dilation=conv.dilation, groups=conv.groups, bias=False)
        self.conv.weight = conv.weight
        self.num_estimators = num_estimators
        self.r = _fast_weight(num_estimators, conv.in_channels, g, fast_weight_init)
        self.s = _fast_weight(num_estimators, conv.out_channels, g, fast_weight_init)
        self.bias = nn.Parameter(torch.zeros(num_estimators, conv.out_channels))

    def forward(self, x: Tensor) -> Tensor:
        out = self.conv(x * _per_member(x, self.r))
        return out * _per_member(out, self.s) + _per_member(out, self.bias)


class BatchEnsembleLinear(nn.Module):
    """Shared dense layer with per-member rank-1 scalings (BatchEnsemble).

    Args: as :class:`BatchEnsembleConv2d`, with the dense layer's sizes.

    Shape: ``(M·B, in) -> (M·B, out)``, member-major batch.
    """

    def __init__(self, in_features: int, out_features: int, num_estimators: int, *, seed: int = 0,
                 fast_weight_init: str = "random_sign") -> None:
        super().__init__()
        _check_fast_weight_init(fast_weight_init)
        g = torch.Generator().manual_seed(seed)
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.num_estimators = num_estimators
        self.r = _fast_weight(num_estimators, in_features, g, fast_weight_init)
        self.s = _fast_weight(num_estimators, out_features, g, fast_weight_init)
        self.bias = nn.Parameter(torch.zeros(num_estimators, out_features))

    def forward(self, x: Tensor) -> Tensor:
        out = self.linear(x * _per_member(x, self.r))
        return out * _per_member(out, self.s) + _per_member(out, self.bias)


def _seed_or_draw(seed: int | None) -> int:
    """``seed``, or a seed drawn from torch's global generator (seeded from the run's init seed)."""
    return int(torch.randint(0, 2**31 - 1, ())) if seed is None else int(seed)


def _check_m(num_estimators: int) -> None:
    if isinstance(num_estimators, bool) or not isinstance(num_estimators, int) or num_estimators < 1:
        raise EnsdivError(f"num_estimators (M) must be an integer >= 1, got {num_estimators!r}.")


class _RepeatEnsemble(nn.Module):
    """Base: a backbone run on the batch repeated M times, member-major."""

    num_estimators: int
    backbone: PackedResNet
    _split_in_training = False

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
        num_estimators: M. seed: seed of the fast-weight initialisation (default: drawn from torch's
            global generator, i.e. from the run's initialisation seed).
        fast_weight_init: ``"random_sign"`` (±1, BatchEnsemble's paper; the default) or ``"normal"``
            (N(1, 0.5²), torch-uncertainty's, which Packed-Ensembles' Table 1 ran).
        **kw: ``num_classes``, ``in_chans``, ``img_size``, ``widths``, ``drop_rate``.

    Shape: ``(B, C, H, W) -> (M, B, num_classes)``.
    """

    _split_in_training = False

    def __init__(self, arch: str, *, num_estimators: int = 4, seed: int | None = None,
                 fast_weight_init: str = "random_sign", **kw) -> None:
        super().__init__()
        _check_m(num_estimators)
        _check_fast_weight_init(fast_weight_init)
        seed = _seed_or_draw(seed)
        self.num_estimators = num_estimators
        self.backbone = packed_resnet(arch, alpha=1, num_estimators=1, gamma=1, **kw)
        counter = iter(range(10_000))

        def convert(module: nn.Module) -> None:
            for name, child in module.named_children():
                if isinstance(child, nn.Conv2d):
                    new_conv = BatchEnsembleConv2d(child, num_estimators, seed=seed + next(counter),
                                                   fast_weight_init=fast_weight_init)
                    setattr(module, name, new_conv)
                elif isinstance(child, PackedLinear):
                    new = BatchEnsembleLinear(child.in_features, child.out_features, num_estimators,
                                              seed=seed + next(counter), fast_weight_init=fast_weight_init)
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


class _MaskedInput(nn.Module):
    """A layer whose input channels are multiplied by member m's mask on member m's rows."""

    def __init__(self, layer: nn.Module, masks: Tensor) -> None:
        super().__init__()
        self.layer = layer
        self.register_buffer("masks", masks)

    def forward(self, x: Tensor) -> Tensor:
        return self.layer(x * _per_member(x, self.masks))


class MasksemblesResNet(_RepeatEnsemble):
    """Masksembles of a ResNet (Durasov et al., 2021): fixed channel masks on the input of every
    convolution after the stem and of the classifier (torch-uncertainty's placement).

    Args:
        arch: ``resnet18``, ``resnet50``, ``small``, ``test``.
        num_estimators: M. scale: mask scale (see :func:`masksembles_masks`).
        seed: mask seed (default: drawn from torch's global generator, i.e. from the run's init seed).
        train_mode: ``"repeat"`` (the reference implementation: the batch is repeated M times, member m
            sees every image through its mask) or ``"split"`` (the original paper's training: the batch
            is split into M chunks, chunk m through mask m).
        **kw: ``num_classes``, ``in_chans``, ``img_size``, ``widths``, ``drop_rate``.

    Shape: ``(B, C, H, W) -> (M, B, num_classes)``; in training with ``train_mode="split"`` the output
    is ``(B, num_classes)``.
    """

    def __init__(self, arch: str, *, num_estimators: int = 4, scale: float = 2.0, seed: int | None = None,
                 train_mode: str = "repeat", **kw) -> None:
        super().__init__()
        _check_m(num_estimators)
        if train_mode not in ("repeat", "split"):
            raise EnsdivError(f"Masksembles train_mode must be 'repeat' or 'split', got {train_mode!r}.")
        seed = _seed_or_draw(seed)
        self.num_estimators, self.train_mode = num_estimators, train_mode
        self._split_in_training = train_mode == "split"
        self.backbone = packed_resnet(arch, alpha=1, num_estimators=1, gamma=1, **kw)
        counter = iter(range(10_000))
        stem = self.backbone.conv1

        def convert(module: nn.Module) -> None:
            for name, child in module.named_children():
                if isinstance(child, nn.Conv2d) and child is not stem:
                    masks = masksembles_masks(child.in_channels, num_estimators, scale=scale, seed=seed + next(counter))
                    setattr(module, name, _MaskedInput(child, masks))
                else:
                    convert(child)

        convert(self.backbone.stages)
        head = self.backbone.head
        masks = masksembles_masks(head.in_features, num_estimators, scale=scale, seed=seed + next(counter))
        self.backbone.head = _MaskedInput(head, masks)
        self.num_masked_layers = next(counter)


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


def mimo_permutations(batch: int, num_estimators: int, *, rho: float, batch_repeat: int = 1,
                      generator: torch.Generator | None = None) -> list[Tensor]:
    """MIMO's per-member input indices: the batch (repeated ``batch_repeat`` times) shuffled once, then
    the first ``(1 − ρ)`` of that shuffle re-shuffled per member, the last ``ρ`` shared by all.

    Draws from ``generator`` (default: torch's global generator, which the engine re-seeds per epoch).

    Returns:
        M index tensors of length ``batch_repeat · batch``.
    """
    idx = torch.arange(batch).repeat(batch_repeat)
    shared = idx[torch.randperm(len(idx), generator=generator)]
    n_ind = int(round(len(idx) * (1 - rho)))
    perms = []
    for _ in range(num_estimators):
        own = shared.clone()
        own[:n_ind] = shared[:n_ind][torch.randperm(n_ind, generator=generator)]
        perms.append(own)
    return perms


class MIMOResNet(nn.Module):
    """MIMO ResNet (Havasi et al., 2021): M inputs stacked on channels, M heads.

    Args:
        arch: ``resnet18``, ``resnet50``, ``small``, ``test``.
        num_estimators: M.
        rho: fraction of each training batch that every member sees in the same order (input
            repetition, torch-uncertainty's convention). Table 1's "MIMO (ρ = 1)" is the default: every
            member gets the same shuffled images; the members differ through their own heads and
            input filters. 0 = fully independent shuffles.
        batch_repeat: repeat the batch this many times before shuffling (the MIMO paper's batch
            repetition; 1 = off, as in Table 1).
        num_classes, in_chans, img_size, widths, drop_rate: as :func:`packed_resnet`.

    Shape: ``(B, C, H, W) -> (M, B, num_classes)``.
    """

    def __init__(self, arch: str, *, num_estimators: int = 4, rho: float = 1.0, batch_repeat: int = 1,
                 num_classes: int = 10, in_chans: int = 3, **kw) -> None:
        super().__init__()
        _check_m(num_estimators)
        if not 0.0 <= rho <= 1.0:
            raise EnsdivError(f"MIMO rho is a fraction of the batch and must be in [0, 1], got {rho!r}.")
        if isinstance(batch_repeat, bool) or not isinstance(batch_repeat, int) or batch_repeat < 1:
            raise EnsdivError(f"MIMO batch_repeat must be an integer >= 1, got {batch_repeat!r}.")
        self.num_estimators, self.rho, self.num_classes = num_estimators, rho, num_classes
        self.batch_repeat = batch_repeat
        self.backbone = packed_resnet(arch, alpha=1, num_estimators=1, gamma=1,
                                      num_classes=num_classes * num_estimators,
                                      in_chans=in_chans * num_estimators, **kw)
        self.backbone.conv1 = _MIMOStem(self.backbone.conv1, num_estimators)

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
        perms = [p.to(x.device) for p in mimo_permutations(x.shape[0], self.num_estimators, rho=self.rho,
                                                             batch_repeat=self.batch_repeat)]
        logits = self._run(torch.cat([x[p] for p in perms], dim=1))  # (M, R·B, K)
        targets = torch.stack([y[p] for p in perms])
        return F.cross_entropy(logits.reshape(-1, self.num_classes), targets.reshape(-1))


def _register(name: str, cls: type, arch: str, what: str) -> None:
    def factory(num_classes: int, in_chans: int, img_size: int, **kw) -> nn.Module:
        return cls(arch, num_classes=num_classes, in_chans=in_chans, img_size=img_size, **kw)

    # version 2: randomness from the run's seed; Masksembles on every convolution; MIMO ρ = 1
    register_model(name, family="Efficient ensembles", description=what)(factory)


_register("batchensemble_resnet18", BatchEnsembleResNet, "resnet18", "BatchEnsemble M=4, CIFAR-style ResNet-18")
_register("batchensemble_resnet50", BatchEnsembleResNet, "resnet50", "BatchEnsemble M=4, CIFAR-style ResNet-50")
_register("batchensemble_small", BatchEnsembleResNet, "small", "BatchEnsemble M=4, small 3-stage ResNet for 28x28x1")
_register("test_batchensemble", BatchEnsembleResNet, "test", "BatchEnsemble M=4, tiny ResNet for smoke runs")
_register("mimo_resnet18", MIMOResNet, "resnet18", "MIMO M=4 rho=1, CIFAR-style ResNet-18")
_register("mimo_resnet50", MIMOResNet, "resnet50", "MIMO M=4 rho=1, CIFAR-style ResNet-50")
_register("mimo_small", MIMOResNet, "small", "MIMO M=4 rho=1, small 3-stage ResNet for 28x28x1")
_register("test_mimo", MIMOResNet, "test", "MIMO M=4 rho=1, tiny ResNet for smoke runs")
_register("masksembles_resnet18", MasksemblesResNet, "resnet18", "Masksembles M=4 scale 2, CIFAR-style ResNet-18")
_register("masksembles_resnet50", MasksemblesResNet, "resnet50", "Masksembles M=4 scale 2, CIFAR-style ResNet-50")
_register("masksembles_small", MasksemblesResNet, "small", "Masksembles M=4 scale 2, small 3-stage ResNet for 28x28x1")
_register("test_masksembles", MasksemblesResNet, "test", "Masksembles M=4 scale 2, tiny ResNet for smoke runs")
