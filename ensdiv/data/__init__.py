"""Datasets as in-memory tensors: Fashion-MNIST, shift and OOD sets, pre-training sources, corruptions,
paper-scale loaders.

Importing this package imports every module that registers a family of sets, so the registry
(``get_dataset``, ``list_datasets``) is complete after ``import ensdiv``.
"""

from ensdiv.data import glyphs, heldout, ood_sets, shifts, sources, textures  # noqa: F401 - register their families
from ensdiv.data.corruptions import PAPER_CBAR, corrupt, list_corruptions
from ensdiv.data.fashion import FASHION_CLASSES, find_fashion_mnist, load_fashion_mnist
from ensdiv.data.paper import PAPER_SETS, eval_transform, load_paper_set
from ensdiv.data.registry import TensorSet, dataset_names, get_dataset, list_datasets, register_family
from ensdiv.data.shifts import NOISE_KINDS, RENDITION_STYLES, build_all_shift_sets, shift_images, shift_set_names
from ensdiv.errors import CorruptDataError

__all__ = [
    "CorruptDataError",
    "FASHION_CLASSES",
    "PAPER_CBAR",
    "PAPER_SETS",
    "TensorSet",
    "build_all_shift_sets",
    "corrupt",
    "dataset_names",
    "eval_transform",
    "find_fashion_mnist",
    "get_dataset",
    "list_corruptions",
    "list_datasets",
    "load_fashion_mnist",
    "load_paper_set",
    "register_family",
    "shift_images",
    "shift_set_names",
    "NOISE_KINDS",
    "RENDITION_STYLES",
]
