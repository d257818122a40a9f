"""Shared parts of the paper-scale loaders: transforms, dataset classes, layout helpers, sources."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from ensdiv.errors import DataNotFoundError, EnsdivError

__all__ = [
    "IMAGENET_MEAN", "IMAGENET_STD", "CIFAR_MEAN", "CIFAR_STD", "IMAGE_EXTS", "CIFAR_C_CORRUPTIONS",
    "DTD_CLASSES", "eval_transform", "ArrayImageDataset", "ImageFileDataset",
]  # fmt: skip

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
CIFAR_MEAN, CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
IMAGE_EXTS = {".jpg", ".jpeg", ".png", ".bmp", ".webp"}
CIFAR_C_CORRUPTIONS = (
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "defocus_blur",
    "glass_blur",
    "motion_blur",
    "zoom_blur",
    "snow",
    "frost",
    "fog",
    "brightness",
    "contrast",
    "elastic_transform",
    "pixelate",
    "jpeg_compression",
    "speckle_noise",
    "gaussian_blur",
    "spatter",
    "saturate",
)
DTD_CLASSES = (
    "banded blotchy braided bubbly bumpy chequered cobwebbed cracked crosshatched crystalline dotted fibrous "
    "flecked freckled frilly gauzy grid grooved honeycombed interlaced knitted lacelike lined marbled matted "
    "meshed paisley perforated pitted pleated polka-dotted porous potholed scaly smeared spiralled sprinkled "
    "stained stratified striped studded swirly veined waffled woven wrinkled zigzagged"
).split()
_SOURCES = {
    "cifar10": "https://www.cs.toronto.edu/~kriz/cifar.html (python version)",
    "cifar100": "https://www.cs.toronto.edu/~kriz/cifar.html (python version)",
    "cifar10-c": "https://zenodo.org/record/2535967",
    "cifar100-c": "https://zenodo.org/record/3555552",
    "svhn": "http://ufldl.stanford.edu/housenumbers/ (format 2, test_32x32.mat)",
    "imagenet": "https://image-net.org (ILSVRC2012 validation, sorted into class folders)",
    "imagenet-v2": "https://github.com/modestyachts/ImageNetV2 (matched-frequency)",
    "imagenet-c": "https://github.com/hendrycks/robustness (ImageNet-C)",
    "imagenet-cbar": "https://github.com/facebookresearch/augmentation-corruption (ImageNet-C-bar)",
    "imagenet-r": "https://github.com/hendrycks/imagenet-r",
    "imagenet-a": "https://github.com/hendrycks/natural-adv-examples",
    "imagenet-o": "https://github.com/hendrycks/natural-adv-examples",
    "textures": "https://www.robots.ox.ac.uk/~vgg/data/dtd/",
    "inaturalist": "https://github.com/deeplearning-wisc/large_scale_ood (iNaturalist OOD subset)",
    "openimages-o": "https://github.com/haoqiwang/vim (OpenImage-O)",
}


def _missing(what: str, root: Path, expected: str, key: str) -> DataNotFoundError:
    return DataNotFoundError(
        f"{what} was not found at {root}: expected {expected}; get it from {_SOURCES[key]}."
    )


def eval_transform(
    data_config: Mapping[str, Any] | torch.nn.Module | None = None, *, default: str = "imagenet"
) -> Callable:
    """The evaluation transform of a model, from its timm data config.

    Args:
        data_config: a dict as returned by ``timm.data.resolve_data_config`` or a timm
            ``pretrained_cfg`` (keys ``input_size``, ``mean``, ``std``, ``crop_pct``, ``interpolation``,
            optionally ``crop_mode``; others are ignored), a timm model (its config is resolved), or ``None``.
        default: with no config: ``"imagenet"`` (224 px, resize 256 + centre crop, ImageNet mean/std)
            or ``"cifar"`` (no resize, CIFAR mean/std).

    Returns:
        A callable PIL image -> float tensor (3, H, W), normalised.
    """
    if isinstance(data_config, torch.nn.Module):
        from timm.data import resolve_data_config

        data_config = resolve_data_config(model=data_config)
    if data_config is None and default == "cifar":
        from torchvision.transforms import v2

        return v2.Compose(
            [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(CIFAR_MEAN, CIFAR_STD)]
        )
    from timm.data import create_transform

    cfg = {
        "input_size": (3, 224, 224),
        "interpolation": "bilinear",
        "mean": IMAGENET_MEAN,
        "std": IMAGENET_STD,
        "crop_pct": 0.875,
    }
    cfg.update(
        {
            k: v
            for k, v in (data_config or {}).items()
            if k in ("input_size", "interpolation", "mean", "std", "crop_pct", "crop_mode")
        }
    )
    return create_transform(**cfg, is_training=False)


class ArrayImageDataset(Dataset):
    """Images held as a uint8 array (N, H, W, 3) with integer labels, transformed on access."""

    def __init__(
        self, images: np.ndarray, labels: np.ndarray, transform: Callable | None = None, *, name: str = ""
    ):
        self.images, self.targets, self.transform, self.name = (
            images,
            np.asarray(labels, dtype=np.int64),
            transform,
            name,
        )

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[Any, int]:
        from PIL import Image

        img = Image.fromarray(self.images[i])
        return (self.transform(img) if self.transform else img), int(self.targets[i])


class ImageFileDataset(Dataset):
    """Image files with integer labels, opened as RGB and transformed on access.

    Attributes:
        files, targets: the samples. classes: folder names. class_mask: for 200-class subsets of
        ImageNet, the 1000-class indices of ``classes`` (else ``None``). masked_targets: labels as
        positions in ``class_mask``.
    """

    def __init__(
        self,
        files: list[Path],
        targets: list[int],
        transform: Callable | None = None,
        *,
        name: str = "",
        classes: list[str] | None = None,
        class_mask: torch.Tensor | None = None,
    ):
        self.files, self.targets, self.transform, self.name = files, targets, transform, name
        self.classes, self.class_mask = classes or [], class_mask

    @property
    def masked_targets(self) -> torch.Tensor:
        if self.class_mask is None:
            raise EnsdivError(f"{self.name} is not a class subset of ImageNet; use .targets.")
        pos = {int(c): i for i, c in enumerate(self.class_mask)}
        return torch.tensor([pos[t] for t in self.targets])

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> tuple[Any, int]:
        from PIL import Image

        with Image.open(self.files[i]) as im:
            img = im.convert("RGB")
        return (self.transform(img) if self.transform else img), int(self.targets[i])


def _images_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_EXTS and p.is_file())


def _first_dir(root: Path, candidates: list[str], probe: Callable[[Path], bool]) -> Path | None:
    for sub in candidates:
        folder = root / sub if sub else root
        if folder.is_dir() and probe(folder):
            return folder
    return None
