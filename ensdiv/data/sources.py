"""Offline pre-training sources other than Fashion-MNIST (training-methods' "dataset" category).

training-methods compares models pre-trained on different *data sources* (ImageNet, JFT, web
image-text pairs...). At ``cpu`` scale we need sources that (a) are on every machine without a
download, (b) differ from Fashion-MNIST's clothing, and (c) are 28x28 grey images with labels:

* ``pretrain/digits`` — scikit-learn's bundled UCI handwritten digits (1,797 real 8x8 images, 10 classes,
  labels kept), upsampled bilinearly to 20x20 and padded to 28x28 the way MNIST centres digits. Real
  data, but small. (``digits`` without a prefix is the data registry's label-free OOD version.)
* ``pretrain/shapes`` — a procedural set of 12,000 images of 10 shape classes (disc, ring, square,
  frame, triangle, plus, cross, horizontal bars, vertical bars, diagonal stripes) at random position,
  size and contrast with Gaussian noise, generated from a fixed seed. Well defined, any size, and
  its features (edges, strokes, closed contours) are generic rather than clothing-specific.
"""

from __future__ import annotations

from functools import lru_cache

import torch
import torch.nn.functional as F

from ensdiv.data.registry import TensorSet, register_family

__all__ = ["load_digits28", "make_shapes", "SHAPE_CLASSES"]

SHAPE_CLASSES = ["disc", "ring", "square", "frame", "triangle", "plus", "cross", "hbars", "vbars", "diagonal"]


@lru_cache(maxsize=1)
def load_digits28() -> TensorSet:
    """scikit-learn's digits, upsampled to (N, 1, 28, 28) floats in [0, 1]."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0
    x = F.pad(F.interpolate(x, size=(20, 20), mode="bilinear", align_corners=False).clamp(0, 1), (4, 4, 4, 4))
    return TensorSet(
        x,
        torch.tensor(d.target, dtype=torch.int64),
        "pretrain/digits",
        [str(i) for i in range(10)],
        "scikit-learn UCI handwritten digits (labelled), 8x8 upsampled to 20x20, padded to 28x28",
    )


def make_shapes(n: int = 12000, *, seed: int = 0, size: int = 28) -> TensorSet:
    """The procedural shapes set (see module docstring); class ``i`` is ``SHAPE_CLASSES[i]``."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % len(SHAPE_CLASSES)
    y = y[torch.randperm(n, generator=g)]
    r = 4 + 6 * torch.rand(n, generator=g)  # half-size in pixels
    cy = size / 2 + (size / 2 - r - 1) * (2 * torch.rand(n, generator=g) - 1)
    cx = size / 2 + (size / 2 - r - 1) * (2 * torch.rand(n, generator=g) - 1)
    coords = torch.arange(size, dtype=torch.float32) + 0.5
    yy = (coords.view(1, -1, 1) - cy.view(-1, 1, 1)) / r.view(-1, 1, 1)
    xx = (coords.view(1, 1, -1) - cx.view(-1, 1, 1)) / r.view(-1, 1, 1)
    rad = (yy**2 + xx**2).sqrt()
    box = torch.maximum(yy.abs(), xx.abs())
    inside = box <= 1
    w = 0.3  # stroke half-width relative to the size
    masks = [
        rad <= 1,
        (rad <= 1) & (rad >= 1 - 2 * w),
        inside,
        inside & (box >= 1 - 2 * w),
        (yy <= 1) & (yy >= -1) & (xx.abs() <= (yy + 1) / 2),
        inside & ((yy.abs() <= w) | (xx.abs() <= w)),
        inside & (((yy - xx).abs() <= w * 1.4) | ((yy + xx).abs() <= w * 1.4)),
        inside & (torch.remainder(yy * 2, 1.0) < 0.5),
        inside & (torch.remainder(xx * 2, 1.0) < 0.5),
        inside & (torch.remainder((yy + xx) * 1.5, 1.0) < 0.5),
    ]
    stack = torch.stack(masks, 1).float()  # (n, 10, H, W)
    img = stack[torch.arange(n), y]
    contrast = 0.5 + 0.5 * torch.rand(n, 1, 1, generator=g)
    noise = 0.08 * torch.randn(n, size, size, generator=g)
    x = (img * contrast + noise).clamp(0, 1).unsqueeze(1)
    return TensorSet(
        x, y, "pretrain/shapes", list(SHAPE_CLASSES), "procedural shapes (10 classes, fixed seed)"
    )


@lru_cache(maxsize=1)
def _shapes() -> TensorSet:
    return make_shapes(12000, seed=0)


def _pretrain_source(name: str) -> TensorSet:
    return _shapes() if name == "shapes" else load_digits28()


register_family(
    "pretrain",
    _pretrain_source,
    names=lambda: ["pretrain/shapes", "pretrain/digits"],
    description="labelled pre-training sources other than Fashion-MNIST: procedural shapes (12,000) "
    "and scikit-learn digits (1,797), 28x28 grey, 10 classes each",
)
