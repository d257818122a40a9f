"""Paper-scale sets read image by image from ``$ENSDIV_DATA`` (ImageNet train/val and its shift and OOD sets).

ImageNet does not fit in memory, so these sets are not registry :class:`~ensdiv.data.registry.TensorSet`\\ s:
a name opens a :class:`torch.utils.data.Dataset` of one of :mod:`ensdiv.data.paper.sets`'s loaders, with
the evaluation transform of the model that will read it (its timm data config). Recipes and chapters
name them like registry sets (``DataSpec.dataset``, ``Heads.ood_set``); :mod:`ensdiv.train.stream` computes
their features batch by batch. Every folder lies below ``$ENSDIV_DATA`` (default ``data/`` in the project
root), as the table says (ImageNet's ``train/`` and ``val/`` may also lie in ``$ENSDIV_DATA`` itself):

======================================  ==============================================  =====================
name                                    folder below ``$ENSDIV_DATA``                   labels
======================================  ==============================================  =====================
``imagenet/train``                      ``imagenet/train/<wnid>/*.JPEG``                1000-class indices
``imagenet/val``                        ``imagenet/val/<wnid>/*.JPEG``                  1000-class indices
``imagenet-c/<corruption>/<severity>``  ``imagenet-c/<corruption>/<severity>/<wnid>/``  1000-class indices
``imagenet-cbar/<corruption>/<strength>``  ``imagenet-cbar/<corruption>/<strength>/``   1000-class indices
                                        ``<wnid>/`` (strength folders ``1.6``, ``4.0``)
``imagenet-r``, ``imagenet-a``          ``imagenet-r/<wnid>/``, ``imagenet-a/<wnid>/``  1000-class indices;
                                                                                        ``class_mask``
``imagenet-o``                          ``imagenet-o/<wnid>/``                          -1 (OOD)
``imagenet-v2``                         ``imagenet-v2/imagenetv2-*-format-val/<k>/``    1000-class indices
``inaturalist``                         ``iNaturalist/images/*.jpg``                    -1 (OOD)
``openimages-o``                        ``openimage_o/images/*.jpg``                    -1 (OOD)
``textures``                            ``dtd/images/<class>/*.jpg``                    -1 (OOD)
======================================  ==============================================  =====================

ImageNet-V2's ``imagenetv2-matched-frequency-format-val/`` may lie in ``$ENSDIV_DATA/imagenet-v2/`` (where the
design-diversity chapter and ``ensdiv fetch data`` look) or in ``$ENSDIV_DATA`` itself.

A missing folder raises the loader's :class:`~ensdiv.errors.DataNotFoundError`, one sentence naming the
folder searched, the layout expected and where to get the data. :func:`stream_fingerprint` is the
content key of an opened set, independent of where the data lies.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset

from ensdiv.data.fashion import data_home
from ensdiv.data.paper import sets
from ensdiv.data.paper.imagenet import imagenet_train, imagenet_wnids
from ensdiv.data.registry import TensorSet, subset_indices
from ensdiv.errors import InvalidInputError, unknown_name

__all__ = ["STREAM_SETS", "is_stream_set", "open_stream_set", "stream_fingerprint", "stream_files",
           "stream_files_fingerprint", "transform_config", "PIXEL_CONFIG", "stream_tensor_set", "stream_file_keys"]

#: family -> (its folder below $ENSDIV_DATA, loader(root, data_config, *name parts))
STREAM_SETS: dict[str, tuple[str, Any]] = {
    "imagenet/train": ("imagenet", lambda root, dc: imagenet_train(root, data_config=dc)),
    "imagenet/val": ("imagenet", lambda root, dc: sets.imagenet_val(root, data_config=dc)),
    "imagenet-c": ("imagenet-c", lambda root, dc, corruption, severity: sets.imagenet_c(
        root, corruption, int(severity), data_config=dc)),
    "imagenet-cbar": ("imagenet-cbar", lambda root, dc, corruption, strength: sets.imagenet_cbar(
        root, corruption, float(strength), data_config=dc)),
    "imagenet-r": ("imagenet-r", lambda root, dc: sets.imagenet_r(root, data_config=dc)),
    "imagenet-a": ("imagenet-a", lambda root, dc: sets.imagenet_a(root, data_config=dc)),
    "imagenet-o": ("imagenet-o", lambda root, dc: sets.imagenet_o(root, data_config=dc)),
    "imagenet-v2": ("imagenet-v2", lambda root, dc: sets.imagenet_v2(root, data_config=dc)),
    "inaturalist": ("iNaturalist", lambda root, dc: sets.inaturalist_ood(root, data_config=dc)),
    "openimages-o": ("openimage_o", lambda root, dc: sets.openimages_o(root, data_config=dc)),
    "textures": ("dtd", lambda root, dc: sets.textures(root, data_config=dc)),
}
#: the families named with a corruption and a level (``imagenet-c/fog/3``), never alone
_LEVELLED = ("imagenet-c", "imagenet-cbar")
_NAMES = [*(n for n in STREAM_SETS if n not in _LEVELLED), "imagenet-c/<corruption>/<severity>",
          "imagenet-cbar/<corruption>/<strength>"]
_TRANSFORM_KEYS = ("input_size", "interpolation", "mean", "std", "crop_pct", "crop_mode")
_OPENED: dict[str, Dataset] = {}


def _split(name: str) -> tuple[str, list[str]] | None:
    """(family, extra parts) of a stream set name, or None when ``name`` is not one."""
    if name in STREAM_SETS and name not in _LEVELLED:
        return name, []
    family, _, rest = name.partition("/")
    parts = rest.split("/")
    if family == "imagenet-c" and len(parts) == 2 and parts[1].isdigit():
        return family, parts
    if family == "imagenet-cbar" and len(parts) == 2 and _is_number(parts[1]):
        return family, parts
    return None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def is_stream_set(name: str) -> bool:
    """Whether ``name`` is a paper-scale set read from folders (see the module table)."""
    return isinstance(name, str) and _split(name) is not None


def transform_config(data_config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The fields of a timm data config that decide the evaluation transform, JSON-safe (tuples as lists)."""
    return {k: list(v) if isinstance(v, tuple | list) else v
            for k, v in sorted((data_config or {}).items()) if k in _TRANSFORM_KEYS}


