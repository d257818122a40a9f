"""Shared parts of the paper-scale loaders: transforms, dataset classes, layout helpers, sources.

Image files are checked where they are read. :class:`ImageFileDataset` opens each file lazily, checks
its size in pixels from the header before decoding anything (:data:`MAX_IMAGE_PIXELS`), and reports an
unreadable file (empty, not an image, truncated or corrupt, or over the limit) as a
:class:`~ensdiv.errors.CorruptDataError`, one sentence naming the file. PIL's own settings
(``PIL.Image.MAX_IMAGE_PIXELS``, ``ImageFile.LOAD_TRUNCATED_IMAGES``) are left as they are.

Class folders are checked when a set is opened (:func:`_class_folders`): a class folder that is a
file, a folder that is not one of the set's classes, a missing class and a class folder without images
are each refused in one sentence. A set is complete unless its folder declares a class subset: a text
file :data:`SUBSET_FILE` beside the class folders listing, one per line, the classes it deliberately
holds (:func:`declare_class_subset` writes it; a small development copy of ImageNet, the tests' fakes).
Labels stay those of the full set.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from ensdiv.errors import CorruptDataError, DataNotFoundError, EnsdivError

__all__ = [
    "loader_workers",
    "IMAGENET_MEAN", "IMAGENET_STD", "CIFAR_MEAN", "CIFAR_STD", "IMAGE_EXTS", "CIFAR_C_CORRUPTIONS",
    "DTD_CLASSES", "MAX_IMAGE_PIXELS", "SUBSET_FILE", "eval_transform", "ArrayImageDataset", "ImageFileDataset",
    "open_image", "declare_class_subset",
]  # fmt: skip

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
CIFAR_MEAN, CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
IMAGE_EXTS = {".jpg", ".jpeg", ".png", ".bmp", ".webp"}
#: The most pixels (width x height) an image file may have; checked from its header before decoding.
#: 50 MP: above any image of the sets read here (ImageNet-1k's photos are a few megapixels at most,
#: DTD's 640 px, the shift and OOD sets' web photos and renditions at most camera size, tens of MP), and
#: a bound on memory: decoding and converting one 50 MP image to RGB takes about 300 MB, so 8 loader
#: workers stay near 2.4 GB (a 121 MP PNG took 1.3 GB in one process). PIL's own limit (89 MP warned,
#: 179 MP refused) is not changed. Raise it here for a set with larger images.
MAX_IMAGE_PIXELS = 50_000_000
#: The file beside a set's class folders that declares a deliberate class subset (one class per line).
SUBSET_FILE = "ensdiv-subset.txt"
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


def loader_workers(n: int) -> int:
    """DataLoader worker processes for reading ``n`` image files: none under 512 files (starting workers costs
    more than it saves), else one per spare CPU, at most 8."""
    return 0 if n < 512 else min(8, max((os.cpu_count() or 1) - 1, 0))


def _missing(what: str, root: Path, expected: str, key: str) -> DataNotFoundError:
    return DataNotFoundError(
        f"{what} was not found at {root}: expected {expected}; get it from {_SOURCES[key]}."
    )


def _source(key: str | None) -> str:
    return _SOURCES[key] if key in _SOURCES else "where the set is published"


def _corrupt(what: str, path: Path, why: str, source_key: str | None) -> CorruptDataError:
    return CorruptDataError(f"The {what} file {path} {why}; delete it and get a good copy from {_source(source_key)}.")


def open_image(path: str | Path, what: str = "image", source_key: str | None = None) -> Any:
    """Open one image file as an RGB PIL image, its size checked before it is decoded.

    Args:
        path: the file. what: the set's name for the message. source_key: where to get a good copy
            (a key of the loaders' sources), for the message.

    Raises:
        CorruptDataError: the file is empty, not an image, truncated or corrupt, or has more than
            :data:`MAX_IMAGE_PIXELS` pixels (then nothing was decoded); one sentence naming the file.
    """
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    try:
        im = Image.open(path)  # reads the header only
    except Image.DecompressionBombError as exc:  # PIL's own, larger limit, hit while reading the header
        raise _too_large(what, path, f"has more pixels than PIL opens ({exc})") from None
    except UnidentifiedImageError:
        why = "is empty (0 bytes)" if path.stat().st_size == 0 else "is not an image file that PIL can read"
        raise _corrupt(what, path, why, source_key) from None
    except (OSError, ValueError, SyntaxError, EOFError) as exc:
        raise _corrupt(what, path, f"cannot be read ({type(exc).__name__}: {exc})", source_key) from None
    with im:
        w, h = im.size
        if w * h > MAX_IMAGE_PIXELS:
            raise _too_large(what, path, f"is {w}x{h} = {w * h:,} pixels")
        try:
            return im.convert("RGB")
        except (OSError, ValueError, SyntaxError, EOFError) as exc:  # truncated data, broken chunks, bad tables
            why = f"is truncated or corrupt ({type(exc).__name__}: {exc})"
            raise _corrupt(what, path, why, source_key) from None


def _too_large(what: str, path: Path, size: str) -> CorruptDataError:
    return CorruptDataError(
        f"The {what} file {path} {size}, over the limit of {MAX_IMAGE_PIXELS:,} pixels "
        "(ensdiv.data.paper.common.MAX_IMAGE_PIXELS), so it was not decoded; downscale it or raise the limit."
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

    Each file is read by :func:`open_image`: an unreadable or oversized file raises
    :class:`~ensdiv.errors.CorruptDataError` naming it.

    Attributes:
        files, targets: the samples. classes: folder names. class_mask: for 200-class subsets of
        ImageNet, the 1000-class indices of ``classes`` (else ``None``). masked_targets: labels as
        positions in ``class_mask``. source: where to get a good copy (a key of the loaders' sources).
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
        source: str | None = None,
    ):
        self.files, self.targets, self.transform, self.name = files, targets, transform, name
        self.classes, self.class_mask, self.source = classes or [], class_mask, source

    @property
    def masked_targets(self) -> torch.Tensor:
        if self.class_mask is None:
            raise EnsdivError(f"{self.name} is not a class subset of ImageNet; use .targets.")
        pos = {int(c): i for i, c in enumerate(self.class_mask)}
        return torch.tensor([pos[t] for t in self.targets])

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> tuple[Any, int]:
        img = open_image(self.files[i], self.name or "image", self.source)
        return (self.transform(img) if self.transform else img), int(self.targets[i])


def _images_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_EXTS and p.is_file())


def _first_dir(root: Path, candidates: list[str], probe: Callable[[Path], bool]) -> Path | None:
    for sub in candidates:
        folder = root / sub if sub else root
        if folder.is_dir() and probe(folder):
            return folder
    return None


def declare_class_subset(folder: str | Path, classes: Iterable[str]) -> Path:
    """Declare that the class folders of ``folder`` are deliberately the subset ``classes`` of the set's
    classes: writes :data:`SUBSET_FILE` there (sorted, one per line) and returns its path."""
    path = Path(folder) / SUBSET_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{c}\n" for c in sorted(set(map(str, classes)))))
    return path


def _shown(names: Iterable[str], n: int = 5) -> str:
    names = sorted(names)
    return ", ".join(names[:n]) + (f", ... ({len(names)} in all)" if len(names) > n else "")


def _class_folders(
    folder: Path, what: str, key: str, expected: str, valid: Collection[str], *, noun: str, complete: bool = True
) -> list[str]:
    """The sorted class folder names of ``folder``, after checking them against the set's classes.

    Args:
        valid: every class folder name the set may have. noun: what they are, for the message
            (``"ImageNet val wnids"``). complete: every class in ``valid`` must be there (``False`` only
            for a set whose classes are not listed anywhere, such as ImageNet-O, whose labels are all -1).

    A :data:`SUBSET_FILE` in ``folder`` declares a class subset: then exactly its classes must be there.

    Raises:
        EnsdivError: a folder that is not one of ``valid`` (or not in the declared subset), a class folder
            that is a link out of ``folder``, or a subset file naming a class that is not.
        DataNotFoundError: a class folder that is a file, or missing classes (one sentence each, saying
            how to declare a deliberate subset).
    """
    valid = set(valid)
    entries = list(folder.iterdir()) if folder.is_dir() else []
    dirs = {p.name for p in entries if p.is_dir()}
    files = sorted(p.name for p in entries if not p.is_dir() and p.name in valid)
    if files:
        raise DataNotFoundError(
            f"{what} at {folder} has files where class folders belong ({_shown(files)}); expected {expected}; "
            f"get it from {_source(key)}."
        )
    if not dirs:
        raise _missing(what, folder, expected, key)
    home = folder.resolve()
    away = sorted(p.name for p in entries if p.is_dir() and not p.resolve().is_relative_to(home))
    if away:  # a class folder linked to another tree would be read as images of that class
        raise EnsdivError(f"{what} at {folder} has class folders that are links out of it ({_shown(away)}, to "
                          f"{(folder / away[0]).resolve()}); link or copy the whole set folder instead, so that every "
                          "class folder lies inside it.")
    bad = dirs - valid
    if bad:
        raise EnsdivError(f"{what} at {folder} has class folders that are not {noun} ({_shown(bad)}); "
                          f"expected {expected}.")
    declared = folder / SUBSET_FILE
    wanted = valid if complete else dirs
    subset = ""
    if declared.is_file():
        wanted = set(declared.read_text().split())
        if wanted - valid or not wanted:
            got = f"{_shown(wanted - valid)}, which are not {noun}" if wanted else "no classes"
            raise EnsdivError(f"The class subset file {declared} lists {got}; list one class folder name per line.")
        if dirs - wanted:
            raise EnsdivError(f"{what} at {folder} has class folders not listed in its class subset file "
                              f"{declared} ({_shown(dirs - wanted)}); add them there or remove them.")
        subset = f" listed in its class subset file {declared}"
    missing = wanted - dirs
    if missing:
        how = "" if subset else f", or declare a deliberate class subset by listing its classes in {declared}"
        raise DataNotFoundError(
            f"{what} at {folder} lacks {len(missing)} of the {len(wanted)} class folders{subset} "
            f"({_shown(missing)}); expected {expected}; get it from {_source(key)}{how}."
        )
    return sorted(dirs)
