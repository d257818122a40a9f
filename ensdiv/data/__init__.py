"""Datasets as in-memory tensors: Fashion-MNIST, shift and OOD sets, paper-scale loaders."""

from ensdiv.data.corruptions import PAPER_CBAR, corrupt, list_corruptions
from ensdiv.data.fashion import FASHION_CLASSES, find_fashion_mnist, load_fashion_mnist
from ensdiv.data.paper_sets import PAPER_SETS, eval_transform, load_paper_set
from ensdiv.data.registry import TensorSet, dataset_names, get_dataset, list_datasets, register_family
from ensdiv.data.shifts import build_all_shift_sets, shift_set_names

__all__ = [
    "FASHION_CLASSES",
    "PAPER_CBAR",
    "PAPER_SETS",
    "build_all_shift_sets",
    "corrupt",
    "eval_transform",
    "list_corruptions",
    "load_paper_set",
    "shift_set_names",
    "TensorSet",
    "dataset_names",
    "find_fashion_mnist",
    "get_dataset",
    "list_datasets",
    "load_fashion_mnist",
    "register_family",
]
