"""Where :func:`ensdiv.train.fit` takes its batches from: a set held in memory, or image files read by workers.

One training loop serves both (issue #33: "where the batches come from is a choice of loader, not a second
pipeline"). Each epoch draws the same seeded permutation of the set (``derive_seed(seed, epoch)``), cuts it
into global batches and gives each DDP rank its strided share (``batch[rank::world]``); the batch augmentation
(:class:`~ensdiv.train.augment.BatchAugment`) then applies to whatever the source produced.

- :class:`MemoryBatches` slices a :class:`~ensdiv.data.TensorSet` (the cpu book's sets);
- :class:`LoaderBatches` reads a map-style dataset of ``(image tensor, label)`` through a
  :class:`~torch.utils.data.DataLoader` with worker processes (ImageNet-layout folders, transformed by
  the model's own timm training transform: :func:`training_transform`). Its workers' random state comes
  from the epoch's seed, so a run is reproducible for a fixed number of workers.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

from ensdiv.data.paper.common import loader_workers
from ensdiv.data.registry import TensorSet
from ensdiv.errors import EnsdivError
from ensdiv.train.augment import BatchAugment
from ensdiv.train.engine import derive_seed

__all__ = ["MemoryBatches", "LoaderBatches", "as_batches", "training_transform"]

def _permutation(n: int, seed: int, epoch: int) -> torch.Tensor:
    return torch.randperm(n, generator=torch.Generator().manual_seed(derive_seed(seed, epoch)))


def _share(perm: torch.Tensor, step: int, global_batch: int, rank: int, world: int) -> torch.Tensor:
    return perm[step * global_batch : (step + 1) * global_batch][rank::world]


class MemoryBatches:
    """Batches sliced from an in-memory :class:`~ensdiv.data.TensorSet`."""

    def __init__(self, data: TensorSet):
        self.data = data
        self.name = data.name
        self.max_label = int(data.y.max()) if len(data) else -1
        self.num_classes = max(self.max_label + 1, data.num_classes)

    def __len__(self) -> int:
        return len(self.data)

    def sample(self, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The first ``k`` images and labels (the shape check)."""
        return self.data.x[:k], self.data.y[:k]

    def epoch(self, *, seed: int, epoch: int, global_batch: int, steps: int, rank: int, world: int,
              aug: BatchAugment, gen: torch.Generator) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """This rank's augmented batches of one epoch, on the CPU."""
        perm = _permutation(len(self), seed, epoch)
        x_all, y_all = self.data.x, self.data.y
        for step in range(steps):
            idx = _share(perm, step, global_batch, rank, world)
            yield aug(x_all[idx], y_all[idx], gen)


class LoaderBatches:
    """Batches read by a DataLoader from a map-style dataset of ``(image tensor, label)`` pairs.

    Args:
        dataset: e.g. an ImageNet-layout folder set (:func:`ensdiv.data.paper.stream.open_stream_set`) opened
            with the model's training transform.
        name: the set's name (messages, progress bar).
        num_classes: the number of classes (the labels are not read up front).
        num_workers: worker processes; default 0 for sets under 512 images, else ``min(8, cpus - 1)``.
        pin_memory: page-locked batches (default: when CUDA is available).

    Augmentation: the images arrive through their transform, for a stream set the model's timm training
    transform (:func:`training_transform`), which already crops (random-resized, scale 0.08-1) and flips each
    image. A recipe's ``flip`` / ``crop`` / ``flipcrop`` therefore name that standard ImageNet augmentation
    here and add nothing per batch (``"none"`` trains on the same transformed images: the transform is the
    model's, not the recipe's); ``mixup``, ``cutmix`` and ``erasing`` are applied to each batch as in memory.
    """

    def __init__(self, dataset: Dataset, *, name: str, num_classes: int, num_workers: int | None = None,
                 pin_memory: bool | None = None):
        self.dataset, self.name, self.num_classes = dataset, name, int(num_classes)
        self.max_label = self.num_classes - 1
        if num_workers is None:
            num_workers = loader_workers(len(dataset))
        self.num_workers = int(num_workers)
        self.pin_memory = torch.cuda.is_available() if pin_memory is None else bool(pin_memory)

    def __len__(self) -> int:
        return len(self.dataset)

    def sample(self, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        items = [self.dataset[i] for i in range(min(k, len(self)))]
        return torch.stack([x for x, _ in items]), torch.as_tensor([int(y) for _, y in items])

    def epoch(self, *, seed: int, epoch: int, global_batch: int, steps: int, rank: int, world: int,
              aug: BatchAugment, gen: torch.Generator) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        if aug.flip or aug.crop:  # done per image by the timm training transform (random-resized crop, flip)
            aug = copy.copy(aug)
            aug.flip = aug.crop = False
        perm = _permutation(len(self), seed, epoch)
        batches = [_share(perm, step, global_batch, rank, world).tolist() for step in range(steps)]
        loader = DataLoader(self.dataset, batch_sampler=batches, num_workers=self.num_workers,
                            pin_memory=self.pin_memory, persistent_workers=False,
                            generator=torch.Generator().manual_seed(derive_seed(seed, epoch, rank, 3)))
        for x, y in loader:
            yield aug(x, torch.as_tensor(y, dtype=torch.long), gen)


def as_batches(train_set: TensorSet | MemoryBatches | LoaderBatches) -> MemoryBatches | LoaderBatches:
    """The batch source of ``train_set`` (a :class:`~ensdiv.data.TensorSet` is sliced in memory)."""
    if isinstance(train_set, MemoryBatches | LoaderBatches):
        return train_set
    if isinstance(train_set, TensorSet):
        return MemoryBatches(train_set)
    raise EnsdivError(f"fit trains on a TensorSet or a LoaderBatches, got a {type(train_set).__name__}.")


def training_transform(model: nn.Module, *, overrides: Mapping[str, Any] | None = None) -> Any:
    """The training transform of a timm model for image files, from its own data config
    (``timm.data.resolve_data_config``: input size, interpolation, mean and std) through
    ``timm.data.create_transform(is_training=True)``: timm's random-resized crop (scale 0.08-1), horizontal
    flip and normalisation, no RandAugment unless ``overrides`` names one (``auto_augment``)."""
    from timm.data import create_transform, resolve_data_config

    cfg = dict(resolve_data_config(model=model))
    cfg.update(overrides or {})
    keep = ("input_size", "interpolation", "mean", "std", "crop_pct", "auto_augment", "re_prob", "scale")
    return create_transform(**{k: v for k, v in cfg.items() if k in keep}, is_training=True)
