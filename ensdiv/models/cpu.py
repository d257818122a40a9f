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

__all__: list[str] = []  # everything here is reached through ensdiv.models.create_model


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


def _densenet(nc: int, ic: int, img: int, *, growth_rate: int = 12, block_config=(2, 2, 2), **kw: Any) -> DenseNet:
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
    se = partial(SqueezeExcite, gate_layer="hard_sigmoid", force_act_layer=nn.ReLU, rd_round_fn=round_channels)
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


# One registered function per architecture and per tiny smoke variant (``test_<name>``). A change to a model's
# code retrains it on its own: the trained entry records the code that built it (ensdiv.store).


@register_model("mlp", family="MLP", description="two-hidden-layer perceptron (256, 128) on the flat image")
def mlp(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _mlp(num_classes, in_chans, img_size, **kw)


@register_model("test_mlp", family="MLP", description="tiny smoke variant of mlp")
def test_mlp(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _mlp(num_classes, in_chans, img_size, **({"hidden": (16,)} | kw))


@register_model("small_cnn", family="CNN", description="plain VGG-style CNN, 2x(conv-BN-ReLU) per stage, widths 16-32")
def small_cnn(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _cnn(num_classes, in_chans, img_size, **kw)


@register_model("test_small_cnn", family="CNN", description="tiny smoke variant of small_cnn")
def test_small_cnn(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _cnn(num_classes, in_chans, img_size, **({"widths": (4, 8), "convs_per_stage": 1} | kw))


@register_model(
    "squeezenet",
    family="SqueezeNet",
    description="SqueezeNet-1.1-style Fire modules (squeeze 8-16, expand 32-64), stride-2 stem",
)
def squeezenet(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _squeezenet(num_classes, in_chans, img_size, **kw)


@register_model("test_squeezenet", family="SqueezeNet", description="tiny smoke variant of squeezenet")
def test_squeezenet(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _squeezenet(num_classes, in_chans, img_size, **({"stem": 4, "fires": ((2, 4), (2, 4))} | kw))


@register_model(
    "resnet",
    family="ResNet",
    description="timm ResNet, BasicBlock [1,1,1,1], widths 16-128, deep 3x3 stem, no max-pool",
)
def resnet(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _resnet(num_classes, in_chans, img_size, **kw)


@register_model("test_resnet", family="ResNet", description="tiny smoke variant of resnet")
def test_resnet(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _resnet(num_classes, in_chans, img_size, **({"channels": (4, 4, 8, 8)} | kw))


@register_model(
    "resnext", family="ResNet", description="timm ResNet with grouped Bottleneck (ResNeXt, cardinality 8, base width 8)"
)
def resnext(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _resnet(
        num_classes,
        in_chans,
        img_size,
        **({"bottleneck": True, "cardinality": 8, "base_width": 8, "channels": (16, 32, 48, 64)} | kw),
    )


@register_model("test_resnext", family="ResNet", description="tiny smoke variant of resnext")
def test_resnext(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _resnet(
        num_classes,
        in_chans,
        img_size,
        **({"bottleneck": True, "cardinality": 2, "base_width": 32, "channels": (4, 4, 8, 8)} | kw),
    )


@register_model(
    "densenet", family="DenseNet", description="timm DenseNet, growth 12, blocks (2,2,2), 3x3 stride-2 stem"
)
def densenet(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _densenet(num_classes, in_chans, img_size, **kw)


@register_model("test_densenet", family="DenseNet", description="tiny smoke variant of densenet")
def test_densenet(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _densenet(num_classes, in_chans, img_size, **({"growth_rate": 4, "block_config": (1, 1)} | kw))


@register_model(
    "mobilenetv3",
    family="MobileNet",
    description="timm MobileNetV3 (small-style arch, hard-swish, SE), 192-d head conv",
)
def mobilenetv3(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _mobilenetv3(num_classes, in_chans, img_size, **kw)


@register_model("test_mobilenetv3", family="MobileNet", description="tiny smoke variant of mobilenetv3")
def test_mobilenetv3(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _mobilenetv3(
        num_classes,
        in_chans,
        img_size,
        **({"arch": [["ds_r1_k3_s1_e1_c8_se0.25_nre"], ["ir_r1_k3_s2_e2_c8"]], "num_features": 16} | kw),
    )


@register_model(
    "efficientnet", family="EfficientNet", description="timm EfficientNet (MBConv + SE, swish), 4 stages to 64 channels"
)
def efficientnet(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _effnet(num_classes, in_chans, img_size, **kw)


@register_model("test_efficientnet", family="EfficientNet", description="tiny smoke variant of efficientnet")
def test_efficientnet(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _effnet(
        num_classes,
        in_chans,
        img_size,
        **{
            **{
                "arch": [["ds_r1_k3_s1_e1_c8_se0.25"], ["ir_r1_k3_s2_e2_c8_se0.25"]],
                "num_features": 16,
                "stem_size": 8,
            },
            **kw,
        },
    )


@register_model(
    "mnasnet", family="MNASNet", description="timm EfficientNet class with an MNASNet-A1-style arch (ReLU, partial SE)"
)
def mnasnet(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _effnet(num_classes, in_chans, img_size, **({"arch": _MNAS, "act": "relu"} | kw))


@register_model("test_mnasnet", family="MNASNet", description="tiny smoke variant of mnasnet")
def test_mnasnet(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _effnet(
        num_classes,
        in_chans,
        img_size,
        **{
            **{
                "arch": [["ds_r1_k3_s1_e1_c8_noskip"], ["ir_r1_k3_s2_e2_c8"]],
                "num_features": 16,
                "stem_size": 8,
                "act": "relu",
            },
            **kw,
        },
    )


@register_model(
    "vit", family="ViT", description="timm VisionTransformer, patch 4 (7x7 tokens), dim 48, depth 4, 3 heads"
)
def vit(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _vit(num_classes, in_chans, img_size, **kw)


@register_model("test_vit", family="ViT", description="tiny smoke variant of vit")
def test_vit(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _vit(num_classes, in_chans, img_size, **({"embed_dim": 8, "depth": 1, "num_heads": 2} | kw))


@register_model(
    "deit", family="ViT", description="timm DeiT (distillation-token ViT), patch 4, dim 48, depth 4, 3 heads"
)
def deit(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _deit(num_classes, in_chans, img_size, **kw)


@register_model("test_deit", family="ViT", description="tiny smoke variant of deit")
def test_deit(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _deit(num_classes, in_chans, img_size, **({"embed_dim": 8, "depth": 1, "num_heads": 2} | kw))


@register_model(
    "swin",
    family="Swin",
    description="timm SwinTransformer, patch 2 (14x14 tokens), window 7, dims 16-32, depths (2,2), head dim 16",
)
def swin(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _swin(num_classes, in_chans, img_size, **kw)


@register_model("test_swin", family="Swin", description="tiny smoke variant of swin")
def test_swin(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _swin(num_classes, in_chans, img_size, **({"embed_dim": 8, "depths": (1,), "num_heads": (2,)} | kw))


@register_model(
    "mixer", family="MLP-Mixer", description="timm MlpMixer, patch 4, 4 blocks, dim 64, MLP ratios (0.5, 2)"
)
def mixer(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _mixer(num_classes, in_chans, img_size, **kw)


@register_model("test_mixer", family="MLP-Mixer", description="tiny smoke variant of mixer")
def test_mixer(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _mixer(num_classes, in_chans, img_size, **({"embed_dim": 8, "num_blocks": 1} | kw))


@register_model(
    "convmixer",
    family="ConvMixer",
    description="timm ConvMixer, patch 4 (7x7 grid), dim 64, depth 4, kernel 5",
)
def convmixer(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _convmixer(num_classes, in_chans, img_size, **kw)


@register_model("test_convmixer", family="ConvMixer", description="tiny smoke variant of convmixer")
def test_convmixer(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _convmixer(num_classes, in_chans, img_size, **({"dim": 8, "depth": 1} | kw))


@register_model(
    "convnext", family="ConvNeXt", description="timm ConvNeXt, patch-1 stem, dims 12-96, depths (1,1,1,1), kernel 5"
)
def convnext(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _convnext(num_classes, in_chans, img_size, **kw)


@register_model("test_convnext", family="ConvNeXt", description="tiny smoke variant of convnext")
def test_convnext(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return _convnext(num_classes, in_chans, img_size, **({"dims": (4, 4, 8, 8)} | kw))


@register_model("test_cnn", family="CNN", description="tiny smoke CNN (the same as test_small_cnn)")
def test_cnn(num_classes: int, in_chans: int, img_size: int, **kw: Any) -> nn.Module:
    return test_small_cnn(num_classes, in_chans, img_size, **kw)
