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
"""

from __future__ import annotations

import pickle
import pkgutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from ensdiv.errors import DataNotFoundError, EnsdivError, unknown_name

__all__ = [
    "eval_transform", "ArrayImageDataset", "ImageFileDataset", "cifar", "cifar_c", "svhn", "imagenet_val",
    "imagenet_v2", "imagenet_c", "imagenet_cbar", "imagenet_r", "imagenet_a", "imagenet_o", "textures",
    "inaturalist_ood", "openimages_o", "imagenet_wnids", "PAPER_SETS", "load_paper_set",
    "CIFAR_C_CORRUPTIONS", "DTD_CLASSES",
]  # fmt: skip

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
CIFAR_MEAN, CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
IMAGE_EXTS = {".jpg", ".jpeg", ".png", ".bmp", ".webp"}
CIFAR_C_CORRUPTIONS = (
    "gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur", "motion_blur", "zoom_blur",
    "snow", "frost", "fog", "brightness", "contrast", "elastic_transform", "pixelate", "jpeg_compression",
    "speckle_noise", "gaussian_blur", "spatter", "saturate",
)  # fmt: skip
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
    return DataNotFoundError(f"{what} was not found at {root}: expected {expected}; get it from {_SOURCES[key]}.")


def eval_transform(data_config: Mapping[str, Any] | None = None, *, default: str = "imagenet") -> Callable:
    """The evaluation transform of a model, from its timm data config.

    Args:
        data_config: a dict as returned by ``timm.data.resolve_data_config`` (keys ``input_size``,
            ``mean``, ``std``, ``crop_pct``, ``interpolation``, optionally ``crop_mode``), or ``None``.
        default: with no config: ``"imagenet"`` (224 px, resize 256 + centre crop, ImageNet mean/std)
            or ``"cifar"`` (no resize, CIFAR mean/std).

    Returns:
        A callable PIL image -> float tensor (3, H, W), normalised.
    """
    if data_config is None and default == "cifar":
        from torchvision.transforms import v2

        return v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(CIFAR_MEAN, CIFAR_STD)])
    from timm.data import create_transform

    cfg = {"input_size": (3, 224, 224), "interpolation": "bilinear", "mean": IMAGENET_MEAN,
           "std": IMAGENET_STD, "crop_pct": 0.875}  # fmt: skip
    cfg.update({k: v for k, v in (data_config or {}).items()
                if k in ("input_size", "interpolation", "mean", "std", "crop_pct", "crop_mode")})  # fmt: skip
    return create_transform(**cfg, is_training=False)


class ArrayImageDataset(Dataset):
    """Images held as a uint8 array (N, H, W, 3) with integer labels, transformed on access."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, transform: Callable | None = None, *, name: str = ""):
        self.images, self.targets, self.transform, self.name = images, np.asarray(labels, dtype=np.int64), transform, name

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

    def __init__(self, files: list[Path], targets: list[int], transform: Callable | None = None, *,
                 name: str = "", classes: list[str] | None = None, class_mask: torch.Tensor | None = None):  # fmt: skip
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


