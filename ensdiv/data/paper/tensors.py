"""CIFAR-10, CIFAR-100 and SVHN as in-memory registry sets (the ``paper`` scale of the Packed-Ensembles chapter).

=====================  ========  ===========================================================
name                   size      what
=====================  ========  ===========================================================
``cifar10/train``      50,000    CIFAR-10 training batches, 10 classes
``cifar10/test``       10,000    CIFAR-10 test batch
``cifar100/train``     50,000    CIFAR-100 training set, 100 fine labels
``cifar100/test``      10,000    CIFAR-100 test set
``svhn/train``         73,257    SVHN format 2, used only as OOD: every label is -1
``svhn/test``          26,032    SVHN format 2, used only as OOD: every label is -1
``imagenet/val-5k``    5,000     5 images per class of ImageNet-1k val (attack-similarity's SAT set)
=====================  ========  ===========================================================

The files are read from ``$ENSDIV_DATA`` (the variable Fashion-MNIST uses; default ``data/`` in the
project root) in their published layouts, by the loaders of :mod:`ensdiv.data.paper.sets`, which look
in ``cifar-10-batches-py/``, ``cifar-100-python/`` and ``svhn/`` below it (or in the folder itself).
ImageNet val is read from ``$ENSDIV_DATA/imagenet`` when that folder exists, else ``$ENSDIV_DATA``, as
``val/<wnid>/*.JPEG`` (or ``<wnid>/*.JPEG``) by :func:`ensdiv.data.paper.imagenet.imagenet_val`.
A missing set raises that loader's :class:`~ensdiv.errors.DataNotFoundError`, one sentence naming the
folder searched, the files expected and where to download them. Listing the names reads nothing.

Images become float32 in [0, 1], shaped (N, 3, 32, 32), with no mean/std normalisation (as every
other registry set): the models' first BatchNorm absorbs the per-channel scale, and the augmentations
of the training engine work on [0, 1] images. The uint8 arrays of the last few sets read are kept in
memory, so a notebook that trains several models on one set parses the files once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ensdiv.data.fashion import data_home
from ensdiv.data.paper.common import _first_dir, loader_workers
from ensdiv.data.paper.imagenet import imagenet_val, imagenet_wnids
from ensdiv.data.paper.sets import cifar, load_pickle, svhn
from ensdiv.data.registry import TensorSet, array_fingerprint, register_family

__all__ = ["CIFAR10_CLASSES", "load_cifar", "load_svhn_ood", "load_imagenet_val_subset", "imagenet_val_pipelines",
           "PipelineSets", "pipeline_of", "pipeline_slug", "DEFAULT_PIPELINE",
           "by_pipeline"]

CIFAR10_CLASSES = [
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
]  # fmt: skip
_SIZES = {
    "cifar10/train": 50000, "cifar10/test": 10000, "cifar100/train": 50000, "cifar100/test": 10000,
    "svhn/train": 73257, "svhn/test": 26032, "imagenet/val-5k": 5000,
}  # fmt: skip


def _data_root() -> Path:
    return data_home()


def _keep_pil(image):  # the loaders' per-item transform is never used here: skip building one
    return image


@lru_cache(maxsize=3)
def _read(family: str, split: str, root: str) -> tuple[np.ndarray, np.ndarray, str]:
    """uint8 images (N, 32, 32, 3), int64 labels and their fingerprint, read by the paper_sets loaders."""
    if family == "svhn":
        ds = svhn(root, split=split, ood=True, transform=_keep_pil)
    else:
        ds = cifar(root, name=family, split=split, transform=_keep_pil)
    return ds.images, ds.targets, f"{family}:{array_fingerprint(ds.images, ds.targets)}"


def _to_tensor(images: np.ndarray) -> torch.Tensor:
    """uint8 (N, H, W, C) -> float32 (N, C, H, W) / 255, allocating the float tensor once."""
    u8 = torch.from_numpy(images).permute(0, 3, 1, 2)
    out = torch.empty(u8.shape, dtype=torch.float32)
    out.copy_(u8)
    return out.div_(255.0)


def _cifar100_classes(root: Path, split: str) -> list[str]:
    """CIFAR-100's ``fine_label_names`` from its ``meta`` pickle, or ``"0"`` ... ``"99"`` without it."""
    folder = _first_dir(root, ["cifar-100-python", ""], lambda f: (f / "meta").is_file() and (f / split).is_file())
    if folder is None:
        return [str(i) for i in range(100)]
    meta = load_pickle(folder / "meta", "CIFAR-100", "cifar100")
    names = meta.get(b"fine_label_names", meta.get("fine_label_names")) if isinstance(meta, dict) else None
    if names is None or len(names) != 100:
        return [str(i) for i in range(100)]
    return [n.decode() if isinstance(n, bytes) else str(n) for n in names]


