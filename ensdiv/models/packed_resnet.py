"""Packed-Ensembles ResNets: CIFAR-style ResNet-18/50 and a small CPU-scale variant for 28×28×1.

One class, :class:`PackedResNet`, covers every member of the comparison: PE-(α, M, γ) with
``num_estimators=M``; the single model is PE-(1, 1, 1) (every grouped conv has one group, i.e. an
ordinary ResNet); a Deep-Ensemble member is a single model trained with another seed.

Layout follows the reference implementation of the paper (torch-uncertainty): the stem is the
``first`` layer (a full convolution of the shared input, Figure 3c), the classifier is the ``last``
layer (M heads), and the first convolution of every residual block uses no subgroups (γ = 1) while
the others use γ — with this layout the parameter counts of Table 1 are reproduced exactly
(``tests/test_packed.py``).

In eval *and* train mode the forward returns member logits ``(M, B, C)`` — or ``(B, C)`` when
M = 1, so the single model is an ordinary classifier; :meth:`training_loss` is the mean over members
of each member's cross-entropy (every member sees the whole batch).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ensdiv.errors import EnsdivError, unknown_name
from ensdiv.models.layers.packed import PackedConv2d, PackedLinear, to_members
from ensdiv.models.registry import register_model

__all__ = ["PackedResNet", "packed_resnet", "SMALL_WIDTHS", "pack_members", "RepeatChannels"]

SMALL_WIDTHS = (16, 32, 64)


class _BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int, *, alpha: float, m: int, gamma: int,
                 min_cpg: int) -> None:
        super().__init__()
        pk = {"alpha": alpha, "num_estimators": m, "bias": False, "min_channels_per_group": min_cpg}
        a = alpha
        self.conv1 = PackedConv2d(in_planes, planes, 3, stride=stride, padding=1, gamma=1, **pk)
        self.bn1 = nn.BatchNorm2d(int(a * planes))
        self.conv2 = PackedConv2d(planes, planes, 3, padding=1, gamma=gamma, **pk)
        self.bn2 = nn.BatchNorm2d(int(a * planes))
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                PackedConv2d(in_planes, planes, 1, stride=stride, gamma=gamma, **pk),
                nn.BatchNorm2d(int(a * planes)),
            )

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class _Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_planes: int, planes: int, stride: int, *, alpha: float, m: int, gamma: int,
                 min_cpg: int) -> None:
        super().__init__()
        pk = {"alpha": alpha, "num_estimators": m, "bias": False, "min_channels_per_group": min_cpg}
        a, out_planes = alpha, planes * self.expansion
        self.conv1 = PackedConv2d(in_planes, planes, 1, gamma=1, **pk)
        self.bn1 = nn.BatchNorm2d(int(a * planes))
        self.conv2 = PackedConv2d(planes, planes, 3, stride=stride, padding=1, gamma=gamma, **pk)
        self.bn2 = nn.BatchNorm2d(int(a * planes))
        self.conv3 = PackedConv2d(planes, out_planes, 1, gamma=gamma, **pk)
        self.bn3 = nn.BatchNorm2d(int(a * out_planes))
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != out_planes:
            self.shortcut = nn.Sequential(
                PackedConv2d(in_planes, out_planes, 1, stride=stride, gamma=gamma, **pk),
                nn.BatchNorm2d(int(a * out_planes)),
            )

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.shortcut(x))


class PackedResNet(nn.Module):
    """A ResNet packed as PE-(α, M, γ) (Eq. 5 of packed-ensembles).

    Args:
        block: ``"basic"`` (ResNet-18/34) or ``"bottleneck"`` (ResNet-50).
        layers: residual blocks per stage, e.g. ``(2, 2, 2, 2)`` for ResNet-18.
        widths: planes per stage of the *single* model, e.g. ``(64, 128, 256, 512)``.
        num_classes: classes per head.
        in_chans: image channels.
        alpha: width factor α. num_estimators: M. gamma: subgroups γ.
        stem_width: channels of the stem (default ``widths[0]``).
        stem: ``"cifar"`` — 3×3 stride-1 conv, no max-pool (the paper's CIFAR ResNets);
            ``"imagenet"`` — 7×7 stride-2 conv + 3×3 max-pool.
        min_channels_per_group: γ is lowered in layers whose groups would get fewer input channels
            (64 in the reference implementation; see :func:`ensdiv.models.layers.packed.packed_channels`).
        drop_rate: dropout before the classifier.
        member_loss: ``"mean"`` (the reference implementation: cross-entropy averaged over members,
            so each member's gradient is 1/M of what it would get trained alone) or ``"sum"``
            (each member gets the gradient of its own loss, as a Deep-Ensemble member would).

    Shape:
        ``(B, in_chans, H, W) -> (M, B, num_classes)`` logits (``(B, num_classes)`` when M = 1).
    """

    def __init__(
        self,
        block: str,
        layers: Sequence[int],
        widths: Sequence[int],
        *,
        num_classes: int = 10,
        in_chans: int = 3,
        alpha: float = 2,
        num_estimators: int = 4,
        gamma: int = 2,
        stem_width: int | None = None,
        stem: str = "cifar",
        min_channels_per_group: int = 0,
        drop_rate: float = 0.0,
        member_loss: str = "mean",
    ) -> None:
        super().__init__()
        if member_loss not in ("mean", "sum"):
            raise EnsdivError(f"member_loss must be 'mean' or 'sum', got {member_loss!r}.")
        self.member_loss = member_loss
        cls = {"basic": _BasicBlock, "bottleneck": _Bottleneck}[block]
        self.num_estimators, self.alpha, self.gamma = num_estimators, alpha, gamma
        stem_width = stem_width or widths[0]
        pk = {"alpha": alpha, "num_estimators": num_estimators}
        if stem == "cifar":
            self.conv1 = PackedConv2d(in_chans, stem_width, 3, padding=1, first=True, bias=False, **pk)
            self.pool = nn.Identity()
        else:
            self.conv1 = PackedConv2d(in_chans, stem_width, 7, stride=2, padding=3, first=True, bias=False,
                                      **pk)
            self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.bn1 = nn.BatchNorm2d(int(alpha * stem_width))
        stages, in_planes = [], stem_width
        self.stage_channels: list[int] = []
        for i, (n, w) in enumerate(zip(layers, widths, strict=True)):
            blocks = []
            for b in range(n):
                stride = 2 if (i > 0 and b == 0) else 1
                blocks.append(cls(in_planes, w, stride, alpha=alpha, m=num_estimators, gamma=gamma,
                                  min_cpg=min_channels_per_group))
                in_planes = w * cls.expansion
            stages.append(nn.Sequential(*blocks))
            self.stage_channels.append(int(alpha * in_planes))
        self.stages = nn.Sequential(*stages)
        self.dropout = nn.Dropout(drop_rate)
        self.head = PackedLinear(in_planes, num_classes, last=True, **pk)
        self.features_dim = int(alpha * in_planes)

    def forward_features(self, x: Tensor) -> Tensor:
        """Pooled features ``(B, α·C_L)``, member-major."""
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        return F.adaptive_avg_pool2d(self.stages(x), 1).flatten(1)

    def forward(self, x: Tensor) -> Tensor:
        logits = self.head(self.dropout(self.forward_features(x)))
        return logits if self.num_estimators == 1 else to_members(logits, self.num_estimators)

    def member_features(self, x: Tensor) -> Tensor:
        """Each member's penultimate features, the input of its own head: ``(M, B, α·C_L/M)``.

        The pooled features are member-major (member m owns the m-th block of channels), as the
        ``last`` layer's groups read them.
        """
        f = self.forward_features(x)
        return f.view(f.shape[0], self.num_estimators, -1).transpose(0, 1)

    def training_loss(self, x: Tensor, y: Tensor) -> Tensor:
        """Mean over members of the cross-entropy of each member on the whole batch."""
        logits = self(x)
        if logits.dim() == 2:
            return F.cross_entropy(logits, y)
        m = logits.shape[0]
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.repeat(m))
        return loss * m if self.member_loss == "sum" else loss


# (block, blocks per stage, widths, min channels per group). The reference implementation keeps at
# least 64 input channels per group (γ only acts in the wide stages of a ResNet-18) — kept for the
# paper's ResNets so that Table 1's counts are reproduced. The small CPU model applies γ in every
# layer, as the formula of §3.2 does (with 8-32 channels the 64-rule would switch γ off).
_ARCHS = {
    "resnet18": ("basic", (2, 2, 2, 2), (64, 128, 256, 512), 64),
    "resnet34": ("basic", (3, 4, 6, 3), (64, 128, 256, 512), 64),
    "resnet50": ("bottleneck", (3, 4, 6, 3), (64, 128, 256, 512), 64),
    "small": ("basic", (1, 1, 1), SMALL_WIDTHS, 0),
    "test": ("basic", (1, 1), (8, 16), 0),
}


def packed_resnet(
    arch: str,
    *,
    num_classes: int = 10,
    in_chans: int = 3,
    img_size: int = 32,
    alpha: float = 2,
    num_estimators: int = 4,
    gamma: int = 2,
    widths: Sequence[int] | None = None,
    min_channels_per_group: int | None = None,
    drop_rate: float = 0.0,
    member_loss: str = "mean",
) -> PackedResNet:
    """Build a packed ResNet by name (``resnet18``, ``resnet34``, ``resnet50``, ``small``, ``test``).

    The CIFAR stem is used for images up to 64 px (CIFAR, Fashion-MNIST), the ImageNet stem above.
    ``alpha=1, num_estimators=1, gamma=1`` is the ordinary single model.
    """
    if arch not in _ARCHS:
        raise unknown_name("packed ResNet architecture", arch, _ARCHS)
    block, layers, default_widths, min_cpg = _ARCHS[arch]
    widths = tuple(widths or default_widths)
    if min_channels_per_group is None:  # scale the reference's 64 with the width of the network
        min_channels_per_group = min_cpg * widths[0] // default_widths[0]
    return PackedResNet(
        block, layers, widths, num_classes=num_classes, in_chans=in_chans,
        alpha=alpha, num_estimators=num_estimators, gamma=gamma,
        stem="cifar" if img_size <= 64 else "imagenet",
        min_channels_per_group=min_channels_per_group,
        drop_rate=drop_rate, member_loss=member_loss,
    )


def _register(name: str, arch: str, alpha: float, m: int, gamma: int, what: str) -> None:
    def factory(num_classes: int, in_chans: int, img_size: int, **kw) -> PackedResNet:
        opts = {"alpha": alpha, "num_estimators": m, "gamma": gamma, **kw}
        return packed_resnet(arch, num_classes=num_classes, in_chans=in_chans, img_size=img_size, **opts)

    register_model(name, family="Packed-Ensembles", description=what)(factory)


_register("packed_resnet18", "resnet18", 2, 4, 2, "PE-(2,4,2) CIFAR-style ResNet-18 (Table 1)")
_register("packed_resnet50", "resnet50", 2, 4, 2, "PE-(2,4,2) CIFAR-style ResNet-50 (Table 1)")
_register("packed_small", "small", 2, 4, 2, "PE-(2,4,2) small 3-stage ResNet for 28x28x1 (cpu scale)")
_register("test_packed", "test", 2, 4, 2, "tiny PE-(2,4,2) ResNet for smoke runs")
_register("single_resnet18", "resnet18", 1, 1, 1, "single CIFAR-style ResNet-18 (PE-(1,1,1))")
_register("single_resnet50", "resnet50", 1, 1, 1, "single CIFAR-style ResNet-50 (PE-(1,1,1))")
_register("single_small", "small", 1, 1, 1, "single small 3-stage ResNet for 28x28x1 (PE-(1,1,1))")
_register("test_single", "test", 1, 1, 1, "tiny single ResNet for smoke runs (PE-(1,1,1))")


class RepeatChannels(nn.Module):
    """The "rearrange" of Figure 3b: give every subnetwork its own copy of the input, channel-stacked.

    Shape: ``(B, C, H, W) -> (B, M·C, H, W)``.
    """

    def __init__(self, num_estimators: int) -> None:
        super().__init__()
        self.num_estimators = num_estimators

    def forward(self, x: Tensor) -> Tensor:
        return x.repeat(1, self.num_estimators, *([1] * (x.dim() - 2)))


@torch.no_grad()
def pack_members(members: list[nn.Sequential], *, full_first_conv: bool = True) -> nn.Sequential:
    """Pack M identical-architecture sequential networks into one network (Figure 3b / 3c).

    Each member is an :class:`~torch.nn.Sequential` of ``Conv2d``, ``Linear``, ``Flatten`` and
    parameter-free modules (activations, pooling). The packed network is PE-(α=M, M, γ=1): layer j
    is a convolution with M groups whose weight is the concatenation of the members' weights, so
    its output for member m is exactly member m's output.

    Args:
        members: the M networks of form (a), all with the same layer shapes.
        full_first_conv: True — form (c): the first layer is one full convolution of the shared
            input; False — form (b): the input is repeated M times ("rearrange") and the first layer
            is a grouped convolution.

    Returns:
        A network whose output is ``(M, B, C)`` logits.
    """
    m = len(members)
    if m < 1:
        raise EnsdivError("pack_members needs at least one member network.")
    layers: list[nn.Module] = [] if full_first_conv else [RepeatChannels(m)]
    n_param = sum(isinstance(mod, nn.Conv2d | nn.Linear) for mod in members[0])
    seen = 0
    for idx, mod in enumerate(members[0]):
        group = [mem[idx] for mem in members]
        if isinstance(mod, nn.Conv2d | nn.Linear):
            first, last = seen == 0 and full_first_conv, seen == n_param - 1
            seen += 1
            kw = {"alpha": m, "num_estimators": m, "first": first, "last": last, "bias": mod.bias is not None}
            if isinstance(mod, nn.Conv2d):
                new: nn.Module = PackedConv2d(
                    mod.in_channels, mod.out_channels, mod.kernel_size, stride=mod.stride[0],
                    padding=mod.padding[0], **kw,
                )
                new.weight.copy_(torch.cat([g.weight for g in group]))
            else:
                new = PackedLinear(mod.in_features, mod.out_features, **kw)
                new.weight.copy_(torch.cat([g.weight for g in group]))
            if mod.bias is not None:
                new.bias.copy_(torch.cat([g.bias for g in group]))
            layers.append(new)
        else:
            layers.append(mod)
    layers.append(_ToMembers(m))
    return nn.Sequential(*layers)


class _ToMembers(nn.Module):
    def __init__(self, num_estimators: int) -> None:
        super().__init__()
        self.num_estimators = num_estimators

    def forward(self, x: Tensor) -> Tensor:
        return to_members(x, self.num_estimators)
