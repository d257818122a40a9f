"""Fake paper-scale data in every published layout the loaders read, for dry runs and tests (issue #33).

:func:`write_fake_data` fills a folder that can stand for ``$ENSDIV_DATA`` with a few random images per class in
each layout of :mod:`ensdiv.data.paper.sets`, :mod:`~ensdiv.data.paper.tensors` and
:mod:`~ensdiv.data.paper.stream`:

============================================================  =====================================================
folder below the root                                         what is written
============================================================  =====================================================
``cifar-10-batches-py/``                                      ``data_batch_1..5``, ``test_batch`` (python pickles)
``cifar-100-python/``                                         ``train``, ``test`` (fine labels)
``svhn/``                                                     ``train_32x32.mat``, ``test_32x32.mat`` (format 2)
``CIFAR-10-C/``, ``CIFAR-100-C/``                             ``<corruption>.npy`` (19, 5 severities), ``labels.npy``
``imagenet/train/<wnid>/``, ``imagenet/val/<wnid>/``          JPEGs; the classes declared a subset
``imagenet-v2/imagenetv2-matched-frequency-format-val/<k>/``  JPEGs in class-index folders
``imagenet-c/<corruption>/<1-5>/<wnid>/``                     the 19 corruptions, val's file names
``imagenet-cbar/<corruption>/<strength>/<wnid>/``             the corruptions and strengths asked for, val's names
``imagenet-r/<wnid>/``, ``imagenet-a/<wnid>/``                classes of their 200-class lists
``imagenet-o/<wnid>/``                                        OOD
``iNaturalist/images/``, ``openimage_o/images/``              OOD, flat
``dtd/images/<class>/``                                       two of DTD's 47 classes, declared
============================================================  =====================================================

The ImageNet-family sets share ``wnids`` (by default four classes that are in ImageNet-R's and ImageNet-A's lists
as well as ImageNet-1k's), so a model's 1000-class logits can be scored on every one of them. Images are random
RGB noise of a few sizes (the loaders' transforms resize them), seeded: the same call writes the same files.

:func:`write_training_methods` writes the training-methods chapter's logits/features folder for a model
population the caller names (its layout: :data:`ensdiv.chapters.training_methods.paper.PAPER_LAYOUT`).
"""

from __future__ import annotations

import ast
import hashlib
import pickle
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from ensdiv.data.corruptions import CBAR_CORRUPTIONS
from ensdiv.data.paper.common import CIFAR_C_CORRUPTIONS, DTD_CLASSES, declare_class_subset
from ensdiv.data.paper.imagenet import _timm_list
from ensdiv.errors import InvalidInputError
from ensdiv.tracing import strip_docstrings

__all__ = ["generator_hash", "default_wnids", "write_images", "write_fake_data", "is_fake_data",
           "write_training_methods"]

_STAMP = ".ensdiv-fake-data"


