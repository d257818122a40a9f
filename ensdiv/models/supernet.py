"""A small weight-sharing super-network (design-diversity Fig. 8): a ResNet with elastic depth and width.

NNCF's BootstrapNAS, which the paper used, is only in the deprecated nncf 2.x line, so this is a small
stand-in written for the book, following the conventions of Once-for-All / BootstrapNAS:

* **elastic depth** — each stage may skip its last block (a channel-preserving residual block, so the
  stage's output shape is unchanged); ``depth[s]`` is the number of skipped blocks of stage s (0 or 1,
  as the ``depth`` lists of the paper's Table ii);
* **elastic width** — each block's inner width (the output of its first convolution) is a multiplier of
  the full width, ``WIDTH_MULTIPLIERS = (1.0, 0.8, 0.6)`` as in the paper's Listing 1; ``width[b]`` is the
  index of block b's multiplier. :meth:`SuperResNet.reorganize_widths` orders the inner channels by
  importance (L1 norm of the second convolution's input filters, as OFA does) so a slice keeps the most
  important channels;
* **extraction** — :func:`extract_subnet` copies a configuration's sliced weights into an ordinary
  :class:`SubResNet` (plain Conv2d / BatchNorm2d / Linear), which then works with predictions,
  attributions and CKA like any model; :func:`recalibrate_bn` re-estimates its batch-norm statistics on
  training images (BootstrapNAS's ``batchnorm_adaptation``), since the super-network's running statistics
  were accumulated over many sub-networks.

Training by progressive shrinking (a trained full network, then random depths, then random depths and
widths) is :meth:`SuperResNet.training_loss` with :attr:`SuperResNet.elastic` set to ``"depth"`` or
``"depth+width"``: each batch samples one configuration from torch's global generator (re-seeded every
epoch by the training engine, so a run is deterministic).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ensdiv.errors import InvalidInputError
from ensdiv.models.registry import register_model

__all__ = ["WIDTH_MULTIPLIERS", "SubnetConfig", "SuperResNet", "SubResNet", "extract_subnet", "recalibrate_bn",
           "all_configs", "max_config", "sample_config", "subnet_params"]

WIDTH_MULTIPLIERS = (1.0, 0.8, 0.6)
ELASTIC = ("none", "depth", "depth+width")


@dataclass(frozen=True)
class SubnetConfig:
    """One sub-network: ``depth[s]`` blocks skipped at the end of stage s, ``width[b]`` the multiplier index
    of block b's inner width (every block of the super-network, a skipped one included, for a fixed length)."""

    depth: tuple[int, ...]
    width: tuple[int, ...]

    def to_dict(self) -> dict[str, list[int]]:
        return {"depth": list(self.depth), "width": list(self.width)}

    @property
    def label(self) -> str:
        return "d" + "".join(map(str, self.depth)) + "-w" + "".join(map(str, self.width))


def _inner(width: int, mult: float) -> int:
    return max(1, int(round(width * mult)))


