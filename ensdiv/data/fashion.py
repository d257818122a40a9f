"""Fashion-MNIST (Xiao et al., 2017): the real, 70k-image dataset every ``cpu``-scale chapter uses.

The four IDX files are looked for, in order, in

1. ``$ENSDIV_DATA`` (directly, or in ``fashion-mnist/`` or torchvision's ``FashionMNIST/raw/`` below it),
2. Debian's ``dataset-fashion-mnist`` package: ``/usr/share/datasets/fashion-mnist``,
3. torchvision's download into ``$ENSDIV_DATA`` (default ``data/`` in the project root).

The validation split is 5,000 images carved from the 60,000 training images with a fixed seed, so
temperature scaling and model selection never see the test set.
"""

from __future__ import annotations

import gzip
import os
import zlib
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from ensdiv.data.registry import TensorSet, array_fingerprint, register_family
from ensdiv.errors import CorruptDataError, DataNotFoundError, unknown_name
from ensdiv.paths import project_root

__all__ = ["FASHION_CLASSES", "find_fashion_mnist", "load_fashion_mnist", "VAL_SIZE", "VAL_SEED"]

FASHION_CLASSES = [
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
]  # fmt: skip
DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
VAL_SIZE = 5000
VAL_SEED = 12345
_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
HOW_TO_GET = (
    "Fashion-MNIST was not found: put its four IDX files in $ENSDIV_DATA, or install Debian's package "
    "(apt-get install dataset-fashion-mnist), or let torchvision download it into $ENSDIV_DATA with internet access."
)


def data_home() -> Path:
    env = os.environ.get("ENSDIV_DATA")
    if env:
        return Path(env)

    return project_root() / "data"


def _has_files(folder: Path) -> bool:
    stems = [stem for pair in _FILES.values() for stem in pair]
    return all(any((folder / (stem + ext)).exists() for ext in (".gz", "")) for stem in stems)


def find_fashion_mnist(*, download: bool = True) -> Path:
    """The folder holding the four Fashion-MNIST IDX files, searched in the documented order.

    Raises:
        DataNotFoundError: not found anywhere and the download failed or was not allowed.
    """
    home = data_home()
    candidates = []
    if os.environ.get("ENSDIV_DATA"):
        candidates += [home, home / "fashion-mnist", home / "FashionMNIST" / "raw"]
    candidates.append(DEBIAN_DIR)
    candidates.append(home / "FashionMNIST" / "raw")
    for folder in candidates:
        if _has_files(folder):
            return folder
    if download:
        try:
            import torchvision

            torchvision.datasets.FashionMNIST(str(home), train=True, download=True)
            torchvision.datasets.FashionMNIST(str(home), train=False, download=True)
        except Exception:  # noqa: BLE001 - no internet, no space: all mean "not available"
            pass
        if _has_files(home / "FashionMNIST" / "raw"):
            return home / "FashionMNIST" / "raw"
    raise DataNotFoundError(HOW_TO_GET)


_GOOD_COPY = (
    "delete it and get a good copy (apt-get install --reinstall dataset-fashion-mnist, or the IDX files from "
    "https://github.com/zalandoresearch/fashion-mnist)"
)


def _read_idx(path_stem: Path, *, expect_ndim: int) -> np.ndarray:
    """One IDX file (``<stem>.gz`` or ``<stem>``) as a uint8 array, its header and length checked.

    Raises:
        CorruptDataError: the file is truncated, not gzip, or not an IDX file of ``expect_ndim``
            dimensions (one sentence naming the file).
    """
    gz = path_stem.with_name(path_stem.name + ".gz")
    path = gz if gz.exists() else path_stem

    def bad(what: str) -> CorruptDataError:
        return CorruptDataError(f"The Fashion-MNIST file {path} {what}; {_GOOD_COPY}.")

    try:
        if path is gz:
            with gzip.open(gz, "rb") as fh:
                raw = fh.read()
        else:
            raw = path.read_bytes()
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise bad(f"is not a complete gzip file ({exc or type(exc).__name__})") from None
    except OSError as exc:
        raise bad(f"cannot be read ({exc.strerror or exc})") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08 or raw[3] != expect_ndim:
        raise bad(f"is not an IDX file of {expect_ndim}-d unsigned bytes (its header is {raw[:4].hex() or 'empty'})")
    header = 4 + 4 * expect_ndim
    if len(raw) < header:
        raise bad(f"is truncated ({len(raw)} bytes, shorter than its {header}-byte header)")
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(expect_ndim))
    need = header + int(np.prod(shape))
    if len(raw) != need:
        raise bad(f"holds {len(raw) - header} data bytes but its header {shape} needs {need - header}"
                  + (" (truncated)" if len(raw) < need else ""))
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


@lru_cache(maxsize=2)
def _load_raw(split: str, folder: str) -> tuple[torch.Tensor, torch.Tensor, str]:
    """uint8 images, int64 labels and the fingerprint of the bytes read (kept for the last two splits)."""
    img_stem, lbl_stem = _FILES[split]
    raw_images = _read_idx(Path(folder) / img_stem, expect_ndim=3)
    raw_labels = _read_idx(Path(folder) / lbl_stem, expect_ndim=1)
    if len(raw_images) != len(raw_labels):
        raise CorruptDataError(
            f"The Fashion-MNIST {split} files in {folder} hold {len(raw_images)} images but {len(raw_labels)} "
            f"labels; {_GOOD_COPY}."
        )
    fingerprint = array_fingerprint(raw_images, raw_labels)
    images = torch.from_numpy(raw_images.copy())
    labels = torch.from_numpy(raw_labels.astype(np.int64))
    return images, labels, fingerprint


def _val_index(n_train: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(VAL_SEED)
    return torch.randperm(n_train, generator=g)[:VAL_SIZE].sort().values


def load_fashion_mnist(split: str = "train") -> TensorSet:
    """Fashion-MNIST as tensors.

    Args:
        split: ``"train"`` (55,000 images: the official train split minus validation), ``"val"``
            (5,000 images carved from train with a fixed seed), ``"train-full"`` (all 60,000) or
            ``"test"`` (the official 10,000).

    Returns:
        A :class:`TensorSet` with ``x`` float32 in [0, 1] shaped (N, 1, 28, 28) and ``y`` int64.
    """
    if split not in ("train", "val", "train-full", "test"):

        raise unknown_name("Fashion-MNIST split", split, ["train", "val", "train-full", "test"])
    folder = str(find_fashion_mnist())
    images, labels, fingerprint = _load_raw("test" if split == "test" else "train", folder)
    if split in ("train", "val"):
        val = _val_index(len(labels))
        if split == "val":
            keep = val
        else:
            mask = torch.ones(len(labels), dtype=torch.bool)
            mask[val] = False
            keep = mask.nonzero().squeeze(1)
        images, labels = images[keep], labels[keep]
    x = images.unsqueeze(1).float().div_(255.0)
    return TensorSet(x, labels.clone(), f"fmnist/{split}", list(FASHION_CLASSES), "Fashion-MNIST " + split,
                     f"fmnist:{fingerprint}/{split}")


register_family(
    "fmnist",
    load_fashion_mnist,
    names=lambda: ["fmnist/train", "fmnist/val", "fmnist/train-full", "fmnist/test"],
    description="Fashion-MNIST (28x28 grey, 10 clothing classes); val is carved from train with a fixed seed",
)
