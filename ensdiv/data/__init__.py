"""Datasets as in-memory tensors: Fashion-MNIST, shift and OOD sets, paper-scale loaders."""

from ensdiv.data.fashion import FASHION_CLASSES, find_fashion_mnist, load_fashion_mnist
from ensdiv.data.registry import TensorSet, dataset_names, get_dataset, list_datasets, register_family

__all__ = [
    "FASHION_CLASSES",
    "TensorSet",
    "dataset_names",
    "find_fashion_mnist",
    "get_dataset",
    "list_datasets",
    "load_fashion_mnist",
    "register_family",
]