def generator_hash(path: str | Path | None = None) -> str:
    """A hash of this generator's code (the module at ``path``, this file by default; docstrings and comments
    left out): a dry-run folder written by other generator code is rewritten, and the dry-run ledger re-runs the
    pages (no version number kept by hand). ``""`` when the file cannot be read."""
    try:
        tree = ast.parse(Path(path or __file__).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return ""
    return hashlib.sha256(ast.dump(strip_docstrings(tree)).encode()).hexdigest()


def default_wnids(n: int = 4) -> list[str]:
    """The first ``n`` ImageNet-1k wnids that are also in ImageNet-R's and ImageNet-A's 200-class lists."""
    both = set(_timm_list("imagenet_r_synsets.txt")) & set(_timm_list("imagenet_a_synsets.txt"))
    return [w for w in _timm_list("imagenet_synsets.txt") if w in both][:n]


def write_images(folder: Path, n: int, seed: int, *, ext: str = "JPEG", prefix: str = "img") -> list[Path]:
    """``n`` random RGB images ``<prefix><i>.<ext>`` of different heights (40 + 4 i) by 48 px in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(n):
        path = folder / f"{prefix}{i}.{ext}"
        Image.fromarray(rng.integers(0, 256, (40 + 4 * i, 48, 3), dtype=np.uint8)).save(path)
        paths.append(path)
    return paths


def _pixels(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)


def _pickle(path: Path, data: np.ndarray, labels: np.ndarray, key: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    flat = np.ascontiguousarray(data.transpose(0, 3, 1, 2)).reshape(len(data), 3072)
    with open(path, "wb") as fh:
        pickle.dump({b"data": flat, key: [int(v) for v in labels]}, fh, protocol=2)


def _cifar(root: Path, rng: np.random.Generator, per_class: int, corrupted: int) -> None:
    ten, hundred = np.arange(10).repeat(per_class), np.arange(100).repeat(per_class)
    for i in range(1, 6):
        _pickle(root / "cifar-10-batches-py" / f"data_batch_{i}", _pixels(rng, len(ten)), ten, b"labels")
    _pickle(root / "cifar-10-batches-py" / "test_batch", _pixels(rng, len(ten)), ten, b"labels")
    for split in ("train", "test"):
        _pickle(root / "cifar-100-python" / split, _pixels(rng, len(hundred)), hundred, b"fine_labels")
    from scipy.io import savemat

    (root / "svhn").mkdir(parents=True, exist_ok=True)
    for split in ("train", "test"):
        x = _pixels(rng, len(ten)).transpose(1, 2, 3, 0)  # (32, 32, 3, N)
        savemat(root / "svhn" / f"{split}_32x32.mat", {"X": x, "y": (ten.reshape(-1, 1) % 10) + 1})
    for sub, classes in (("CIFAR-10-C", 10), ("CIFAR-100-C", 100)):
        folder = root / sub
        folder.mkdir(parents=True, exist_ok=True)
        labels = np.tile(np.arange(corrupted) % classes, 5).astype(np.int64)
        np.save(folder / "labels.npy", labels)
        for c in CIFAR_C_CORRUPTIONS:
            np.save(folder / f"{c}.npy", _pixels(rng, 5 * corrupted))


def _class_folders(folder: Path, classes: Sequence[str], n: int, seed: int, *, ext: str = "JPEG") -> None:
    for k, c in enumerate(classes):
        write_images(folder / c, n, seed + k, ext=ext)
    declare_class_subset(folder, classes)


def write_fake_data(root: str | Path, *, wnids: Sequence[str] | None = None, train_per_class: int = 4,
                    val_per_class: int = 5, per_class: int = 2, cifar_per_class: int = 1, corrupted: int = 20,
                    cbar_levels: Mapping[str, Sequence[float]] | None = None, seed: int = 0) -> Path:
    """Write fake data in every layout of the module's table below ``root``; returns ``root``.

    Args:
        root: the folder (created); it can be used as ``$ENSDIV_DATA``.
        wnids: the ImageNet classes of every ImageNet-family set (default :func:`default_wnids`); those of
            ImageNet-R / -A must be in their 200-class lists.
        train_per_class, val_per_class: images per class of ImageNet train and val (``imagenet/val-5k`` takes
            five per class, so ``val_per_class`` >= 5 keeps its size rule).
        per_class: images per class of every other folder set (ImageNet-V2, -R, -A, -O, DTD) and of the flat OOD
            folders (``per_class`` x the number of wnids). ImageNet-C and -C̄ hold ``val_per_class`` images per
            class under val's file names, as the published sets hold every validation image corrupted.
        cifar_per_class: images per class of CIFAR-10/-100 and SVHN (each CIFAR-10 training batch holds that many).
        corrupted: images per severity of CIFAR-10-C / CIFAR-100-C.
        cbar_levels: ImageNet-C̄ corruption -> the strength folders to write (default: every corruption of
            ``CBAR_CORRUPTIONS`` at strength 1.0).
        seed: the images' random seed.

    Raises:
        InvalidInputError: fewer than one image per class, or a C̄ corruption that does not exist.
    """
    if min(train_per_class, val_per_class, per_class, cifar_per_class, corrupted) < 1:
        raise InvalidInputError("Fake data needs at least one image per class and per severity.")
    levels = dict(cbar_levels) if cbar_levels is not None else {c: [1.0] for c in CBAR_CORRUPTIONS}
    unknown = sorted(set(levels) - set(CBAR_CORRUPTIONS))
    if unknown:
        raise InvalidInputError(f"Unknown ImageNet-C-bar corruption(s) {', '.join(unknown)}; known: "
                                f"{', '.join(CBAR_CORRUPTIONS)}.")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    wnids = list(wnids or default_wnids())
    rng = np.random.default_rng(seed)
    _cifar(root, rng, cifar_per_class, corrupted)
    _class_folders(root / "imagenet" / "train", wnids, train_per_class, seed + 100)
    _class_folders(root / "imagenet" / "val", wnids, val_per_class, seed + 200)
    index = {w: i for i, w in enumerate(_timm_list("imagenet_synsets.txt"))}
    _class_folders(root / "imagenet-v2" / "imagenetv2-matched-frequency-format-val", [str(index[w]) for w in wnids],
                   per_class, seed + 300, ext="jpeg")
    for j, c in enumerate(CIFAR_C_CORRUPTIONS):
        for sev in range(1, 6):
            _class_folders(root / "imagenet-c" / c / str(sev), wnids, val_per_class, seed + 1000 + 10 * j + sev)
    for j, (c, strengths) in enumerate(sorted(levels.items())):
        for t in strengths:
            _class_folders(root / "imagenet-cbar" / c / f"{float(t)}", wnids, val_per_class, seed + 2000 + 10 * j)
    _class_folders(root / "imagenet-r", wnids, per_class, seed + 400, ext="jpg")
    _class_folders(root / "imagenet-a", wnids, per_class, seed + 500, ext="jpg")
    _class_folders(root / "imagenet-o", wnids, per_class, seed + 600, ext="jpg")
    write_images(root / "iNaturalist" / "images", per_class * len(wnids), seed + 700, ext="jpg")
    write_images(root / "openimage_o" / "images", per_class * len(wnids), seed + 800, ext="jpg")
    _class_folders(root / "dtd" / "images", list(DTD_CLASSES[:2]), per_class, seed + 900, ext="jpg")
    (root / _STAMP).write_text(f"{generator_hash()}\n")
    return root


def is_fake_data(root: str | Path) -> bool:
    """Whether ``root`` was written by :func:`write_fake_data` as its code is now (:func:`generator_hash`)."""
    stamp = Path(root) / _STAMP
    return stamp.is_file() and stamp.read_text().strip() == generator_hash()


def write_training_methods(root: str | Path, models: Sequence[tuple[str, str, str, float]], *, n: int = 40,
                           classes: int = 1000, dim: int = 16, down_classes: int = 20,
                           splits: Sequence[str] = ("train", "val", "test", "down-train", "down-val", "down-test"),
                           seed: int = 0) -> Path:
    """The training-methods logits/features folder: ``models.csv`` (name, category, role), ``labels_<split>.npy``,
    and per model ``logits_<split>.npy`` (val, test: ``(n, classes)``) and ``features_<split>.npy`` (every split:
    ``(n, dim)``); the ``down-*`` splits' labels are ``(n, down_classes)`` 0/1 indicators (multi-label, as Pascal
    VOC's). Returns ``root``.

    Args:
        models: ``(name, category, role, accuracy)``: a model's logits put the label first on a seeded random
            ``accuracy`` fraction of each split's samples (so a population can sit inside or outside a band of
            accuracies, as the paper's does); a name with ``/`` is a nested folder, as the loader reads it.

    Raises:
        InvalidInputError: no model, not exactly one with role ``base``, or an accuracy outside [0, 1].
    """
    if not models or sum(m[2] == "base" for m in models) != 1:
        raise InvalidInputError("The training-methods population needs models with exactly one role 'base'.")
    if any(not 0.0 <= m[3] <= 1.0 for m in models):
        raise InvalidInputError("A fake model's accuracy must lie in [0, 1].")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    (root / "models.csv").write_text("name,category,role\n" + "".join(f"{m},{c},{r}\n" for m, c, r, _ in models))
    labels = {}
    for split in splits:
        if split.startswith("down-"):
            lab = (rng.random((n, down_classes)) < 0.2).astype(np.int64)
            lab[np.arange(n), np.arange(n) % down_classes] = 1  # every sample has a positive class
        else:
            lab = np.arange(n) % classes
        labels[split] = lab
        np.save(root / f"labels_{split}.npy", lab)
    for name, _, _, accuracy in models:
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        for split in splits:
            np.save(folder / f"features_{split}.npy", rng.standard_normal((n, dim)).astype(np.float32))
            if split in ("val", "test"):
                logits = rng.standard_normal((n, classes)).astype(np.float32)
                right = rng.permutation(n)[: int(round(accuracy * n))]
                logits[right, labels[split][right]] = logits[right].max(1) + 1.0
                np.save(folder / f"logits_{split}.npy", logits)
    return root
