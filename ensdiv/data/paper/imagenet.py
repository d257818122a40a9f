"""Paper-scale ImageNet-family loaders: val, V2, -C, -C̄, -R, -A, -O (see :mod:`ensdiv.data.paper.sets`).

Every set must have all of its classes, each a folder holding images: ImageNet train, val, -C and -C̄
the 1000 ImageNet-1k wnids, ImageNetV2 the folders ``0`` to ``999``, ImageNet-R and -A their 200 wnids
(timm's lists). ImageNet-O's 200 folders are only checked to be wnids (no list of them ships with timm,
and its labels are all -1). A folder that deliberately holds fewer classes declares them in
:data:`~ensdiv.data.paper.common.SUBSET_FILE` (see :mod:`ensdiv.data.paper.common`); labels stay in the
1000-class order.
"""

from __future__ import annotations

import pkgutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from ensdiv.data.corruptions import C_CORRUPTIONS, CBAR_CORRUPTIONS, _canonical
from ensdiv.data.paper.common import (
    CIFAR_C_CORRUPTIONS,
    ImageFileDataset,
    _class_folders,
    _first_dir,
    _images_in,
    _missing,
    _shown,
    eval_transform,
)  # fmt: skip
from ensdiv.errors import EnsdivError, unknown_name

__all__ = ["imagenet_wnids", "imagenet_train", "imagenet_val", "imagenet_v2", "imagenet_c", "imagenet_cbar",
           "imagenet_r", "imagenet_a", "imagenet_o"]  # fmt: skip


def imagenet_wnids(imagenet_root: str | Path | None = None) -> list[str]:
    """The 1000 ImageNet wnids in class-index order.

    The sorted class folders of ``imagenet_root`` (or its ``val/``) when given (all 1000 wnids, or a
    declared class subset), else timm's ImageNet-1k list (the same, standard order).
    """
    if imagenet_root is not None:
        folder = _imagenet_class_root(Path(imagenet_root))
        return _class_folders(folder, "ImageNet val", "imagenet", "val/<wnid>/*.JPEG with the 1000 ImageNet wnids",
                              _timm_list("imagenet_synsets.txt"), noun="ImageNet val wnids")
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
        raise _missing(
            "ImageNet val", root, "val/<wnid>/*.JPEG class folders such as val/n01440764/", "imagenet"
        )
    return folder


def _wnid_folder_set(
    folder: Path,
    what: str,
    key: str,
    expected: str,
    transform,
    *,
    valid: list[str],
    index: dict[str, int] | None,
    ood: bool = False,
    mask: bool = False,
    complete: bool = True,
    noun: str | None = None,
    name: str | None = None,
) -> ImageFileDataset:
    """The images of ``folder/<class>/``, its class folders checked by :func:`_class_folders` (all of
    ``valid``, or a declared subset) and each holding at least one image."""
    classes = _class_folders(folder, what, key, expected, valid, noun=noun or f"{what} wnids", complete=complete)
    files, targets, empty = [], [], []
    for wnid in classes:
        imgs = _images_in(folder / wnid)
        files += imgs
        targets += [-1 if ood else index[wnid]] * len(imgs)
        if not imgs:
            empty.append(wnid)
    if empty:
        raise _missing(what, folder, f"{expected} (class folders without images: {_shown(empty)})", key)
    cm = torch.tensor([index[w] for w in classes]) if mask else None
    return ImageFileDataset(files, targets, transform, name=name or what, classes=classes, class_mask=cm, source=key)


def imagenet_val(
    root: str | Path, *, transform: Callable | None = None, data_config: Mapping[str, Any] | None = None
) -> ImageFileDataset:
    """ImageNet-1k validation in class folders (``val/<wnid>/*.JPEG``); labels in the 1000-class order."""
    folder = _imagenet_class_root(Path(root))
    wnids = _timm_list("imagenet_synsets.txt")
    index = {w: i for i, w in enumerate(wnids)}
    return _wnid_folder_set(
        folder,
        "ImageNet val",
        "imagenet",
        "val/<wnid>/*.JPEG",
        transform or eval_transform(data_config),
        valid=wnids,
        index=index,
    )


