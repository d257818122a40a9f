"""Paper-scale evaluation sets read from local folders in their published layouts.

Every loader takes the folder ``root`` where the data was unpacked, checks the layout, and returns a
:class:`torch.utils.data.Dataset` of ``(image, label)`` pairs. Images go through a torchvision
transform built from a timm data config (``timm.data.resolve_data_config(model=...)``: input size,
mean/std, crop fraction, interpolation), so each model sees its own pre-processing. OOD-only sets
(SVHN as OOD, ImageNet-O, Textures, iNaturalist, OpenImages-O) label every sample ``-1``.

ImageNet-R and ImageNet-A have 200 of the 1000 ImageNet classes. Their labels are indices in the
1000-class order (the sorted wnid folders of the ImageNet val folder when ``imagenet_root`` is given,
else timm's ImageNet-1k list, which is the same order), and ``dataset.class_mask`` holds the 1000-class
indices of the dataset's wnid folders: evaluate with ``logits[:, dataset.class_mask]`` and labels
``dataset.masked_targets``.

Folder layouts are checked when a set is opened: every class of the set must be a folder holding
images (ImageNet's 1000 wnids, -R's and -A's 200, DTD's 47, ...), unless the folder declares a class
subset in :data:`~ensdiv.data.paper.common.SUBSET_FILE`; each image file is checked when it is read
(a corrupt, truncated, empty or oversized file is a :class:`~ensdiv.errors.CorruptDataError` naming it;
see :mod:`ensdiv.data.paper.common`).
"""

from __future__ import annotations

import codecs
import pickle
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from torch.utils.data import Dataset

from ensdiv.data.paper.common import (  # noqa: F401 - re-exported
    _SOURCES,
    CIFAR_C_CORRUPTIONS,
    CIFAR_MEAN,
    CIFAR_STD,
    DTD_CLASSES,
    IMAGENET_MEAN,
    IMAGENET_STD,
    ArrayImageDataset,
    ImageFileDataset,
    _corrupt,
    _first_dir,
    _images_in,
    _missing,
    eval_transform,
)
from ensdiv.data.paper.imagenet import (  # noqa: F401 - re-exported
    _timm_list,
    _wnid_folder_set,
    imagenet_a,
    imagenet_c,
    imagenet_cbar,
    imagenet_o,
    imagenet_r,
    imagenet_v2,
    imagenet_val,
    imagenet_wnids,
)
from ensdiv.errors import DataNotFoundError, EnsdivError, unknown_name

__all__ = [
    "eval_transform",
    "ArrayImageDataset",
    "ImageFileDataset",
    "cifar",
    "cifar_c",
    "svhn",
    "imagenet_val",
    "imagenet_v2",
    "imagenet_c",
    "imagenet_cbar",
    "imagenet_r",
    "imagenet_a",
    "imagenet_o",
    "textures",
    "inaturalist_ood",
    "openimages_o",
    "imagenet_wnids",
    "PAPER_SETS",
    "load_paper_set",
    "CIFAR_C_CORRUPTIONS",
    "DTD_CLASSES",
    "load_pickle",
]


# ---------------------------------------------------------------- reading the published pickles safely
def _numpy_globals() -> dict[tuple[str, str], Any]:
    """The only globals a CIFAR pickle (python version) may name: numpy's array reconstruction."""
    core = getattr(np, "_core", None) or np.core
    multiarray = core.multiarray
    allowed: dict[tuple[str, str], Any] = {}
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray"):
        allowed[(mod, "_reconstruct")] = multiarray._reconstruct
        allowed[(mod, "scalar")] = multiarray.scalar
    for mod in ("numpy.core.numeric", "numpy._core.numeric"):
        allowed[(mod, "_frombuffer")] = core.numeric._frombuffer
    allowed[("numpy", "ndarray")] = np.ndarray
    allowed[("numpy", "dtype")] = np.dtype
    # Python 3 writes bytes at protocol < 3 as _codecs.encode(text, "latin1")
    allowed[("_codecs", "encode")] = codecs.encode
    return allowed


_ALLOWED_GLOBALS = _numpy_globals()


