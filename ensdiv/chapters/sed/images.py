"""The pictures Fig. 2 shows, at every scale: the evaluation set's images in memory at smoke and cpu scale, read
from the streamed set's own files at paper scale (ImageNet-R's JPEGs), in the order of the chapter's logits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

import ensdiv as ed
from ensdiv.data.paper.imagenet import imagenet_wnids
from ensdiv.data.paper.stream import stream_files
from ensdiv.data.registry import subset_indices

__all__ = ["ShownSet", "shown_set"]


@dataclass
class ShownSet:
    """One evaluation set as a page shows it.

    Attributes:
        labels: ``(N,)`` labels as the chapter's logits index them (positions in the class mask of a class-subset
            set such as ImageNet-R at paper scale).
        classes: the name of each logit's class (ImageNet wnids at paper scale).
        read: ``read(i)`` -> image ``i`` as an ``(H, W)`` grey or ``(H, W, 3)`` RGB array in [0, 1] or uint8.
    """

    labels: Tensor
    classes: list[str]
    read: Callable[[int], np.ndarray]

    def image(self, i: int) -> np.ndarray:
        return self.read(int(i))


def shown_set(cfg: dict, role: str) -> ShownSet:
    """The set of ``role`` (``cfg["sets"][role]``, subset to ``cfg["eval_subset"]`` with seed 0 as the chapter's
    features are) for display: the in-memory set at smoke/cpu scale; at paper scale the stream set's files
    (opened once; only the images shown are decoded), labels and class names."""
    name = cfg["sets"][role]
    if cfg["scale"] != "paper":
        data = ed.get_dataset(name)
        data = data.subset(cfg["eval_subset"], seed=0) if cfg["eval_subset"] else data
        return ShownSet(data.y, list(data.classes), lambda i: data.x[i].permute(1, 2, 0).squeeze(-1).numpy())
    from PIL import Image

    files = stream_files(name)
    idx = subset_indices(len(files.files), cfg["eval_subset"], seed=0)
    mask = getattr(files, "class_mask", None)
    if mask is not None:  # a class subset (ImageNet-R, -A): labels are positions among its own class folders
        labels, classes = torch.as_tensor(files.masked_targets)[idx], list(files.classes)
    else:
        labels, classes = torch.as_tensor(files.targets)[idx], list(getattr(files, "classes", []) or imagenet_wnids())

    def read(i: int) -> np.ndarray:
        with Image.open(files.files[int(idx[i])]) as im:
            return np.asarray(im.convert("RGB"))

    return ShownSet(labels, classes, read)
