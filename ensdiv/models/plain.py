"""Plain (non-timm) small models of the cpu zoo: a VGG-style CNN, an MLP and a SqueezeNet-like net.

They expose timm's head API (``forward_features``, ``forward_head(x, pre_logits=True)``,
``get_classifier``, ``reset_classifier``) so the engine, predictions and linear probes treat every
zoo model alike.
"""

from __future__ import annotations

import torch
import torch.nn as nn

__all__ = ["SmallCNN", "MLP", "Fire", "SqueezeNet"]


class _Head:
    """timm's classifier API (``get_classifier`` / ``reset_classifier``) for the plain models."""

    fc: nn.Linear
    num_features: int

    def get_classifier(self) -> nn.Module:
        return self.fc

    def reset_classifier(self, num_classes: int, global_pool: str | None = None) -> None:
        self.fc = nn.Linear(self.num_features, num_classes) if num_classes > 0 else nn.Identity()


class SmallCNN(_Head, nn.Module):
    """A plain VGG-style CNN: two conv blocks per stage, max-pooling, global average pool, linear head."""

    def __init__(
        self,
        num_classes: int = 10,
        in_chans: int = 1,
        widths: tuple[int, ...] = (16, 32),
        drop_rate: float = 0.0,
        convs_per_stage: int = 2,
    ):
        super().__init__()
        layers: list[nn.Module] = []
        c = in_chans
        for w in widths:
            for _ in range(convs_per_stage):
                layers += [
                    nn.Conv2d(c, w, 3, padding=1, bias=False),
                    nn.BatchNorm2d(w),
                    nn.ReLU(inplace=True),
                ]
                c = w
            layers.append(nn.MaxPool2d(2))
        self.features = nn.Sequential(*layers)
        self.num_features = c
        self.drop = nn.Dropout(drop_rate)
        self.fc = nn.Linear(c, num_classes)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        return self.features(x)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        x = self.drop(x.mean((2, 3)))
        return x if pre_logits else self.fc(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))


class MLP(_Head, nn.Module):
    """A multi-layer perceptron on the flattened image (ReLU, dropout)."""

    def __init__(
        self,
        num_classes: int = 10,
        in_chans: int = 1,
        img_size: int = 28,
        hidden: tuple[int, ...] = (256, 128),
        drop_rate: float = 0.0,
    ):
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        d = in_chans * img_size * img_size
        for h in hidden:
            layers += [nn.Linear(d, h), nn.ReLU(inplace=True), nn.Dropout(drop_rate)]
            d = h
        self.body = nn.Sequential(*layers)
        self.num_features = d
        self.fc = nn.Linear(d, num_classes)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        return x if pre_logits else self.fc(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.body(x))


class Fire(nn.Module):
    """SqueezeNet's Fire module: 1x1 squeeze, then concatenated 1x1 and 3x3 expands (ReLU)."""

    def __init__(self, cin: int, squeeze: int, expand: int):
        super().__init__()
        self.squeeze = nn.Sequential(
            nn.Conv2d(cin, squeeze, 1, bias=False), nn.BatchNorm2d(squeeze), nn.ReLU(inplace=True)
        )
        self.e1 = nn.Sequential(nn.Conv2d(squeeze, expand, 1), nn.ReLU(inplace=True))
        self.e3 = nn.Sequential(nn.Conv2d(squeeze, expand, 3, padding=1), nn.ReLU(inplace=True))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.squeeze(x)
        return torch.cat([self.e1(s), self.e3(s)], 1)


class SqueezeNet(_Head, nn.Module):
    """SqueezeNet 1.1 in miniature: 3x3 stride-2 stem, Fire modules, max-pool, dropout, GAP + linear.

    SqueezeNet's 1x1-conv classifier followed by global average pooling is a linear map of the pooled
    features (up to its final ReLU), so it is written as GAP + ``nn.Linear`` to share timm's head API.
    Unlike SqueezeNet 1.1, the stem and each squeeze layer have batch normalisation: without it the
    network does not leave chance level within the few hundred SGD steps of the cpu-scale budget.
    """

    def __init__(
        self,
        num_classes: int = 10,
        in_chans: int = 1,
        stem: int = 32,
        fires: tuple[tuple[int, int], ...] = ((8, 32), (8, 32), (16, 64), (16, 64)),
        drop_rate: float = 0.0,
    ):
        super().__init__()
        layers: list[nn.Module] = [
            nn.Conv2d(in_chans, stem, 3, 2, 1, bias=False),
            nn.BatchNorm2d(stem),
            nn.ReLU(inplace=True),
        ]
        c = stem
        for i, (sq, ex) in enumerate(fires):
            if i == len(fires) // 2:
                layers.append(nn.MaxPool2d(2))
            layers.append(Fire(c, sq, ex))
            c = 2 * ex
        self.features = nn.Sequential(*layers)
        self.num_features = c
        self.drop = nn.Dropout(drop_rate)
        self.fc = nn.Linear(c, num_classes)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        return self.features(x)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        x = self.drop(x.mean((2, 3)))
        return x if pre_logits else self.fc(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))