def load_cifar(name: str, split: str) -> TensorSet:
    """CIFAR-10 or CIFAR-100 from ``$ENSDIV_DATA`` as a :class:`TensorSet`.

    Args:
        name: ``"cifar10"`` or ``"cifar100"``.
        split: ``"train"`` (50,000) or ``"test"`` (10,000).

    Returns:
        ``x`` float32 in [0, 1] shaped (N, 3, 32, 32) (not normalised), ``y`` int64 (CIFAR-100: fine labels).

    Raises:
        DataNotFoundError: the pickle batches are not in ``$ENSDIV_DATA`` (one sentence from the loader).
    """
    root = _data_root()
    images, labels, fingerprint = _read(name, split, str(root))
    classes = list(CIFAR10_CLASSES) if name == "cifar10" else _cifar100_classes(root, split)
    what = "CIFAR-10" if name == "cifar10" else "CIFAR-100"
    return TensorSet(
        _to_tensor(images), torch.from_numpy(labels.copy()), f"{name}/{split}", classes, f"{what} {split}",
        fingerprint,
    )


def load_svhn_ood(split: str) -> TensorSet:
    """SVHN (format 2, ``<split>_32x32.mat``) from ``$ENSDIV_DATA`` as out-of-distribution images.

    The chapter uses SVHN only as OOD for CIFAR models, so every label is -1 and ``classes`` is empty.

    Returns:
        ``x`` float32 in [0, 1] shaped (N, 3, 32, 32), ``y`` int64 all -1.

    Raises:
        DataNotFoundError: ``<split>_32x32.mat`` is not in ``$ENSDIV_DATA`` (one sentence from the loader).
    """
    images, labels, fingerprint = _read("svhn", split, str(_data_root()))
    return TensorSet(
        _to_tensor(images), torch.from_numpy(labels.copy()), f"svhn/{split}", [], f"SVHN {split} as OOD (label -1)",
        fingerprint,
    )


def _imagenet_root() -> Path:
    root = _data_root()
    return root / "imagenet" if (root / "imagenet").is_dir() else root


#: the pipeline of ``imagenet/val-5k`` itself (shorter side 256, bilinear, centre crop 224)
DEFAULT_PIPELINE = (("crop_mode", "center"), ("crop_pct", 0.875), ("interpolation", "bilinear"), ("size", 224))


def pipeline_of(data_config: Mapping[str, Any] | None) -> tuple | None:
    """The evaluation pipeline of a timm data config (``resolve_data_config``) as a hashable tuple of
    ``(field, value)`` pairs — ``size`` (the input side), ``interpolation``, ``crop_pct``, ``crop_mode`` (timm's
    defaults 0.875 and ``"center"`` where the config has none) — or ``None`` for :data:`DEFAULT_PIPELINE` and
    for no config (the set every model used to share)."""
    if not data_config:
        return None
    size = data_config.get("input_size", (3, 224, 224))
    out = (("crop_mode", str(data_config.get("crop_mode") or "center")),
           ("crop_pct", float(data_config.get("crop_pct") or 0.875)),
           ("interpolation", str(data_config.get("interpolation") or "bilinear")),
           ("size", int(size[-1] if isinstance(size, tuple | list) else size)))
    return None if out == DEFAULT_PIPELINE else out


