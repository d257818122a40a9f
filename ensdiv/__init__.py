"""ensdiv — helpers for an executable book on ensemble diversity in deep learning.

A flat public API::

    import ensdiv as ed
    cfg = ed.preset("foundations/deep_ensemble_basics", "cpu")
    train = ed.data.load_fashion_mnist("train")
"""

from ensdiv import data, store
from ensdiv.config import SCALES, Config, list_presets, preset
from ensdiv.data import get_dataset, list_datasets, load_fashion_mnist
from ensdiv.errors import CacheError, DataNotFoundError, EnsdivError, UnknownNameError
from ensdiv.paths import build_dir, project_root, results_dir
from ensdiv.store import Store, cached, default_store

__version__ = "0.1.0"

__all__ = [
    "SCALES",
    "CacheError",
    "Config",
    "DataNotFoundError",
    "EnsdivError",
    "Store",
    "UnknownNameError",
    "build_dir",
    "cached",
    "data",
    "default_store",
    "get_dataset",
    "list_datasets",
    "list_presets",
    "load_fashion_mnist",
    "preset",
    "project_root",
    "results_dir",
    "store",
]
