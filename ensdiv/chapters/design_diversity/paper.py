"""The design-diversity paper's own numbers (Table 1, Table i, Fig. A) and the timm models that stand for its
models at paper scale."""

from __future__ import annotations

import pandas as pd

__all__ = ["PAPER_TABLE1", "PAPER_FIG_A", "PAPER_TABLE_I", "PAPER_ZOO_STANDS_FOR", "PAPER_ZOO", "PAPER_TABLE1_ZOO"]

# ---- the paper's numbers ------------------------------------------------------------------------------
#: Table 1 of the paper (ImageNet and ImageNet-C̄ Lines 1.6; accuracies in %).
PAPER_TABLE1 = pd.DataFrame(
    [
        ("Self-sup.", "CNN", "DINO ResNet50", 25.6, 75.30, 92.61, 21.80, 40.66),
        ("Superv.", "CNN", "ResNet50", 25.6, 75.85, 92.88, 34.95, 55.88),
        ("Superv.", "CNN", "ResNext50_32_4d", 25.0, 77.49, 93.57, 39.46, 60.61),
        ("Superv.", "CNN", "ResNet152", 60.2, 78.25, 93.96, 40.17, 62.09),
        ("Superv.", "NAS", "EfficientNet_b7", 66.3, 74.82, 92.13, 51.11, 73.81),
        ("Superv.", "CNN", "ResNext101_64x4d", 83.4, 82.90, 96.22, 51.89, 72.46),
        ("Superv.", "ViT", "Swin tiny", 28.3, 81.34, 95.612, 55.29, 78.45),
        ("Self-sup.", "ViT", "DINO ViT_b.8", 87.3, 80.06, 95.02, 55.75, 78.37),
        ("Superv.", "ViT", "Swin base", 87.8, 83.30, 96.46, 58.71, 81.05),
        ("Superv.", "ViT", "ViT base p16", 86.6, 80.88, 95.28, 61.28, 82.26),
        ("K. distill.", "ViT", "DeiT-base", 87.3, 83.34, 96.50, 64.07, 84.66),
        ("Self-sup.", "ViT", "SwinV2", 87.9, 83.34, 96.44, 59.976, 81.70),
    ],
    columns=["training", "arch class", "model", "params (M)", "clean top-1", "clean top-5", "lines top-1",
             "lines top-5"],
)  # fmt: skip
#: Figure A of the paper: ImageNet val top-1 (%) of the 14 models of Table i.
PAPER_FIG_A = {
    "ResNext50_32_2": 75.198, "ResNext50_32_4l": 75.072, "ResNext50_16_4": 75.432, "MNASNET_1": 54.408,
    "MNASNET_1p": 54.0, "Squeezenet_512": 41.918, "Squeezenet": 56.558, "bootstrapNAS-B_0": 76.342,
    "bootstrapNAS-B_1": 76.282, "deit_tiny_p16_224": 71.654, "dino_deit_tiny1": 67.932, "dino_deit_tiny2": 67.52,
    "dino_resnet1": 67.236, "dino_resnet2": 67.216,
}  # fmt: skip
_PROBE = "300 + 100 probe"
_SGD01 = "SGD lr 0.1 wd 1e-4 m 0.9"
#: Table i of the paper, abridged: architecture, optimiser and its parameters, scheduler, epochs, batch.
PAPER_TABLE_I = {
    "ResNext50_32_2": ("ResNeXt50 c32, width 2, [3,4,6,3], dropout 0.2", _SGD01, "step 0.1/30", "100", 32),
    "ResNext50_32_4l": ("ResNeXt50 c32, width 4, [2,2,3,2], dropout 0.2", _SGD01, "step 0.1/30", "100", 32),
    "ResNext50_16_4": ("ResNeXt50 c16, width 4, [3,4,6,3], dropout 0.2", _SGD01, "step 0.1/30", "100", 32),
    "MNASNET_1": ("MNASNet ratio 1, dropout 0.2", _SGD01, "step 0.1/30", "100", 32),
    "MNASNET_1p": ("MNASNet ratio 1, dropout 0.2", "RMSprop lr 0.256 decay 0.9 m 0.9", "step 0.97/2.4", "100", 32),
    "Squeezenet_512": ("SqueezeNet 1.1", "SGD lr 0.01 wd 2e-4 m 0.9", "step 0.1/30", "100", 512),
    "Squeezenet": ("SqueezeNet 1.1", "SGD lr 0.01 wd 2e-4 m 0.9", "step 0.1/30", "100", 128),
    "bootstrapNAS-B_0": ("ResNet50 sub-network of a BootstrapNAS super-network", "SGD (Listing 1)", "-", "-", None),
    "bootstrapNAS-B_1": ("ResNet50 sub-network of a BootstrapNAS super-network", "SGD (Listing 1)", "-", "-", None),
    "deit_tiny_p16_224": ("DeiT tiny, patch 16, dim 192", "AdamW lr 5e-4", "cosine", "300", 256),
    "dino_deit_tiny1": ("DINO DeiT tiny, seed 0", "AdamW lr 5e-4", "cosine", _PROBE, 256),
    "dino_deit_tiny2": ("DINO DeiT tiny, seed 7", "AdamW lr 5e-4", "cosine", _PROBE, 256),
    "dino_resnet1": ("DINO ResNet50, backbone seed 7, probe seed 5", "SGD lr 0.03 wd 1e-4", "-", _PROBE, 256),
    "dino_resnet2": ("DINO ResNet50, backbone seed 7, probe seed 15", "SGD lr 0.03 wd 1e-4", "-", _PROBE, 256),
}  # fmt: skip