def _root_of(name: str) -> Path:
    """The folder of the stream set ``name`` below ``$ENSDIV_DATA``."""
    parsed = _split(name)
    if parsed is None:
        raise unknown_name("paper-scale stream set", name, _NAMES)
    home = Path(data_home())
    sub = STREAM_SETS[parsed[0]][0]
    # only ImageNet train/val and V2's named folder may lie in $ENSDIV_DATA itself (their loaders look for their
    # own sub-folders): the OOD loaders would take any image below it
    return home if sub in ("imagenet", "imagenet-v2") and not (home / sub).is_dir() else home / sub


def open_stream_set(name: str, *, data_config: Mapping[str, Any] | None = None) -> Dataset:
    """The set ``name`` from ``$ENSDIV_DATA``, transformed by :func:`ensdiv.data.paper.eval_transform` of
    ``data_config`` (a timm data config; ``None``: 224 px, ImageNet mean/std). Opened once per process,
    ``$ENSDIV_DATA`` and transform (listing ImageNet train's 1.28 M files takes a while).

    Raises:
        UnknownNameError: not a stream set name (the message lists them).
        DataNotFoundError: the folder is missing or mis-laid-out (one sentence from the loader).
    """
    root = _root_of(name)
    family, parts = _split(name)
    loader = STREAM_SETS[family][1]
    memo = json.dumps([name, str(root), transform_config(data_config)])
    if memo not in _OPENED:
        _OPENED[memo] = loader(root, dict(data_config) if data_config else None, *parts)
    return _OPENED[memo]


def stream_fingerprint(name: str, dataset: Dataset, data_config: Mapping[str, Any] | None = None) -> str:
    """Content key of an opened stream set, the same wherever its folder lies: SHA-256 of the set name, the
    number of files, every file's path relative to the set's folder with its label, and the transform.

    Raises:
        InvalidInputError: ``dataset`` does not list its files (not an image-folder set).
    """
    files, targets = getattr(dataset, "files", None), getattr(dataset, "targets", None)
    if files is None or targets is None:
        raise InvalidInputError(f"The set {name!r} lists no image files, so it cannot be fingerprinted.")
    paths = [str(f) for f in files]
    cut = len(os.path.commonpath([os.path.dirname(p) for p in paths])) + 1 if paths else 0  # the set's folder
    h = hashlib.sha256(json.dumps([name, len(paths), transform_config(data_config)]).encode())
    for p, t in zip(paths, targets, strict=True):
        h.update(f"{p[cut:]}\t{int(t)}\n".encode())
    return h.hexdigest()