def imagenet_train(
    root: str | Path, *, transform: Callable | None = None, data_config: Mapping[str, Any] | None = None
) -> ImageFileDataset:
    """ImageNet-1k training split in class folders (``train/<wnid>/*.JPEG``, or ``<wnid>/`` in ``root`` itself);
    labels in the 1000-class order."""
    root = Path(root)
    folder = _first_dir(root, ["train", ""], lambda f: bool(_wnid_dirs(f)))
    expected = "train/<wnid>/*.JPEG class folders such as train/n01440764/"
    if folder is None:
        raise _missing("ImageNet train", root, expected, "imagenet")
    wnids = _timm_list("imagenet_synsets.txt")
    return _wnid_folder_set(folder, "ImageNet train", "imagenet", expected, transform or eval_transform(data_config),
                            valid=wnids, index={w: i for i, w in enumerate(wnids)})


def imagenet_v2(
    root: str | Path,
    *,
    variant: str = "matched-frequency",
    transform: Callable | None = None,
    data_config: Mapping[str, Any] | None = None,
) -> ImageFileDataset:
    """ImageNetV2 (``imagenetv2-<variant>-format-val/<class index 0-999>/*.jpeg``, all 1000 folders)."""
    root = Path(root)
    sub = f"imagenetv2-{variant}-format-val"
    folder = _first_dir(root, [sub, ""], lambda f: any(p.is_dir() and p.name.isdigit() for p in f.iterdir()))
    expected = f"{sub}/<class index 0-999>/*.jpeg"
    if folder is None:
        raise _missing("ImageNetV2", root, expected, "imagenet-v2")
    index = {str(i): i for i in range(1000)}
    return _wnid_folder_set(folder, "ImageNetV2", "imagenet-v2", expected, transform or eval_transform(data_config),
                            valid=list(index), index=index, noun="ImageNetV2 classes (a class index 0-999)",
                            name=f"imagenet-v2/{variant}")


def _corruption_folder(root: Path, corruption: str, level: str, what: str, key: str, layout: str) -> Path:
    for base in [root, *(root / g for g in ("noise", "blur", "weather", "digital", "extra"))]:
        if (base / corruption).is_dir():
            levels = [p for p in (base / corruption).iterdir() if p.is_dir()]
            for p in levels:
                if p.name == level or (_num(p.name) is not None and _num(p.name) == _num(level)):
                    return p
            raise _missing(
                what,
                base / corruption,
                f"{layout} with level folder {level} "
                f"(found {', '.join(sorted(p.name for p in levels)) or 'none'})",
                key,
            )
    raise _missing(what, root, layout, key)


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def imagenet_c(
    root: str | Path,
    corruption: str,
    severity: int,
    *,
    transform: Callable | None = None,
    data_config: Mapping[str, Any] | None = None,
) -> ImageFileDataset:
    """ImageNet-C: ``<corruption>/<severity 1-5>/<wnid>/*.JPEG`` (optionally under noise/, blur/, ...)."""

    if corruption not in CIFAR_C_CORRUPTIONS:
        raise unknown_name("ImageNet-C corruption", corruption, C_CORRUPTIONS + CIFAR_C_CORRUPTIONS[15:])
    if severity not in (1, 2, 3, 4, 5):
        raise EnsdivError(f"ImageNet-C severity must be an integer 1-5, got {severity!r}.")
    layout = f"{corruption}/{severity}/<wnid>/*.JPEG"
    folder = _corruption_folder(Path(root), corruption, str(severity), "ImageNet-C", "imagenet-c", layout)
    wnids = _timm_list("imagenet_synsets.txt")
    return _wnid_folder_set(
        folder,
        "ImageNet-C",
        "imagenet-c",
        layout,
        transform or eval_transform(data_config),
        valid=wnids,
        index={w: i for i, w in enumerate(wnids)},
    )


