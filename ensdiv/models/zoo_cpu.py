"""The ``cpu``-scale model zoo: small configurations of timm's own model classes for 28x28x1 images.

Each architecture of design-diversity's Table i (and the families of the other papers) gets a
configuration narrow and shallow enough to train on Fashion-MNIST on two CPU cores in about a minute,
while keeping what makes the family distinct (residual bottlenecks, grouped convolutions,
depthwise-separable inverted residuals with squeeze-excitation, patch tokens with self-attention,
shifted windows, token-mixing MLPs, large-kernel depthwise mixing). ImageNet stems that downsample by
4 are replaced by stride-1 or stride-2 stems so that a 28x28 image still has a spatial map in the
last stage. Every name also has a tiny ``test_<name>`` variant (a few thousand parameters) for smoke runs.

All models accept ``drop_rate`` (dropout before the classifier) and expose timm's
``forward_features`` / ``forward_head(x, pre_logits=True)`` pair for penultimate features.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch.nn as nn
from timm.layers import get_act_layer
from timm.models._efficientnet_blocks import SqueezeExcite
from timm.models._efficientnet_builder import decode_arch_def, round_channels
from timm.models.convmixer import ConvMixer
from timm.models.convnext import ConvNeXt
from timm.models.deit import VisionTransformerDistilled
from timm.models.densenet import DenseNet
from timm.models.efficientnet import EfficientNet
from timm.models.mlp_mixer import MlpMixer
from timm.models.mobilenetv3 import MobileNetV3
from timm.models.resnet import BasicBlock, Bottleneck, ResNet
from timm.models.swin_transformer import SwinTransformer
from timm.models.vision_transformer import VisionTransformer

from ensdiv.models.plain import MLP, SmallCNN, SqueezeNet
from ensdiv.models.registry import register_model

__all__ = ["ARCHITECTURES", "VERSIONS"]


def _squeezenet(nc: int, ic: int, img: int, **kw: Any) -> SqueezeNet:
    return SqueezeNet(nc, ic, **kw)


def _resnet(
    nc: int,
    ic: int,
    img: int,
    *,
    bottleneck: bool = False,
    layers=(1, 1, 1, 1),
    channels=(16, 32, 64, 128),
    cardinality: int = 1,
    base_width: int = 64,
    **kw: Any,
) -> ResNet:
    block = Bottleneck if bottleneck else BasicBlock
    m = ResNet(
        block,
        layers=tuple(layers),
        channels=tuple(channels),
        num_classes=nc,
        in_chans=ic,
        stem_width=max(channels[0] // 2, 1),
        stem_type="deep",
        cardinality=cardinality,
        base_width=base_width,
        **kw,
    )
    # Small-image stem: timm's 'deep' stem (three 3x3 convs, the first at stride 2) and no max-pool,
    # so the four stages see 14, 7, 4 and 2 pixels instead of 7, 4, 2 and 1.
    m.maxpool = nn.Identity()
    return m


def _densenet(
    nc: int, ic: int, img: int, *, growth_rate: int = 12, block_config=(2, 2, 2), **kw: Any
) -> DenseNet:
    m = DenseNet(growth_rate=growth_rate, block_config=tuple(block_config), num_classes=nc, in_chans=ic, **kw)
    stem = m.features.conv0  # 3x3 stride-2 stem, no max-pool: dense blocks at 14, 7 and 3 pixels
    m.features.conv0 = nn.Conv2d(ic, stem.out_channels, 3, 2, 1, bias=False)
    m.features.pool0 = nn.Identity()
    return m


def _mobilenetv3(nc: int, ic: int, img: int, *, arch=None, num_features: int = 256, **kw: Any) -> MobileNetV3:
    arch = arch or [
        ["ds_r1_k3_s1_e1_c16_se0.25_nre"],
        ["ir_r1_k3_s2_e4.5_c24_nre", "ir_r1_k3_s1_e3.67_c24_nre"],
        ["ir_r1_k5_s2_e4_c40_se0.25", "ir_r1_k5_s1_e4_c40_se0.25"],
        ["ir_r1_k5_s1_e4_c48_se0.25"],
        ["cn_r1_k1_s1_c192"],
    ]
    se = partial(
        SqueezeExcite, gate_layer="hard_sigmoid", force_act_layer=nn.ReLU, rd_round_fn=round_channels
    )
    return MobileNetV3(
        decode_arch_def(arch),
        num_classes=nc,
        in_chans=ic,
        stem_size=16,
        fix_stem=True,
        num_features=num_features,
        act_layer=get_act_layer("hard_swish"),
        se_layer=se,
        se_from_exp=False,
        **kw,
    )


def _effnet(
    nc: int,
    ic: int,
    img: int,
    *,
    arch=None,
    stem_size: int = 16,
    num_features: int = 256,
    act: str = "swish",
    **kw: Any,
) -> EfficientNet:
    arch = arch or [
        ["ds_r1_k3_s1_e1_c16_se0.25"],
        ["ir_r2_k3_s2_e4_c24_se0.25"],
        ["ir_r2_k5_s2_e4_c40_se0.25"],
        ["ir_r1_k3_s1_e4_c64_se0.25"],
    ]
    return EfficientNet(
        decode_arch_def(arch),
        num_classes=nc,
        in_chans=ic,
        stem_size=stem_size,
        fix_stem=True,
        num_features=num_features,
        act_layer=get_act_layer(act),
        **kw,
    )


_MNAS = [
    ["ds_r1_k3_s1_e1_c16_noskip"],
    ["ir_r2_k3_s2_e3_c24"],
    ["ir_r2_k5_s2_e3_c40_se0.25"],
    ["ir_r1_k3_s1_e6_c64"],
]


def _vit(
    nc: int,
    ic: int,
    img: int,
    *,
    patch_size: int = 4,
    embed_dim: int = 48,
    depth: int = 4,
    num_heads: int = 3,
    mlp_ratio: float = 2.0,
    vit_class: type[VisionTransformer] = VisionTransformer,
    **kw: Any,
) -> VisionTransformer:
    """A small timm ViT; ``vit_class=VisionTransformerDistilled`` gives DeiT (distillation token)."""
    return vit_class(
        img_size=img,
        patch_size=patch_size,
        in_chans=ic,
        num_classes=nc,
        embed_dim=embed_dim,
        depth=depth,
        num_heads=num_heads,
        mlp_ratio=mlp_ratio,
        **kw,
    )


def _deit(nc: int, ic: int, img: int, **kw: Any) -> VisionTransformerDistilled:
    return _vit(nc, ic, img, vit_class=VisionTransformerDistilled, **kw)


def _swin(
    nc: int,
    ic: int,
    img: int,
    *,
    patch_size: int = 2,
    embed_dim: int = 16,
    depths=(2, 2),
    num_heads=(1, 2),
    window_size: int = 7,
    **kw: Any,
) -> SwinTransformer:
    kw.setdefault("drop_path_rate", 0.0)
    return SwinTransformer(
        img_size=img,
        patch_size=patch_size,
        in_chans=ic,
        num_classes=nc,
        embed_dim=embed_dim,
        depths=tuple(depths),
        num_heads=tuple(num_heads),
        window_size=window_size,
        mlp_ratio=2.0,
        **kw,
    )


def _mixer(
    nc: int,
    ic: int,
    img: int,
    *,
    patch_size: int = 4,
    num_blocks: int = 4,
    embed_dim: int = 64,
    mlp_ratio=(0.5, 2.0),
    **kw: Any,
) -> MlpMixer:
    return MlpMixer(
        num_classes=nc,
        img_size=img,
        in_chans=ic,
        patch_size=patch_size,
        num_blocks=num_blocks,
        embed_dim=embed_dim,
        mlp_ratio=tuple(mlp_ratio),
        **kw,
    )


def _convmixer(
    nc: int,
    ic: int,
    img: int,
    *,
    dim: int = 64,
    depth: int = 4,
    kernel_size: int = 5,
    patch_size: int = 4,
    **kw: Any,
) -> ConvMixer:
    return ConvMixer(
        dim=dim,
        depth=depth,
        kernel_size=kernel_size,
        patch_size=patch_size,
        in_chans=ic,
        num_classes=nc,
        **kw,
    )


def _convnext(
    nc: int, ic: int, img: int, *, depths=(1, 1, 1, 1), dims=(12, 24, 48, 96), patch_size: int = 1, **kw: Any
) -> ConvNeXt:
    return ConvNeXt(
        in_chans=ic,
        num_classes=nc,
        depths=tuple(depths),
        dims=tuple(dims),
        patch_size=patch_size,
        kernel_sizes=5,
        **kw,
    )


def _cnn(nc: int, ic: int, img: int, **kw: Any) -> SmallCNN:
    return SmallCNN(nc, ic, **kw)


def _mlp(nc: int, ic: int, img: int, **kw: Any) -> MLP:
    return MLP(nc, ic, img, **kw)


# name: (family, description, builder, cpu options, test_* options)
ARCHITECTURES: dict[str, tuple[str, str, Any, dict, dict]] = {
    "mlp": ("MLP", "two-hidden-layer perceptron (256, 128) on the flat image", _mlp, {}, {"hidden": (16,)}),
    "small_cnn": (
        "CNN",
        "plain VGG-style CNN, 2x(conv-BN-ReLU) per stage, widths 16-32",
        _cnn,
        {},
        {"widths": (4, 8), "convs_per_stage": 1},
    ),
    "squeezenet": (
        "SqueezeNet",
        "SqueezeNet-1.1-style Fire modules (squeeze 8-16, expand 32-64), stride-2 stem",
        _squeezenet,
        {},
        {"stem": 4, "fires": ((2, 4), (2, 4))},
    ),
    "resnet": (
        "ResNet",
        "timm ResNet, BasicBlock [1,1,1,1], widths 16-128, deep 3x3 stem, no max-pool",
        _resnet,
        {},
        {"channels": (4, 4, 8, 8)},
    ),
    "resnext": (
        "ResNet",
        "timm ResNet with grouped Bottleneck (ResNeXt, cardinality 8, base width 8)",
        _resnet,
        {"bottleneck": True, "cardinality": 8, "base_width": 8, "channels": (16, 32, 48, 64)},
        {"bottleneck": True, "cardinality": 2, "base_width": 32, "channels": (4, 4, 8, 8)},
    ),
    "densenet": (
        "DenseNet",
        "timm DenseNet, growth 12, blocks (2,2,2), 3x3 stride-2 stem",
        _densenet,
        {},
        {"growth_rate": 4, "block_config": (1, 1)},
    ),
    "mobilenetv3": (
        "MobileNet",
        "timm MobileNetV3 (small-style arch, hard-swish, SE), 192-d head conv",
        _mobilenetv3,
        {},
        {"arch": [["ds_r1_k3_s1_e1_c8_se0.25_nre"], ["ir_r1_k3_s2_e2_c8"]], "num_features": 16},
    ),
    "efficientnet": (
        "EfficientNet",
        "timm EfficientNet (MBConv + SE, swish), 4 stages to 64 channels",
        _effnet,
        {},
        {
            "arch": [["ds_r1_k3_s1_e1_c8_se0.25"], ["ir_r1_k3_s2_e2_c8_se0.25"]],
            "num_features": 16,
            "stem_size": 8,
        },
    ),
    "mnasnet": (
        "MNASNet",
        "timm EfficientNet class with an MNASNet-A1-style arch (ReLU, partial SE)",
        _effnet,
        {"arch": _MNAS, "act": "relu"},
        {
            "arch": [["ds_r1_k3_s1_e1_c8_noskip"], ["ir_r1_k3_s2_e2_c8"]],
            "num_features": 16,
            "stem_size": 8,
            "act": "relu",
        },
    ),
    "vit": (
        "ViT",
        "timm VisionTransformer, patch 4 (7x7 tokens), dim 48, depth 4, 3 heads",
        _vit,
        {},
        {"embed_dim": 8, "depth": 1, "num_heads": 2},
    ),
    "deit": (
        "ViT",
        "timm DeiT (distillation-token ViT), patch 4, dim 48, depth 4, 3 heads",
        _deit,
        {},
        {"embed_dim": 8, "depth": 1, "num_heads": 2},
    ),
    "swin": (
        "Swin",
        "timm SwinTransformer, patch 2 (14x14 tokens), window 7, dims 16-32, depths (2,2), head dim 16",
        _swin,
        {},
        {"embed_dim": 8, "depths": (1,), "num_heads": (2,)},
    ),
    "mixer": (
        "MLP-Mixer",
        "timm MlpMixer, patch 4, 4 blocks, dim 64, MLP ratios (0.5, 2)",
        _mixer,
        {},
        {"embed_dim": 8, "num_blocks": 1},
    ),
    "convmixer": (
        "ConvMixer",
        "timm ConvMixer, patch 4 (7x7 grid), dim 64, depth 4, kernel 5",
        _convmixer,
        {},
        {"dim": 8, "depth": 1},
    ),
    "convnext": (
        "ConvNeXt",
        "timm ConvNeXt, patch-1 stem, dims 12-96, depths (1,1,1,1), kernel 5",
        _convnext,
        {},
        {"dims": (4, 4, 8, 8)},
    ),
}


def _make_factory(builder: Any, defaults: dict) -> Any:
    def factory(num_classes: int, in_chans: int, img_size: int, **overrides: Any) -> nn.Module:
        return builder(num_classes, in_chans, img_size, **{**defaults, **overrides})

    return factory


#: code version per architecture (part of the cache key of trained models; bump on any change)
VERSIONS = {"squeezenet": 2, "swin": 2, "convmixer": 2}

for _name, (_fam, _desc, _builder, _cpu, _test) in ARCHITECTURES.items():
    _v = VERSIONS.get(_name, 1)
    register_model(_name, family=_fam, description=_desc, version=_v)(_make_factory(_builder, _cpu))
    register_model(f"test_{_name}", family=_fam, description=f"tiny smoke variant of {_name}", version=_v)(
        _make_factory(_builder, _test)
    )
register_model("test_cnn", family="CNN", description="tiny smoke CNN (alias of test_small_cnn)")(
    _make_factory(_cnn, ARCHITECTURES["small_cnn"][4])
)
