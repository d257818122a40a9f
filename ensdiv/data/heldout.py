"""Held-out-class OOD on Fashion-MNIST: train on 8 classes, treat the other 2 as out-of-distribution.

The analogue of ImageNet-O / OpenImages-O style *near* OOD (images of the same kind, unseen classes),
where ``digits`` and ``noise`` are semantic and far OOD. The held-out classes are 8 (Bag) and 9 (Ankle
boot): Ankle boot is close to the in-distribution Sneaker and Sandal (hard, near OOD), Bag is a
different shape (easier). The remaining classes keep their labels 0-7, so a model for these sets has
``num_classes=8``.

============================  =======  =========================================================
name                          size     content
============================  =======  =========================================================
``fmnist-holdout/train``      ~44,000  ``fmnist/train`` restricted to classes 0-7
``fmnist-holdout/val``        ~4,000   ``fmnist/val`` restricted to classes 0-7
``fmnist-holdout/test``       8,000    ``fmnist/test`` restricted to classes 0-7
``fmnist-holdout/ood``        2,000    ``fmnist/test`` images of classes 8 and 9, label -1
============================  =======  =========================================================
"""

from __future__ import annotations

import torch

from ensdiv.data.fashion import FASHION_CLASSES, load_fashion_mnist
from ensdiv.data.registry import TensorSet, register_family
from ensdiv.errors import unknown_name

__all__ = ["HELD_OUT_CLASSES", "fashion_holdout"]

HELD_OUT_CLASSES = (8, 9)
_SPLITS = ("train", "val", "test", "ood")


def fashion_holdout(split: str) -> TensorSet:
    """One split of the held-out-class benchmark (see the module docstring)."""
    if split not in _SPLITS:
        raise unknown_name("held-out-class split", split, _SPLITS)

    base = load_fashion_mnist("test" if split == "ood" else split)
    out = torch.isin(base.y, torch.tensor(HELD_OUT_CLASSES))
    keep = out if split == "ood" else ~out
    y = torch.full((int(keep.sum()),), -1, dtype=torch.int64) if split == "ood" else base.y[keep]
    classes = (
        [] if split == "ood" else [c for i, c in enumerate(FASHION_CLASSES) if i not in HELD_OUT_CLASSES]
    )
    name = f"fmnist-holdout/{split}"
    desc = (
        "Fashion-MNIST classes 8-9 (Bag, Ankle boot) as near OOD, label -1"
        if split == "ood"
        else (f"Fashion-MNIST {split} without classes 8-9 (8 classes, labels 0-7)")
    )
    return TensorSet(base.x[keep], y, name, classes, desc)


register_family(
    "fmnist-holdout",
    fashion_holdout,
    names=lambda: [f"fmnist-holdout/{s}" for s in _SPLITS],
    description="Fashion-MNIST with classes 8-9 (Bag, Ankle boot) held out: 8-class sets and near OOD",
)