def pipeline_slug(pipeline: tuple | None) -> str:
    """A short name of a pipeline, e.g. ``288px-crop0.95-bicubic-center``."""
    p = dict(pipeline or DEFAULT_PIPELINE)
    return f"{p['size']}px-crop{p['crop_pct']:g}-{p['interpolation']}-{p['crop_mode']}"


@lru_cache(maxsize=1)
def _imagenet_val_subset(root: str, per_class: int, seed: int, pipeline: tuple | None = None) -> TensorSet:
    from torch.utils.data import DataLoader, Subset
    from torchvision.transforms import v2

    if pipeline is None:
        transform = v2.Compose([
            v2.Resize(256, interpolation=v2.InterpolationMode.BILINEAR, antialias=True),
            v2.CenterCrop(224),
            v2.PILToTensor(),  # uint8 (3, 224, 224); no mean/std normalisation
        ])  # fmt: skip
        size = 224
    else:  # timm's own evaluation transform of that pipeline, stopped before the mean/std normalisation
        from timm.data.transforms_factory import transforms_imagenet_eval

        p = dict(pipeline)
        size = p["size"]
        transform = transforms_imagenet_eval(img_size=size, crop_pct=p["crop_pct"], crop_mode=p["crop_mode"],
                                             interpolation=p["interpolation"], normalize=False)
    ds = imagenet_val(root, transform=transform)
    targets = np.asarray(ds.targets, dtype=np.int64)
    rng = np.random.default_rng(seed)
    chosen: list[int] = []
    for label in np.unique(targets):  # class-index order, files sorted within a class: reproducible
        idx = np.flatnonzero(targets == label)
        chosen += sorted(rng.choice(idx, min(per_class, len(idx)), replace=False).tolist())
    workers = loader_workers(len(chosen))
    x8, ys = [], []
    for xb, yb in DataLoader(Subset(ds, chosen), batch_size=64, num_workers=workers):
        x8.append(xb)
        ys.append(yb)
    x = torch.empty((len(chosen), 3, size, size), dtype=torch.float32)
    torch.cat(x8, out=x)  # uint8 -> float32 in place of a second copy
    name = "imagenet/val-5k" if (per_class, seed) == (5, 0) else f"imagenet/val-{per_class}per-class-seed{seed}"
    what = f"ImageNet-1k val, {per_class} images per class drawn with seed {seed}"
    if pipeline is not None:
        name += f"@{pipeline_slug(pipeline)}"
        what += f", framed by the pipeline {pipeline_slug(pipeline)}"
    if len(ds.classes) < 1000:
        what += f", from a declared subset of {len(ds.classes)} classes"
    return TensorSet(x.div_(255.0), torch.cat(ys).long(), name, imagenet_wnids(), what)


def load_imagenet_val_subset(*, per_class: int = 5, seed: int = 0) -> TensorSet:
    """ImageNet-1k validation, ``per_class`` images of each class drawn with ``seed``, as a :class:`TensorSet`.

    The evaluation set of attack-similarity's SAT (§2: "10% ImageNet validation images, i.e., 5,000
    images"; the paper does not say how they were drawn, so we take 5 per class, which keeps every class).
    A class with fewer images gives all it has; the val folder must have all 1000 class folders, unless
    it declares a class subset (:data:`~ensdiv.data.paper.common.SUBSET_FILE`; then the set holds those
    classes only, and its description says so). Each image is resized (shorter side 256, bilinear) and
    centre-cropped to 224, the usual ImageNet evaluation crop; a model with another input resolution
    gets the image resized by :func:`ensdiv.attacks.forward_pixels`, as the paper resizes the attacked
    image for each target. The last set built is kept in memory (5,000 images are 3 GB of float32).

    Returns:
        ``x`` float32 in [0, 1] shaped (N, 3, 224, 224), not normalised (each model applies its own
        mean/std); ``y`` int64 indices in timm's 1000-class order; ``classes`` the 1000 wnids.

    Raises:
        DataNotFoundError: no ``val/<wnid>/*.JPEG`` class folders in ``$ENSDIV_DATA/imagenet`` or
            ``$ENSDIV_DATA``, or missing or empty class folders (one sentence from
            :func:`ensdiv.data.paper.imagenet.imagenet_val`); a :class:`~ensdiv.errors.CorruptDataError`
            for an unreadable image file.
    """
    return _imagenet_val_subset(str(_imagenet_root()), int(per_class), int(seed))


