"""ensdiv — helpers for an executable book on ensemble diversity in deep learning.

A flat public API over a layered package (data → models → losses → train → predict → metrics →
ensembles → transfer → report; ``tests/test_layers.py`` checks that no layer imports a higher one)::

    import ensdiv as ed
    recipe = ed.Recipe.make(model="small_cnn", epochs=3, seed=0)
    logits = ed.predict(recipe, "fmnist/test")          # trained once, cached
    ed.metrics.disagreement(logits.argmax(-1)[None])     # every measure of the five papers
    ed.report.claim(...)                                 # the book's one verdict rule

The book's chapters (pipelines and presets) live in :mod:`ensdiv.chapters`, which this package never
imports.
"""

import ensdiv.tracing  # noqa: F401 - first: under ensdiv run/book, records the package code a page runs
from ensdiv import (  # reads: under ensdiv run/book, records the data folders a page reads
    analysis,
    attacks,
    data,
    ensembles,
    losses,
    metrics,
    models,
    reads,
    report,
    store,
    train,
    transfer,
)
from ensdiv.analysis import trend_line
from ensdiv.attacks import apgd, mi_fgsm, pgd, run_attack
from ensdiv.config import SCALES, Config
from ensdiv.data import (
    TensorSet,
    corrupt,
    get_dataset,
    list_corruptions,
    list_datasets,
    load_fashion_mnist,
    load_paper_set,
)
from ensdiv.errors import (
    CacheError,
    CorruptDataError,
    DataNotFoundError,
    EnsdivError,
    InvalidInputError,
    UnknownNameError,
)
from ensdiv.models import (
    InputSpec,
    MemberStack,
    PackedConv2d,
    PackedLinear,
    count_mult_adds,
    count_params,
    create_model,
    list_models,
    model_info,
    register_model,
    to_members,
)
from ensdiv.paths import build_dir, project_root, results_dir
from ensdiv.predict import cached_predictions, predict, predict_many
from ensdiv.store import Store, cached, default_store
from ensdiv.train import (
    Arch,
    DataSpec,
    Distill,
    Heads,
    Joint,
    Optim,
    Pretrain,
    Recipe,
    Seeds,
    Supervised,
    fit,
    train_recipe,
)
from ensdiv.transfer import SatResult, sat_by_source, sat_matrix, sat_one_side

__version__ = "0.2.0"

__all__ = [
    "SCALES",
    "Arch",
    "CacheError",
    "Config",
    "CorruptDataError",
    "DataNotFoundError",
    "DataSpec",
    "Distill",
    "EnsdivError",
    "Heads",
    "InputSpec",
    "InvalidInputError",
    "Joint",
    "MemberStack",
    "Optim",
    "PackedConv2d",
    "PackedLinear",
    "Pretrain",
    "Recipe",
    "SatResult",
    "Seeds",
    "Store",
    "Supervised",
    "TensorSet",
    "UnknownNameError",
    "analysis",
    "apgd",
    "attacks",
    "build_dir",
    "cached",
    "cached_predictions",
    "corrupt",
    "count_mult_adds",
    "count_params",
    "create_model",
    "data",
    "default_store",
    "ensembles",
    "fit",
    "get_dataset",
    "list_corruptions",
    "list_datasets",
    "list_models",
    "load_fashion_mnist",
    "load_paper_set",
    "losses",
    "metrics",
    "mi_fgsm",
    "model_info",
    "models",
    "pgd",
    "predict",
    "predict_many",
    "project_root",
    "register_model",
    "reads",
    "report",
    "results_dir",
    "run_attack",
    "sat_by_source",
    "sat_matrix",
    "sat_one_side",
    "store",
    "to_members",
    "train",
    "train_recipe",
    "transfer",
    "trend_line",
]
