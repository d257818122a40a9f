"""Seeded batch augmentations on in-memory image tensors (flips, padded crops, mixup/cutmix, erasing).

Flips and crops draw from an explicit :class:`torch.Generator`; mixup/cutmix (timm's ``Mixup``) and
random erasing (timm's ``RandomErasing``) draw from numpy's / Python's / torch's global generators,
which the training engine re-seeds at the start of every epoch from ``(seed, epoch, rank)`` — so a
resumed run replays exactly the augmentations of an uninterrupted one.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["BatchAugment"]


class BatchAugment:
    """Apply a ``+``-joined augmentation spec (see :data:`ensdiv.train.recipes.AUGMENTATIONS`) to a batch.

    Args:
        spec: e.g. ``"flipcrop+mixup"``; ``"none"`` for identity.
        num_classes: classes of the soft targets mixup/cutmix/label smoothing produce.
        label_smoothing: folded into the soft targets when mixup or cutmix is on.
        pad: padding of the random crop (2 pixels on 28x28, like 4 on CIFAR's 32x32).

    ``__call__(x, y, gen)`` returns ``(x, target)`` where target is int labels (N,) or, with mixup or
    cutmix, soft targets (N, C).
    """

    def __init__(self, spec: str, *, num_classes: int, label_smoothing: float = 0.0, pad: int = 2):
        parts = set(spec.split("+")) - {"none"}
        self.flip = bool(parts & {"flip", "flipcrop"})
        self.crop = bool(parts & {"crop", "flipcrop"})
        self.pad = pad
        self.mix = None
        if parts & {"mixup", "cutmix"}:
            from timm.data import Mixup

            self.mix = Mixup(
                mixup_alpha=0.2 if "mixup" in parts else 0.0,
                cutmix_alpha=1.0 if "cutmix" in parts else 0.0,
                label_smoothing=label_smoothing,
                num_classes=num_classes,
            )
        self.erase = None
        if "erasing" in parts:
            from timm.data.random_erasing import RandomErasing

            self.erase = RandomErasing(probability=0.25, mode="pixel", device="cpu")

    @property
    def soft_targets(self) -> bool:
        return self.mix is not None

    def __call__(
        self, x: torch.Tensor, y: torch.Tensor, gen: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        n = x.shape[0]
        if self.flip:
            mask = torch.rand(n, generator=gen) < 0.5
            x = torch.where(mask.view(-1, 1, 1, 1).to(x.device), x.flip(3), x)
        if self.crop:
            x = self.random_crop(x, gen)
        if self.erase is not None:
            self.erase.device = x.device
            x = self.erase(x.clone())
        if self.mix is not None:
            if n % 2:  # timm's Mixup needs an even batch: drop the last sample
                x, y = x[:-1], y[:-1]
            self.mix.mixup_enabled = True
            x, y = self.mix(x, y)
        return x, y

    def random_crop(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """Zero-pad by ``pad`` and crop back to the input size at a random offset per image."""
        n, c, h, w = x.shape
        p = self.pad
        xp = F.pad(x, (p, p, p, p))
        dy = torch.randint(0, 2 * p + 1, (n,), generator=gen).to(x.device)
        dx = torch.randint(0, 2 * p + 1, (n,), generator=gen).to(x.device)
        rows = (torch.arange(h, device=x.device)[None, :] + dy[:, None])[:, None, :, None]
        cols = (torch.arange(w, device=x.device)[None, :] + dx[:, None])[:, None, None, :]
        b = torch.arange(n, device=x.device)[:, None, None, None]
        ch = torch.arange(c, device=x.device)[None, :, None, None]
        return xp[b, ch, rows, cols]