class _Block(nn.Module):
    """A BasicBlock (3x3 conv, BN, ReLU, 3x3 conv, BN, + shortcut, ReLU) whose inner width can be sliced."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down: nn.Sequential | None = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    @staticmethod
    def _bn(bn: nn.BatchNorm2d, x: Tensor, k: int) -> Tensor:
        rm = bn.running_mean[:k] if bn.running_mean is not None else None
        rv = bn.running_var[:k] if bn.running_var is not None else None
        use_batch = bn.training or rm is None
        mom = 0.0
        if bn.training and bn.num_batches_tracked is not None:
            bn.num_batches_tracked.add_(1)
            mom = bn.momentum if bn.momentum is not None else 1.0 / float(bn.num_batches_tracked)
        return F.batch_norm(x, rm, rv, bn.weight[:k], bn.bias[:k], use_batch, mom, bn.eps)

    def forward(self, x: Tensor, k: int | None = None) -> Tensor:
        k = self.conv1.out_channels if k is None else k
        h = F.conv2d(x, self.conv1.weight[:k], None, self.conv1.stride, self.conv1.padding)
        h = F.relu(self._bn(self.bn1, h, k))
        h = F.conv2d(h, self.conv2.weight[:, :k], None, 1, 1)
        h = self.bn2(h)
        return F.relu(h + (self.down(x) if self.down is not None else x))


class SuperResNet(nn.Module):
    """The super-network: a 3x3 stem, stages of BasicBlocks, global pooling and a linear classifier.

    Args:
        num_classes, in_chans: classes and input channels.
        channels: output width of each stage.
        blocks: blocks per stage (a stage with >= 2 blocks has elastic depth).
        strides: stride of each stage's first block.

    ``forward`` runs :attr:`active` (default the full network); ``forward_features`` / ``forward_head``
    follow timm's convention.

    Shape:
        ``(B, in_chans, H, W) -> (B, num_classes)``.
    """

    def __init__(self, num_classes: int = 10, in_chans: int = 1, *, channels: Sequence[int] = (16, 32, 64),
                 blocks: Sequence[int] = (2, 2, 2), strides: Sequence[int] = (1, 2, 2), max_skip: int = 1,
                 imagenet_stem: bool = False) -> None:
        super().__init__()
        if not (len(channels) == len(blocks) == len(strides)) or min(blocks) < 1:
            raise InvalidInputError("SuperResNet needs one width, block count (>= 1) and stride per stage.")
        self.channels, self.blocks, self.strides = tuple(channels), tuple(blocks), tuple(strides)
        #: the most blocks elastic depth may skip at the end of a stage
        self.max_skip = int(max_skip)
        if imagenet_stem:  # 224 px: 7x7 conv at stride 2 and a 3x3 max-pool, as torchvision's ResNets
            self.stem = nn.Sequential(nn.Conv2d(in_chans, channels[0], 7, 2, 3, bias=False),
                                      nn.BatchNorm2d(channels[0]), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        else:  # 28 px: one 3x3 conv at stride 2
            self.stem = nn.Sequential(nn.Conv2d(in_chans, channels[0], 3, 2, 1, bias=False),
                                      nn.BatchNorm2d(channels[0]), nn.ReLU(inplace=True))
        stages, cin = [], channels[0]
        for cout, n, s in zip(channels, blocks, strides, strict=True):
            stages.append(nn.ModuleList([_Block(cin if i == 0 else cout, cout, s if i == 0 else 1) for i in range(n)]))
            cin = cout
        self.stages = nn.ModuleList(stages)
        self.num_features = channels[-1]
        self.fc = nn.Linear(channels[-1], num_classes)
        self.active: SubnetConfig = max_config(self)
        self.elastic = "none"

    # ---- configurations ------------------------------------------------------------------------------
    def check_config(self, cfg: SubnetConfig) -> None:
        bad = any(d < 0 or d > _skips(self, n) for d, n in zip(cfg.depth, self.blocks, strict=False))
        if len(cfg.depth) != len(self.blocks) or bad:
            raise InvalidInputError(f"depth {list(cfg.depth)} must skip 0..min(max_skip, blocks-1) blocks of each of "
                                    f"the {len(self.blocks)} stages {list(self.blocks)} (max_skip {self.max_skip}).")
        if len(cfg.width) != sum(self.blocks) or any(not 0 <= w < len(WIDTH_MULTIPLIERS) for w in cfg.width):
            raise InvalidInputError(f"width {list(cfg.width)} needs one index in 0..{len(WIDTH_MULTIPLIERS) - 1} per "
                                    f"block ({sum(self.blocks)} blocks).")

    def _plan(self, cfg: SubnetConfig) -> Iterator[tuple[_Block, int]]:
        """(block, inner width) of every active block, in order."""
        b = 0
        for stage, skip in zip(self.stages, cfg.depth, strict=True):
            for i, blk in enumerate(stage):
                if i < len(stage) - skip:
                    yield blk, _inner(blk.conv1.out_channels, WIDTH_MULTIPLIERS[cfg.width[b]])
                b += 1

    # ---- forward ----------------------------------------------------------------------------------------
    def forward_features(self, x: Tensor, cfg: SubnetConfig | None = None) -> Tensor:
        cfg = cfg or self.active
        h = self.stem(x)
        for blk, k in self._plan(cfg):
            h = blk(h, k)
        return h

    def forward_head(self, x: Tensor, pre_logits: bool = False) -> Tensor:
        x = x.mean((2, 3))
        return x if pre_logits else self.fc(x)

    def forward(self, x: Tensor, cfg: SubnetConfig | None = None) -> Tensor:
        return self.forward_head(self.forward_features(x, cfg))

    def get_classifier(self) -> nn.Module:
        return self.fc

    def training_loss(self, x: Tensor, y: Tensor) -> Tensor:
        """Cross-entropy of one configuration drawn for this batch by :func:`sample_config` (the full network
        when :attr:`elastic` is ``"none"``)."""
        cfg = max_config(self) if self.elastic == "none" else sample_config(self, self.elastic)
        out = self(x, cfg).float()
        if y.dim() == 2:
            return torch.sum(-y * F.log_softmax(out, -1), -1).mean()
        return F.cross_entropy(out, y)

    # ---- importance ordering ------------------------------------------------------------------------------
    @torch.no_grad()
    def reorganize_widths(self) -> None:
        """Sort every block's inner channels by importance, most important first (the L1 norm of the second
        convolution's input filters, as Once-for-All does), permuting conv1's filters, bn1 and conv2's
        inputs together: the full network computes the same function; slices keep the important channels."""
        for stage in self.stages:
            for blk in stage:
                order = blk.conv2.weight.abs().sum((0, 2, 3)).argsort(descending=True)
                blk.conv1.weight.copy_(blk.conv1.weight[order])
                for name in ("weight", "bias", "running_mean", "running_var"):
                    t = getattr(blk.bn1, name)
                    t.copy_(t[order])
                blk.conv2.weight.copy_(blk.conv2.weight[:, order])


def _skips(net: SuperResNet, n: int) -> int:
    return max(0, min(net.max_skip, n - 1))


def subnet_params(net: SuperResNet, cfg: SubnetConfig) -> int:
    """Parameter count of the extracted sub-network ``cfg`` (without extracting it)."""
    net.check_config(cfg)
    total = sum(p.numel() for p in net.stem.parameters()) + sum(p.numel() for p in net.fc.parameters())
    for blk, k in net._plan(cfg):
        cin, cout = blk.conv1.in_channels, blk.conv2.out_channels
        total += cin * k * 9 + 2 * k + k * cout * 9 + 2 * cout
        if blk.down is not None:
            total += sum(p.numel() for p in blk.down.parameters())
    return total


def max_config(net: SuperResNet) -> SubnetConfig:
    """The full network: nothing skipped, every width at multiplier 1."""
    return SubnetConfig(tuple(0 for _ in net.blocks), tuple(0 for _ in range(sum(net.blocks))))


def sample_config(net: SuperResNet, elastic: str = "depth+width", *, generator: torch.Generator | None = None
                  ) -> SubnetConfig:
    """A random configuration (uniform per stage and block) of the dimensions ``elastic`` makes elastic."""
    if elastic not in ELASTIC:
        raise InvalidInputError(f"elastic must be one of {', '.join(ELASTIC)}, got {elastic!r}.")
    full = max_config(net)
    depth, width = full.depth, full.width
    if "depth" in elastic:
        depth = tuple(int(torch.randint(0, _skips(net, n) + 1, (1,), generator=generator)) for n in net.blocks)
    if "width" in elastic:
        width = tuple(int(torch.randint(0, len(WIDTH_MULTIPLIERS), (1,), generator=generator)) for _ in width)
    return SubnetConfig(depth, width)


def all_configs(net: SuperResNet) -> list[SubnetConfig]:
    """Every distinct configuration (a skipped block's width fixed at index 0), in a fixed order."""
    out = []
    for depth in itertools.product(*(range(_skips(net, n) + 1) for n in net.blocks)):
        active = [i < n - d for n, d in zip(net.blocks, depth, strict=True) for i in range(n)]
        choices = [range(len(WIDTH_MULTIPLIERS)) if a else (0,) for a in active]
        out += [SubnetConfig(tuple(depth), tuple(w)) for w in itertools.product(*choices)]
    return out


class SubResNet(nn.Module):
    """An extracted sub-network: ordinary Conv2d / BatchNorm2d / Linear layers (no slicing left).

    Shape:
        ``(B, in_chans, H, W) -> (B, num_classes)``.
    """

    def __init__(self, stem: nn.Module, blocks: Sequence[nn.Module], fc: nn.Linear) -> None:
        super().__init__()
        self.stem = stem
        self.blocks = nn.Sequential(*blocks)
        self.fc = fc
        self.num_features = fc.in_features

    def forward_features(self, x: Tensor) -> Tensor:
        return self.blocks(self.stem(x))

    def forward_head(self, x: Tensor, pre_logits: bool = False) -> Tensor:
        x = x.mean((2, 3))
        return x if pre_logits else self.fc(x)

    def forward(self, x: Tensor) -> Tensor:
        return self.forward_head(self.forward_features(x))

    def get_classifier(self) -> nn.Module:
        return self.fc


def _slice_bn(bn: nn.BatchNorm2d, k: int) -> nn.BatchNorm2d:
    out = nn.BatchNorm2d(k, eps=bn.eps, momentum=bn.momentum)
    with torch.no_grad():
        for name in ("weight", "bias", "running_mean", "running_var"):
            getattr(out, name).copy_(getattr(bn, name)[:k])
        out.num_batches_tracked.copy_(bn.num_batches_tracked)
    return out


def _slice_block(blk: _Block, k: int) -> _Block:
    cin, cout = blk.conv1.in_channels, blk.conv2.out_channels
    new = _Block(cin, cout, blk.conv1.stride[0])
    new.conv1 = nn.Conv2d(cin, k, 3, blk.conv1.stride, 1, bias=False)
    new.conv2 = nn.Conv2d(k, cout, 3, 1, 1, bias=False)
    with torch.no_grad():
        new.conv1.weight.copy_(blk.conv1.weight[:k])
        new.conv2.weight.copy_(blk.conv2.weight[:, :k])
    new.bn1 = _slice_bn(blk.bn1, k)
    new.bn2 = _slice_bn(blk.bn2, cout)
    if blk.down is not None:
        new.down = nn.Sequential(nn.Conv2d(cin, cout, 1, blk.down[0].stride, bias=False), _slice_bn(blk.down[1], cout))
        with torch.no_grad():
            new.down[0].weight.copy_(blk.down[0].weight)
    return new


class _PlainBlock(nn.Module):
    """The extracted block: the same computation as :class:`_Block` at full (its own) width."""

    def __init__(self, blk: _Block) -> None:
        super().__init__()
        self.conv1, self.bn1, self.conv2, self.bn2, self.down = blk.conv1, blk.bn1, blk.conv2, blk.bn2, blk.down
        self.relu = nn.ReLU()

    def forward(self, x: Tensor) -> Tensor:
        h = self.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return self.relu(h + (self.down(x) if self.down is not None else x))


def extract_subnet(net: SuperResNet, cfg: SubnetConfig) -> SubResNet:
    """The sub-network ``cfg`` of ``net`` as an ordinary model with copies of its (sliced) weights and batch-norm
    statistics; in eval mode it computes exactly ``net(x, cfg)`` in eval mode."""
    net.check_config(cfg)
    stem = copy.deepcopy(net.stem)
    blocks = [_PlainBlock(_slice_block(blk, k)) for blk, k in net._plan(cfg)]
    fc = nn.Linear(net.fc.in_features, net.fc.out_features)
    fc.load_state_dict(net.fc.state_dict())
    sub = SubResNet(stem, blocks, fc)
    sub.ensdiv_config = cfg  # type: ignore[attr-defined]
    return sub.eval()


@torch.no_grad()
def recalibrate_bn(model: nn.Module, x: Tensor, *, batch_size: int = 250) -> nn.Module:
    """Re-estimate every BatchNorm's running mean and variance on the images ``x`` (BootstrapNAS's batch-norm
    adaptation): statistics reset, then a cumulative average (momentum ``None``) over the batches in train
    mode, without gradients. Only the running statistics (and ``num_batches_tracked``) change. Returns the
    model in eval mode.

    Shape:
        x (N, C, H, W), N >= 2.
    """
    if x.shape[0] < 2:
        raise InvalidInputError(f"Batch-norm recalibration needs at least 2 images, got {x.shape[0]}.")
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    moms = [bn.momentum for bn in bns]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None
    model.train()
    for i in range(0, x.shape[0], batch_size):
        xb = x[i : i + batch_size]
        if xb.shape[0] >= 2:
            model(xb)
    for bn, mom in zip(bns, moms, strict=True):
        bn.momentum = mom
    return model.eval()


def _factory(channels: Sequence[int], blocks: Sequence[int], **defaults: Any):
    def make(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> SuperResNet:
        kw.pop("drop_rate", None)  # no dropout in the super-network
        return SuperResNet(num_classes, in_chans, **({"channels": channels, "blocks": blocks, **defaults} | kw))

    return make


register_model("supernet", family="SuperNet",
               description="weight-sharing ResNet super-network, widths 16-32-64, 2 blocks per stage, elastic "
                           "depth and width (design-diversity Fig. 8)")(_factory((16, 32, 64), (2, 2, 2)))
register_model("supernet_r34", family="SuperNet",
               description="ImageNet super-network: ResNet-34 shape (BasicBlocks [3,4,6,3], widths 64-512, 7x7 stem), "
                           "elastic depth (skip 1 per stage) and width (paper scale of design-diversity Fig. 8)")(
    _factory((64, 128, 256, 512), (3, 4, 6, 3), imagenet_stem=True, strides=(1, 2, 2, 2)))
register_model("test_supernet", family="SuperNet", description="tiny smoke variant of supernet")(
    _factory((4, 8, 8), (2, 2, 2)))