#: paper scale, Fig. 5-7 and Table i: 14 pretrained timm models, each standing for one of Table i's models (our
#: choice: timm has no weights of the paper's own trainings; SqueezeNet and DINO-DeiT-tiny have none in timm at
#: all, so two small NAS nets, a DINO-trained ResMLP and DeiT-tiny distilled stand for them, and two
#: semi/weakly-supervised ResNeXt50s for the DINO ResNet50s). Table i / Fig. A read the paper's row of the model
#: a timm model stands for (:func:`table_i_id`).
PAPER_ZOO_STANDS_FOR = {
    "resnext50_32x4d.a1h_in1k": "ResNext50_32_2", "resnext50_32x4d.ra_in1k": "ResNext50_32_4l",
    "resnext50_32x4d.gluon_in1k": "ResNext50_16_4",
    "mnasnet_100.rmsp_in1k": "MNASNET_1", "semnasnet_100.rmsp_in1k": "MNASNET_1p",
    "mnasnet_small.lamb_in1k": "Squeezenet_512", "semnasnet_075.rmsp_in1k": "Squeezenet",
    "resnet50.a1_in1k": "bootstrapNAS-B_0", "resnet50.tv_in1k": "bootstrapNAS-B_1",
    "deit_tiny_patch16_224.fb_in1k": "deit_tiny_p16_224",
    "resmlp_12_224.fb_dino": "dino_deit_tiny1", "deit_tiny_distilled_patch16_224.fb_in1k": "dino_deit_tiny2",
    "resnext50_32x4d.fb_ssl_yfcc100m_ft_in1k": "dino_resnet1", "resnext50_32x4d.fb_swsl_ig1b_ft_in1k": "dino_resnet2",
}  # fmt: skip
PAPER_ZOO = list(PAPER_ZOO_STANDS_FOR)
#: paper scale, Table 1: the paper's models by their timm names (DINO ViT-B/8 and DINO ResNet50 have no
#: classifier in timm — ``vit_base_patch8_224.dino`` is a feature extractor — and are left out; EfficientNet-B7
#: is the TF port; the paper's "K. distill." DeiT-base is DeiT's distilled model).
PAPER_TABLE1_ZOO = [
    "resnet50.tv_in1k", "resnext50_32x4d.tv_in1k", "resnet152.tv_in1k", "tf_efficientnet_b7.ra_in1k",
    "resnext101_64x4d.tv_in1k", "swin_tiny_patch4_window7_224.ms_in1k", "swin_base_patch4_window7_224.ms_in1k",
    "vit_base_patch16_224.augreg_in1k", "deit_base_distilled_patch16_224.fb_in1k",
    "swinv2_base_window8_256.ms_in1k",
]  # fmt: skip
