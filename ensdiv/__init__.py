"""ensdiv — helpers for an executable book on ensemble diversity in deep learning.

A flat public API::

    import ensdiv as ed
    cfg = ed.preset("foundations/deep_ensemble_basics", "cpu")
    recipe = ed.Recipe(model="small_cnn", epochs=3, seed=0)
    logits = ed.predict(recipe, "fmnist/test")          # trained once, cached
    ed.metrics.disagreement(preds)                       # every measure of the five papers
"""

from ensdiv import attacks, data, ensembles, metrics, packed, packed_study, sat_release, similarity, store, zoo
from ensdiv.attacks import mi_fgsm, pgd
from ensdiv.config import SCALES, Config, list_presets, preset
from ensdiv.data import (
    TensorSet,
    corrupt,
    get_dataset,
    list_corruptions,
    list_datasets,
    load_fashion_mnist,
    load_paper_set,
)
from ensdiv.errors import CacheError, DataNotFoundError, EnsdivError, UnknownNameError
from ensdiv.models import create_model, list_models, model_info, register_model
from ensdiv.packed import (
    PackedConv2d,
    PackedLinear,
    count_mult_adds,
    count_params,
    packed_param_count,
    to_members,
)
from ensdiv.paths import build_dir, project_root, results_dir
from ensdiv.predict import predict, predict_many
from ensdiv.recipes import Recipe
from ensdiv.similarity import SatResult, sat_matrix, sat_one_side
from ensdiv.store import Store, cached, default_store
from ensdiv.train import fit, train_recipe
from ensdiv.zoo import ZOO, zoo_build, zoo_list, zoo_recipes

__version__ = "0.1.0"

__all__ = [
    "ZOO",
    "zoo",
    "zoo_build",
    "zoo_list",
    "zoo_recipes",
    "PackedConv2d",
    "PackedLinear",
    "count_mult_adds",
    "count_params",
    "packed",
    "packed_param_count",
    "packed_study",
    "to_members",
    "SCALES",
    "CacheError",
    "Config",
    "DataNotFoundError",
    "EnsdivError",
    "Recipe",
    "SatResult",
    "Store",
    "TensorSet",
    "UnknownNameError",
    "attacks",
    "build_dir",
    "cached",
    "corrupt",
    "create_model",
    "data",
    "default_store",
    "ensembles",
    "fit",
    "get_dataset",
    "list_corruptions",
    "list_datasets",
    "list_models",
    "list_presets",
    "load_fashion_mnist",
    "load_paper_set",
    "metrics",
    "mi_fgsm",
    "pgd",
    "model_info",
    "predict",
    "predict_many",
    "preset",
    "project_root",
    "register_model",
    "results_dir",
    "sat_matrix",
    "sat_one_side",
    "sat_release",
    "similarity",
    "store",
    "train_recipe",
]