def imagenet_cbar(
    root: str | Path,
    corruption: str,
    strength: float,
    *,
    transform: Callable | None = None,
    data_config: Mapping[str, Any] | None = None,
) -> ImageFileDataset:
    """ImageNet-C̄: ``<corruption>/<strength>/<wnid>/*.JPEG`` (strength folders such as ``1.6``, ``4.0``)."""

    name = _canonical(corruption)
    if name not in CBAR_CORRUPTIONS:
        raise unknown_name("ImageNet-C-bar corruption", corruption, CBAR_CORRUPTIONS)
    layout = f"{name}/{strength}/<wnid>/*.JPEG"
    folder = _corruption_folder(Path(root), name, str(strength), "ImageNet-C-bar", "imagenet-cbar", layout)
    wnids = _timm_list("imagenet_synsets.txt")
    return _wnid_folder_set(
        folder,
        "ImageNet-C-bar",
        "imagenet-cbar",
        layout,
        transform or eval_transform(data_config),
        valid=wnids,
        index={w: i for i, w in enumerate(wnids)},
    )


def _subset200(root, what, key, sub, synsets, transform, data_config, imagenet_root) -> ImageFileDataset:
    root = Path(root)
    folder = _first_dir(root, [sub, ""], lambda f: bool(_wnid_dirs(f)))
    wnids = imagenet_wnids(imagenet_root)
    index = {w: i for i, w in enumerate(wnids)}
    return _wnid_folder_set(
        folder or root / sub,
        what,
        key,
        f"{sub}/<wnid>/*.jpg with its 200 class folders",
        transform or eval_transform(data_config),
        valid=[w for w in _timm_list(synsets) if w in index],
        index=index,
        mask=True,
    )


def imagenet_r(
    root: str | Path,
    *,
    transform: Callable | None = None,
    data_config: Mapping[str, Any] | None = None,
    imagenet_root: str | Path | None = None,
) -> ImageFileDataset:
    """ImageNet-R (``imagenet-r/<wnid>/*.jpg``, 200 classes); see the module docstring for ``class_mask``."""
    return _subset200(
        root,
        "ImageNet-R",
        "imagenet-r",
        "imagenet-r",
        "imagenet_r_synsets.txt",
        transform,
        data_config,
        imagenet_root,
    )


def imagenet_a(
    root: str | Path,
    *,
    transform: Callable | None = None,
    data_config: Mapping[str, Any] | None = None,
    imagenet_root: str | Path | None = None,
) -> ImageFileDataset:
    """ImageNet-A (``imagenet-a/<wnid>/*.jpg``, 200 classes); see the module docstring for ``class_mask``."""
    return _subset200(
        root,
        "ImageNet-A",
        "imagenet-a",
        "imagenet-a",
        "imagenet_a_synsets.txt",
        transform,
        data_config,
        imagenet_root,
    )


def imagenet_o(
    root: str | Path, *, transform: Callable | None = None, data_config: Mapping[str, Any] | None = None
) -> ImageFileDataset:
    """ImageNet-O (``imagenet-o/<wnid>/*.jpg``): OOD for ImageNet-1k models, every label -1.

    Its class folders must be wnids holding images; which 200 wnids is not checked (no list ships with
    timm, and the labels do not depend on them).
    """
    root = Path(root)
    folder = _first_dir(root, ["imagenet-o", ""], lambda f: bool(_wnid_dirs(f)))
    if folder is None:
        raise _missing("ImageNet-O", root, "imagenet-o/<wnid>/*.jpg", "imagenet-o")
    wnids = [p.name for p in folder.iterdir()]
    return _wnid_folder_set(
        folder,
        "ImageNet-O",
        "imagenet-o",
        "imagenet-o/<wnid>/*.jpg",
        transform or eval_transform(data_config),
        valid=[w for w in wnids if _is_wnid(w)],
        index=None,
        ood=True,
        complete=False,
    )