_FILE_KEYS: dict[str, str] = {}


def stream_files(name: str) -> Dataset:
    """The set ``name`` as already opened by :func:`open_stream_set` with any transform (its files and labels
    are the same whatever the transform; listing ImageNet train takes a while), else opened with the default
    one. A caller that reads images sets its own transform on a copy."""
    root = str(_root_of(name))
    opened = [ds for key, ds in _OPENED.items() if json.loads(key)[:2] == [name, root]]
    return opened[0] if opened else open_stream_set(name)


def stream_files_fingerprint(name: str) -> str:
    """:func:`stream_fingerprint` of the set ``name`` with no transform named: its files and labels, whatever
    transform a model reads them through (the key of a full model trained on the set). Computed once per
    process and ``$ENSDIV_DATA``."""
    dataset = stream_files(name)
    files = getattr(dataset, "files", [])
    memo = json.dumps([name, str(files[0]) if len(files) else "", len(dataset)])
    if memo not in _FILE_KEYS:
        _FILE_KEYS[memo] = stream_fingerprint(name, dataset, None)
    return _FILE_KEYS[memo]


#: the evaluation framing of :func:`stream_tensor_set`: 224 px centre crop of the image resized to 256 (crop
#: fraction 0.875), bilinear, no mean/std normalisation ([0, 1] pixels, as every registry set)
PIXEL_CONFIG = {"input_size": (3, 224, 224), "crop_pct": 0.875, "interpolation": "bilinear", "crop_mode": "center",
                "mean": (0.0, 0.0, 0.0), "std": (1.0, 1.0, 1.0)}


def stream_tensor_set(name: str, n: int = 0, *, seed: int = 0, rows: Sequence[int] | None = None) -> TensorSet:
    """``n`` images (0: all) of the stream set ``name`` drawn with ``seed`` as an in-memory
    :class:`~ensdiv.data.TensorSet` framed by :data:`PIXEL_CONFIG` (shape (n, 3, 224, 224), [0, 1]): an
    evaluation set for pages that score registry sets (``ed.predict``) at paper scale. Labels are the set's own:
    1000-class indices (ImageNet-R / -A: indices of their 200 classes among the 1000, scored 1000-way unless the
    page masks the logits), -1 for an OOD set. ``rows`` takes exactly those images, in that order, instead of a
    seeded draw (the images of another set paired by :func:`stream_file_keys`). Built once per process,
    ``$ENSDIV_DATA``, name, size and seed (or rows).

    Raises:
        UnknownNameError: not a stream set. DataNotFoundError: its folder is missing or mis-laid-out.
        InvalidInputError: a row outside the set.
    """
    return _stream_tensor_set(name, int(n), int(seed), None if rows is None else tuple(int(r) for r in rows),
                              str(data_home()))


@lru_cache(maxsize=4)
def _stream_tensor_set(name: str, n: int, seed: int, rows: tuple[int, ...] | None, home: str) -> TensorSet:
    ds = open_stream_set(name, data_config=PIXEL_CONFIG)
    if rows is None:
        idx = subset_indices(len(ds), n, seed=seed).tolist()
        label = name if len(idx) == len(ds) else f"{name}[{n}@{seed}]"
        drawn = f"seed {seed}"
    else:
        idx = list(rows)
        if any(not 0 <= r < len(ds) for r in idx):
            raise InvalidInputError(f"Rows of {name!r} must lie in [0, {len(ds)}); got {min(idx)}..{max(idx)}.")
        digest = hashlib.sha256(json.dumps(idx).encode()).hexdigest()[:12]
        label, drawn = f"{name}[rows-{digest}]", "rows given"
    x = torch.stack([ds[i][0] for i in idx]).float() if idx else torch.empty(0, 3, 224, 224)
    y = torch.tensor([int(ds.targets[i]) for i in idx], dtype=torch.long)
    return TensorSet(x, y, label, imagenet_wnids(), f"{name} from {home}, {len(idx)} images ({drawn})")


def stream_file_keys(name: str) -> list[str]:
    """``<class folder>/<file name without extension>`` of every image of the stream set ``name``, in the set's
    order: the key that pairs an image of ImageNet-C or -C̄ with the validation image it was made from (the
    published sets keep the validation file names; the extension may differ, ``.JPEG`` / ``.jpg``)."""
    return [f"{Path(f).parent.name}/{Path(f).stem}" for f in stream_files(name).files]