@dataclass(frozen=True)
class PipelineSets:
    """One evaluation set whose images each model sees framed its own way (issue #33 item 2).

    ``for_pipeline(p)`` is the set prepared by the pipeline ``p`` (:func:`pipeline_of` of a model's timm data
    config; ``None``: the shared default framing): the same images, in the same order, with the same labels,
    resized, cropped and interpolated as that model was evaluated. :func:`ensdiv.sat_by_source` (and
    :func:`ensdiv.sat_matrix`, :func:`ensdiv.sat_one_side`) evaluate and attack every model on its own
    framing when given one.

    Attributes:
        name: the set's name (cache keys), e.g. ``"imagenet/val-5k@per-model"``.
        build: ``pipeline -> TensorSet``.
    """

    name: str
    build: Callable[[tuple | None], TensorSet]

    def for_pipeline(self, pipeline: tuple | None) -> TensorSet:
        return self.build(pipeline)

    def for_model(self, model: Any) -> TensorSet:
        """The set framed as ``model`` sees it (its ``ensdiv_pipeline``; none: the default framing)."""
        return self.build(getattr(model, "ensdiv_pipeline", None))


def by_pipeline(models: Any) -> list[int]:
    """Indices of ``models`` grouped by their ``ensdiv_pipeline`` (each framing is then read once)."""
    return sorted(range(len(models)), key=lambda i: repr(getattr(models[i], "ensdiv_pipeline", None)))


def imagenet_val_pipelines(*, per_class: int = 5, seed: int = 0) -> PipelineSets:
    """:func:`load_imagenet_val_subset`'s images, one set per model pipeline (:class:`PipelineSets`). Each
    pipeline's set is read from the files when asked for (the last one is kept in memory); images are
    un-normalised [0, 1], at the pipeline's size."""
    base = "imagenet/val-5k" if (per_class, seed) == (5, 0) else f"imagenet/val-{per_class}per-class-seed{seed}"
    return PipelineSets(f"{base}@per-model", lambda p: _imagenet_val_subset(str(_imagenet_root()), int(per_class),
                                                                            int(seed), p))


def _names(family: str) -> list[str]:
    return [n for n in _SIZES if n.startswith(family + "/")]


register_family(
    "cifar10",
    lambda split: load_cifar("cifar10", split),
    names=lambda: _names("cifar10"),
    description="CIFAR-10 (32x32 colour, 10 classes; 50k train / 10k test) from $ENSDIV_DATA",
)
register_family(
    "cifar100",
    lambda split: load_cifar("cifar100", split),
    names=lambda: _names("cifar100"),
    description="CIFAR-100 (32x32 colour, 100 fine classes; 50k train / 10k test) from $ENSDIV_DATA",
)
register_family(
    "svhn",
    load_svhn_ood,
    names=lambda: _names("svhn"),
    description="SVHN (32x32 house-number digits) from $ENSDIV_DATA, used only as OOD: every label is -1",
)
register_family(
    "imagenet",
    lambda split: load_imagenet_val_subset(),
    names=lambda: _names("imagenet"),
    description="ImageNet-1k val, 5 images per class drawn with seed 0, 224x224 un-normalised, from $ENSDIV_DATA",
)