# ---------------------------------------------------------------- CIFAR, CIFAR-C, SVHN
def cifar(root: str | Path, *, name: str = "cifar10", split: str = "test", transform: Callable | None = None,
          data_config: Mapping[str, Any] | None = None) -> ArrayImageDataset:  # fmt: skip
    """CIFAR-10 or CIFAR-100 from the python-pickle batches (``cifar-10-batches-py/``, ``cifar-100-python/``)."""
    root = Path(root)
    if name not in ("cifar10", "cifar100"):
        raise unknown_name("CIFAR dataset", name, ["cifar10", "cifar100"])
    if split not in ("train", "test"):
        raise unknown_name("CIFAR split", split, ["train", "test"])
    ten = name == "cifar10"
    files = (["test_batch"] if split == "test" else [f"data_batch_{i}" for i in range(1, 6)]) if ten else [split]
    sub = "cifar-10-batches-py" if ten else "cifar-100-python"
    folder = _first_dir(root, [sub, ""], lambda f: all((f / b).is_file() for b in files))
    if folder is None:
        raise _missing(name.upper().replace("CIFAR", "CIFAR-"), root, f"{sub}/ with {', '.join(files)}", name)
    xs, ys = [], []
    for b in files:
        with open(folder / b, "rb") as fh:
            d = pickle.load(fh, encoding="bytes")
        xs.append(np.asarray(d[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
        ys.append(np.asarray(d[b"labels" if ten else b"fine_labels"]))
    tf = transform or eval_transform(data_config, default="cifar")
    return ArrayImageDataset(np.concatenate(xs), np.concatenate(ys), tf, name=f"{name}/{split}")


def cifar_c(root: str | Path, corruption: str, severity: int, *, name: str = "cifar10",
            transform: Callable | None = None, data_config: Mapping[str, Any] | None = None) -> ArrayImageDataset:  # fmt: skip
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
    images = np.load(folder / f"{corruption}.npy", mmap_mode="r")
    labels = np.load(folder / "labels.npy")
    if images.ndim != 4 or images.shape[0] % 5 or images.shape[-1] != 3 or len(labels) != len(images):
        raise EnsdivError(f"{folder / corruption}.npy must be (5n, 32, 32, 3) uint8 with n labels per severity, "
                          f"got {images.shape} and {len(labels)} labels.")  # fmt: skip
    n = images.shape[0] // 5
    sl = slice((severity - 1) * n, severity * n)
    tf = transform or eval_transform(data_config, default="cifar")
    return ArrayImageDataset(np.ascontiguousarray(images[sl]), labels[sl], tf, name=f"{sub}/{corruption}/{severity}")


def svhn(root: str | Path, *, split: str = "test", ood: bool = True, transform: Callable | None = None,
         data_config: Mapping[str, Any] | None = None) -> ArrayImageDataset:  # fmt: skip
    """SVHN (format 2, ``<split>_32x32.mat``); ``ood=True`` labels every sample -1, else the digit (10 -> 0)."""
    root = Path(root)
    fname = f"{split}_32x32.mat"
    folder = _first_dir(root, ["", "svhn", "SVHN"], lambda f: (f / fname).is_file())
    if folder is None:
        raise _missing("SVHN", root, fname, "svhn")
    from scipy.io import loadmat

    mat = loadmat(folder / fname)
    images = np.ascontiguousarray(mat["X"].transpose(3, 0, 1, 2))
    labels = np.full(len(images), -1) if ood else mat["y"].reshape(-1) % 10
    tf = transform or eval_transform(data_config, default="cifar")
    return ArrayImageDataset(images, labels, tf, name=f"svhn/{split}")


# ---------------------------------------------------------------- ImageNet family
def imagenet_wnids(imagenet_root: str | Path | None = None) -> list[str]:
    """The 1000 ImageNet wnids in class-index order: sorted folders of ``imagenet_root``'s val, else timm's list."""
    if imagenet_root is not None:
        folder = _imagenet_class_root(Path(imagenet_root))
        return sorted(p.name for p in folder.iterdir() if p.is_dir())
    return _timm_list("imagenet_synsets.txt")


def _timm_list(fname: str) -> list[str]:
    data = pkgutil.get_data("timm", f"data/_info/{fname}")
    return [line.split()[0] for line in data.decode().splitlines() if line.strip()]


def _is_wnid(name: str) -> bool:
    return len(name) == 9 and name[0] == "n" and name[1:].isdigit()


def _wnid_dirs(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir() and _is_wnid(p.name))


def _imagenet_class_root(root: Path) -> Path:
    folder = _first_dir(root, ["val", ""], lambda f: bool(_wnid_dirs(f)))
    if folder is None:
        raise _missing("ImageNet val", root, "val/<wnid>/*.JPEG class folders such as val/n01440764/", "imagenet")
    return folder


def _wnid_folder_set(folder: Path, what: str, key: str, expected: str, transform, *, valid: list[str],
                     index: dict[str, int] | None, ood: bool = False, mask: bool = False) -> ImageFileDataset:  # fmt: skip
    dirs = [p for p in folder.iterdir() if p.is_dir()] if folder.is_dir() else []
    if not dirs:
        raise _missing(what, folder, expected, key)
    bad = sorted(p.name for p in dirs if p.name not in set(valid))
    if bad:
        raise EnsdivError(f"{what} at {folder} has class folders that are not {what} wnids ({', '.join(bad[:5])}); "
                          f"expected {expected}.")  # fmt: skip
    files, targets, classes = [], [], sorted(p.name for p in dirs)
    for wnid in classes:
        imgs = _images_in(folder / wnid)
        files += imgs
        targets += [-1 if ood else index[wnid]] * len(imgs)
    if not files:
        raise _missing(what, folder, expected + " (the class folders hold no images)", key)
    cm = torch.tensor([index[w] for w in classes]) if mask else None
    return ImageFileDataset(files, targets, transform, name=what, classes=classes, class_mask=cm)


def imagenet_val(root: str | Path, *, transform: Callable | None = None,
                 data_config: Mapping[str, Any] | None = None) -> ImageFileDataset:  # fmt: skip
    """ImageNet-1k validation in class folders (``val/<wnid>/*.JPEG``); labels in the 1000-class order."""
    folder = _imagenet_class_root(Path(root))
    wnids = _timm_list("imagenet_synsets.txt")
    index = {w: i for i, w in enumerate(wnids)}
    return _wnid_folder_set(folder, "ImageNet val", "imagenet", "val/<wnid>/*.JPEG", transform or eval_transform(data_config),
                            valid=wnids, index=index)  # fmt: skip


def imagenet_v2(root: str | Path, *, variant: str = "matched-frequency", transform: Callable | None = None,
                data_config: Mapping[str, Any] | None = None) -> ImageFileDataset:  # fmt: skip
    """ImageNetV2 (``imagenetv2-<variant>-format-val/<class index 0-999>/*.jpeg``)."""
    root = Path(root)
    sub = f"imagenetv2-{variant}-format-val"
    folder = _first_dir(root, [sub, ""], lambda f: any(p.is_dir() and p.name.isdigit() for p in f.iterdir()))
    expected = f"{sub}/<class index 0-999>/*.jpeg"
    if folder is None:
        raise _missing("ImageNetV2", root, expected, "imagenet-v2")
    files, targets = [], []
    for d in sorted((p for p in folder.iterdir() if p.is_dir()), key=lambda p: p.name):
        if not d.name.isdigit() or not 0 <= int(d.name) < 1000:
            raise EnsdivError(f"ImageNetV2 folder {d} is not a class index 0-999; expected {expected}.")
        imgs = _images_in(d)
        files += imgs
        targets += [int(d.name)] * len(imgs)
    return ImageFileDataset(files, targets, transform or eval_transform(data_config), name=f"imagenet-v2/{variant}")


def _corruption_folder(root: Path, corruption: str, level: str, what: str, key: str, layout: str) -> Path:
    for base in [root, *(root / g for g in ("noise", "blur", "weather", "digital", "extra"))]:
        if (base / corruption).is_dir():
            levels = [p for p in (base / corruption).iterdir() if p.is_dir()]
            for p in levels:
                if p.name == level or (_num(p.name) is not None and _num(p.name) == _num(level)):
                    return p
            raise _missing(what, base / corruption, f"{layout} with level folder {level} "
                           f"(found {', '.join(sorted(p.name for p in levels)) or 'none'})", key)  # fmt: skip
    raise _missing(what, root, layout, key)


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def imagenet_c(root: str | Path, corruption: str, severity: int, *, transform: Callable | None = None,
               data_config: Mapping[str, Any] | None = None) -> ImageFileDataset:  # fmt: skip
    """ImageNet-C: ``<corruption>/<severity 1-5>/<wnid>/*.JPEG`` (optionally under noise/, blur/, ...)."""
    from ensdiv.data.corruptions import C_CORRUPTIONS

    if corruption not in CIFAR_C_CORRUPTIONS:
        raise unknown_name("ImageNet-C corruption", corruption, C_CORRUPTIONS + CIFAR_C_CORRUPTIONS[15:])
    if severity not in (1, 2, 3, 4, 5):
        raise EnsdivError(f"ImageNet-C severity must be an integer 1-5, got {severity!r}.")
    layout = f"{corruption}/{severity}/<wnid>/*.JPEG"
    folder = _corruption_folder(Path(root), corruption, str(severity), "ImageNet-C", "imagenet-c", layout)
    wnids = _timm_list("imagenet_synsets.txt")
    return _wnid_folder_set(folder, "ImageNet-C", "imagenet-c", layout, transform or eval_transform(data_config),
                            valid=wnids, index={w: i for i, w in enumerate(wnids)})  # fmt: skip


def imagenet_cbar(root: str | Path, corruption: str, strength: float, *, transform: Callable | None = None,
                  data_config: Mapping[str, Any] | None = None) -> ImageFileDataset:  # fmt: skip
    """ImageNet-C̄: ``<corruption>/<strength>/<wnid>/*.JPEG`` (strength folders such as ``1.6``, ``4.0``)."""
    from ensdiv.data.corruptions import CBAR_CORRUPTIONS, _canonical

    name = _canonical(corruption)
    if name not in CBAR_CORRUPTIONS:
        raise unknown_name("ImageNet-C-bar corruption", corruption, CBAR_CORRUPTIONS)
    layout = f"{name}/{strength}/<wnid>/*.JPEG"
    folder = _corruption_folder(Path(root), name, str(strength), "ImageNet-C-bar", "imagenet-cbar", layout)
    wnids = _timm_list("imagenet_synsets.txt")
    return _wnid_folder_set(folder, "ImageNet-C-bar", "imagenet-cbar", layout, transform or eval_transform(data_config),
                            valid=wnids, index={w: i for i, w in enumerate(wnids)})  # fmt: skip


def _subset200(root, what, key, sub, synsets, transform, data_config, imagenet_root) -> ImageFileDataset:
    root = Path(root)
    folder = _first_dir(root, [sub, ""], lambda f: bool(_wnid_dirs(f)))
    wnids = imagenet_wnids(imagenet_root)
    index = {w: i for i, w in enumerate(wnids)}
    return _wnid_folder_set(folder or root / sub, what, key, f"{sub}/<wnid>/*.jpg with 200 class folders",
                            transform or eval_transform(data_config), valid=[w for w in _timm_list(synsets) if w in index],
                            index=index, mask=True)  # fmt: skip


def imagenet_r(root: str | Path, *, transform: Callable | None = None, data_config: Mapping[str, Any] | None = None,
               imagenet_root: str | Path | None = None) -> ImageFileDataset:  # fmt: skip
    """ImageNet-R (``imagenet-r/<wnid>/*.jpg``, 200 classes); see the module docstring for ``class_mask``."""
    return _subset200(root, "ImageNet-R", "imagenet-r", "imagenet-r", "imagenet_r_synsets.txt", transform,
                      data_config, imagenet_root)  # fmt: skip


def imagenet_a(root: str | Path, *, transform: Callable | None = None, data_config: Mapping[str, Any] | None = None,
               imagenet_root: str | Path | None = None) -> ImageFileDataset:  # fmt: skip
    """ImageNet-A (``imagenet-a/<wnid>/*.jpg``, 200 classes); see the module docstring for ``class_mask``."""
    return _subset200(root, "ImageNet-A", "imagenet-a", "imagenet-a", "imagenet_a_synsets.txt", transform,
                      data_config, imagenet_root)  # fmt: skip


def imagenet_o(root: str | Path, *, transform: Callable | None = None,
               data_config: Mapping[str, Any] | None = None) -> ImageFileDataset:  # fmt: skip
    """ImageNet-O (``imagenet-o/<wnid>/*.jpg``): OOD for ImageNet-1k models, every label -1."""
    root = Path(root)
    folder = _first_dir(root, ["imagenet-o", ""], lambda f: bool(_wnid_dirs(f)))
    if folder is None:
        raise _missing("ImageNet-O", root, "imagenet-o/<wnid>/*.jpg", "imagenet-o")
    wnids = [p.name for p in folder.iterdir() if p.is_dir()]
    return _wnid_folder_set(folder, "ImageNet-O", "imagenet-o", "imagenet-o/<wnid>/*.jpg",
                            transform or eval_transform(data_config), valid=[w for w in wnids if _is_wnid(w)],
                            index=None, ood=True)  # fmt: skip


def textures(root: str | Path, *, transform: Callable | None = None,
             data_config: Mapping[str, Any] | None = None) -> ImageFileDataset:  # fmt: skip
    """Describable Textures (``dtd/images/<class>/*.jpg``, 47 classes): OOD, every label -1."""
    root = Path(root)
    folder = _first_dir(root, ["dtd/images", "images", ""], lambda f: any((f / c).is_dir() for c in DTD_CLASSES))
    expected = "dtd/images/<class>/*.jpg with the 47 DTD class folders (banded, blotchy, ...)"
    if folder is None:
        raise _missing("Textures (DTD)", root, expected, "textures")
    return _wnid_folder_set(folder, "Textures (DTD)", "textures", expected, transform or eval_transform(data_config),
                            valid=list(DTD_CLASSES), index=None, ood=True)  # fmt: skip


def _flat_ood(root, what, key, subs, transform, data_config) -> ImageFileDataset:
    root = Path(root)
    folder = _first_dir(root, subs, lambda f: bool(_images_in(f)))
    if folder is None:
        raise _missing(what, root, f"image files under {subs[0]}/", key)
    files = _images_in(folder)
    return ImageFileDataset(files, [-1] * len(files), transform or eval_transform(data_config), name=what)


def inaturalist_ood(root: str | Path, *, transform: Callable | None = None,
                    data_config: Mapping[str, Any] | None = None) -> ImageFileDataset:  # fmt: skip
    """The iNaturalist OOD subset of Huang & Li (``iNaturalist/images/*.jpg``, 10,000 images), labels -1."""
    return _flat_ood(root, "iNaturalist OOD", "inaturalist", ["iNaturalist/images", "iNaturalist", "images", ""],
                     transform, data_config)  # fmt: skip


def openimages_o(root: str | Path, *, transform: Callable | None = None,
                 data_config: Mapping[str, Any] | None = None) -> ImageFileDataset:  # fmt: skip
    """OpenImage-O of Wang et al. (``openimage_o/images/*.jpg``, 17,632 images), labels -1."""
    return _flat_ood(root, "OpenImages-O", "openimages-o", ["openimage_o/images", "openimage_o", "images", ""],
                     transform, data_config)  # fmt: skip


PAPER_SETS: dict[str, Callable[..., Dataset]] = {
    "cifar10": lambda root, **kw: cifar(root, name="cifar10", **kw),
    "cifar100": lambda root, **kw: cifar(root, name="cifar100", **kw),
    "cifar10-c": lambda root, **kw: cifar_c(root, name="cifar10", **kw),
    "cifar100-c": lambda root, **kw: cifar_c(root, name="cifar100", **kw),
    "svhn": svhn, "imagenet": imagenet_val, "imagenet-v2": imagenet_v2, "imagenet-c": imagenet_c,
    "imagenet-cbar": imagenet_cbar, "imagenet-r": imagenet_r, "imagenet-a": imagenet_a, "imagenet-o": imagenet_o,
    "textures": textures, "inaturalist": inaturalist_ood, "openimages-o": openimages_o,
}  # fmt: skip


def load_paper_set(name: str, root: str | Path, **kwargs: Any) -> Dataset:
    """Load a paper-scale set by name (``"cifar10"``, ``"imagenet-c"``, ...) from ``root``.

    Extra keyword arguments go to the loader (``corruption=``, ``severity=``, ``data_config=`` ...).
    """
    if name not in PAPER_SETS:
        raise unknown_name("paper-scale dataset", name, PAPER_SETS)
    if root is None or not Path(root).exists():
        raise DataNotFoundError(f"The data folder {root} for {name!r} does not exist; pass data_root=<folder holding "
                                f"the data>; get it from {_SOURCES[name]}.")  # fmt: skip
    return PAPER_SETS[name](root, **kwargs)