class _DataOnlyUnpickler(pickle.Unpickler):
    """An unpickler that builds only containers, strings, numbers and numpy arrays: any other global a
    pickle names (``os.system``, ``builtins.eval``, a class) is refused before it is looked up."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"refused the global {module}.{name}") from None


def load_pickle(path: Path, what: str, source_key: str) -> Any:
    """Read one published data pickle with :class:`_DataOnlyUnpickler` (no code runs while loading).

    Args:
        path: the file. what: the dataset's name for the message (``"CIFAR-10"``).
        source_key: where to get a good copy (a key of ``_SOURCES``).

    Raises:
        CorruptDataError: truncated, corrupt, or naming code or classes a data pickle never holds;
            one sentence naming the file and where to get a good copy.
    """
    try:
        with open(path, "rb") as fh:
            return _DataOnlyUnpickler(fh, encoding="bytes").load()
    except pickle.UnpicklingError as exc:
        why = str(exc)
        if why.startswith("refused the global"):
            code = why.removeprefix("refused the global ")
            why = f"names code ({code}), which a data pickle never holds, so it was not loaded"
        else:
            why = f"is not a valid pickle ({why})"
        raise _corrupt(what, path, why, source_key) from None
    except EOFError:
        raise _corrupt(what, path, "is truncated (the pickle ends early)", source_key) from None
    except (ValueError, TypeError, AttributeError, IndexError, KeyError, MemoryError, OverflowError) as exc:
        raise _corrupt(what, path, f"is not a valid pickle ({type(exc).__name__}: {exc})", source_key) from None


# ---------------------------------------------------------------- CIFAR, CIFAR-C, SVHN
def cifar(
    root: str | Path,
    *,
    name: str = "cifar10",
    split: str = "test",
    transform: Callable | None = None,
    data_config: Mapping[str, Any] | None = None,
) -> ArrayImageDataset:
    """CIFAR-10 or CIFAR-100 from the python pickle batches (``cifar-10-batches-py/``, ``cifar-100-python/``).

    Labels are the 10 classes or CIFAR-100's 100 fine labels.
    """
    root = Path(root)
    if name not in ("cifar10", "cifar100"):
        raise unknown_name("CIFAR dataset", name, ["cifar10", "cifar100"])
    if split not in ("train", "test"):
        raise unknown_name("CIFAR split", split, ["train", "test"])
    ten = name == "cifar10"
    files = (
        (["test_batch"] if split == "test" else [f"data_batch_{i}" for i in range(1, 6)]) if ten else [split]
    )
    sub = "cifar-10-batches-py" if ten else "cifar-100-python"
    folder = _first_dir(root, [sub, ""], lambda f: all((f / b).is_file() for b in files))
    if folder is None:
        raise _missing(name.upper().replace("CIFAR", "CIFAR-"), root, f"{sub}/ with {', '.join(files)}", name)
    what = name.upper().replace("CIFAR", "CIFAR-")
    label_key = b"labels" if ten else b"fine_labels"
    xs, ys = [], []
    for b in files:
        path = folder / b
        d = load_pickle(path, what, name)
        if not isinstance(d, dict) or b"data" not in d or label_key not in d:
            keys = [k.decode("latin1") if isinstance(k, bytes) else str(k) for k in d] if isinstance(d, dict) else []
            keys.sort()
            raise _corrupt(what, path, f"is not a {what} batch (it needs the keys data and {label_key.decode()}, "
                                       f"it has {', '.join(keys) or 'a ' + type(d).__name__})", name)
        data, labels = np.asarray(d[b"data"]), np.asarray(d[label_key])
        if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072 or labels.shape != (data.shape[0],):
            raise _corrupt(what, path, f"holds data of shape {data.shape} ({data.dtype}) and {labels.size} labels, "
                                       "not (N, 3072) uint8 with N labels", name)
        xs.append(data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
        ys.append(labels.astype(np.int64))
    tf = transform or eval_transform(data_config, default="cifar")
    return ArrayImageDataset(np.concatenate(xs), np.concatenate(ys), tf, name=f"{name}/{split}")


def cifar_c(
    root: str | Path,
    corruption: str,
    severity: int,
    *,
    name: str = "cifar10",
    transform: Callable | None = None,
    data_config: Mapping[str, Any] | None = None,
) -> ArrayImageDataset:
    """CIFAR-10-C / CIFAR-100-C: ``<corruption>.npy`` (5 severities stacked) and ``labels.npy``."""
    root = Path(root)
    if corruption not in CIFAR_C_CORRUPTIONS:
        raise unknown_name("CIFAR-C corruption", corruption, CIFAR_C_CORRUPTIONS)
    if severity not in (1, 2, 3, 4, 5):
        raise EnsdivError(f"CIFAR-C severity must be an integer 1-5, got {severity!r}.")
    sub = "CIFAR-10-C" if name == "cifar10" else "CIFAR-100-C"
    folder = _first_dir(root, [sub, ""], lambda f: (f / "labels.npy").is_file())
    if folder is None or not (folder / f"{corruption}.npy").is_file():
        raise _missing(sub, root, f"{sub}/{corruption}.npy and {sub}/labels.npy", f"{name}-c")
    images = _load_npy(folder / f"{corruption}.npy", sub, f"{name}-c", mmap=True)
    labels = _load_npy(folder / "labels.npy", sub, f"{name}-c", mmap=False)
    if images.ndim != 4 or images.shape[0] % 5 or images.shape[-1] != 3 or images.dtype != np.uint8:
        raise _corrupt(sub, folder / f"{corruption}.npy", f"holds an array of shape {images.shape} "
                       f"({images.dtype}), not (5n, 32, 32, 3) uint8", f"{name}-c")
    if labels.ndim != 1 or len(labels) != len(images):
        raise _corrupt(sub, folder / "labels.npy", f"holds {labels.shape} labels, not one per image of "
                                                   f"{corruption}.npy ({len(images)})", f"{name}-c")
    n = images.shape[0] // 5
    sl = slice((severity - 1) * n, severity * n)
    tf = transform or eval_transform(data_config, default="cifar")
    return ArrayImageDataset(
        np.ascontiguousarray(images[sl]), labels[sl], tf, name=f"{sub}/{corruption}/{severity}"
    )


def _load_npy(path: Path, what: str, source_key: str, *, mmap: bool) -> np.ndarray:
    """``np.load`` of a published ``.npy`` (never pickles); a truncated or corrupt file is one sentence."""
    try:
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, EOFError, OSError) as exc:
        raise _corrupt(what, path, f"is truncated or not a .npy array ({exc})", source_key) from None


def svhn(
    root: str | Path,
    *,
    split: str = "test",
    ood: bool = True,
    transform: Callable | None = None,
    data_config: Mapping[str, Any] | None = None,
) -> ArrayImageDataset:
    """SVHN (format 2, ``<split>_32x32.mat``).

    With ``ood=True`` every sample is labelled -1, else with its digit (SVHN's 10 becomes 0).
    """
    root = Path(root)
    fname = f"{split}_32x32.mat"
    folder = _first_dir(root, ["", "svhn", "SVHN"], lambda f: (f / fname).is_file())
    if folder is None:
        raise _missing("SVHN", root, fname, "svhn")
    from scipy.io import loadmat

    path = folder / fname
    try:
        mat = loadmat(path, variable_names=["X", "y"])
    except Exception as exc:  # noqa: BLE001 - scipy raises many kinds for a damaged .mat file
        why = f"is truncated or not a MATLAB file ({type(exc).__name__}: {exc})"
        raise _corrupt("SVHN", path, why, "svhn") from None
    x, y = mat.get("X"), mat.get("y")
    if x is None or y is None or x.ndim != 4 or x.shape[:3] != (32, 32, 3) or y.size != x.shape[3]:
        got = "no X and y" if x is None or y is None else f"X {x.shape} and y {y.shape}"
        why = f"is not SVHN format 2 (it needs X (32, 32, 3, N) and y (N, 1), it has {got})"
        raise _corrupt("SVHN", path, why, "svhn")
    images = np.ascontiguousarray(x.transpose(3, 0, 1, 2))
    labels = np.full(len(images), -1) if ood else y.reshape(-1) % 10
    tf = transform or eval_transform(data_config, default="cifar")
    return ArrayImageDataset(images, labels, tf, name=f"svhn/{split}")


def textures(
    root: str | Path, *, transform: Callable | None = None, data_config: Mapping[str, Any] | None = None
) -> ImageFileDataset:
    """Describable Textures (``dtd/images/<class>/*.jpg``, 47 classes): OOD, every label -1."""
    root = Path(root)
    folder = _first_dir(
        root, ["dtd/images", "images", ""], lambda f: any((f / c).is_dir() for c in DTD_CLASSES)
    )
    expected = "dtd/images/<class>/*.jpg with the 47 DTD class folders (banded, blotchy, ...)"
    if folder is None:
        raise _missing("Textures (DTD)", root, expected, "textures")
    return _wnid_folder_set(
        folder,
        "Textures (DTD)",
        "textures",
        expected,
        transform or eval_transform(data_config),
        valid=list(DTD_CLASSES),
        index=None,
        ood=True,
        noun="DTD classes",
    )


def _flat_ood(root, what, key, subs, transform, data_config) -> ImageFileDataset:
    root = Path(root)
    folder = _first_dir(root, subs, lambda f: bool(_images_in(f)))
    if folder is None:
        raise _missing(what, root, f"image files under {subs[0]}/", key)
    files = _images_in(folder)
    return ImageFileDataset(files, [-1] * len(files), transform or eval_transform(data_config), name=what, source=key)


def inaturalist_ood(
    root: str | Path, *, transform: Callable | None = None, data_config: Mapping[str, Any] | None = None
) -> ImageFileDataset:
    """The iNaturalist OOD subset of Huang & Li (``iNaturalist/images/*.jpg``, 10,000 images), labels -1."""
    return _flat_ood(
        root,
        "iNaturalist OOD",
        "inaturalist",
        ["iNaturalist/images", "iNaturalist", "images", ""],
        transform,
        data_config,
    )


def openimages_o(
    root: str | Path, *, transform: Callable | None = None, data_config: Mapping[str, Any] | None = None
) -> ImageFileDataset:
    """OpenImage-O of Wang et al. (``openimage_o/images/*.jpg``, 17,632 images), labels -1."""
    return _flat_ood(
        root,
        "OpenImages-O",
        "openimages-o",
        ["openimage_o/images", "openimage_o", "images", ""],
        transform,
        data_config,
    )


PAPER_SETS: dict[str, Callable[..., Dataset]] = {
    "cifar10": lambda root, **kw: cifar(root, name="cifar10", **kw),
    "cifar100": lambda root, **kw: cifar(root, name="cifar100", **kw),
    "cifar10-c": lambda root, **kw: cifar_c(root, name="cifar10", **kw),
    "cifar100-c": lambda root, **kw: cifar_c(root, name="cifar100", **kw),
    "svhn": svhn,
    "imagenet": imagenet_val,
    "imagenet-v2": imagenet_v2,
    "imagenet-c": imagenet_c,
    "imagenet-cbar": imagenet_cbar,
    "imagenet-r": imagenet_r,
    "imagenet-a": imagenet_a,
    "imagenet-o": imagenet_o,
    "textures": textures,
    "inaturalist": inaturalist_ood,
    "openimages-o": openimages_o,
}


def load_paper_set(name: str, root: str | Path, **kwargs: Any) -> Dataset:
    """Load a paper-scale set by name (``"cifar10"``, ``"imagenet-c"``, ...) from ``root``.

    Extra keyword arguments go to the loader (``corruption=``, ``severity=``, ``data_config=`` ...).
    """
    if name not in PAPER_SETS:
        raise unknown_name("paper-scale dataset", name, PAPER_SETS)
    if root is None or not Path(root).exists():
        raise DataNotFoundError(
            f"The data folder {root} for {name!r} does not exist; pass data_root=<folder holding "
            f"the data>; get it from {_SOURCES[name]}."
        )
    return PAPER_SETS[name](root, **kwargs)
