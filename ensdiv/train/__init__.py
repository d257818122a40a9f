"""Training: recipes as data, the Fabric loop, optimisers and schedules, augmentation, training methods.

``Recipe`` (five parts: :class:`Arch`, :class:`DataSpec`, :class:`Optim`, :class:`Seeds` and a method —
:class:`Supervised`, :class:`Distill`, :class:`Pretrain`, :class:`Joint`, :class:`Heads`) says what to
train; :func:`train_recipe` trains it once and caches it; :func:`fit` is the loop itself.
"""

from ensdiv.train import probe  # noqa: F401 - ed.train.probe: linear probes on frozen features
from ensdiv.train.augment import BatchAugment
from ensdiv.train.batches import LoaderBatches, training_transform
from ensdiv.train.build import (
    build_model,
    load_training_set,
    model_cache_config,
    train_recipe,
    training_data,
    training_images,
)
from ensdiv.train.engine import derive_seed, lr_factor, make_fabric, make_optimizer, moved, seed_everything
from ensdiv.train.frameworks import SimCLR, pretrain_and_probe, set_classifier, simclr_views
from ensdiv.train.loop import FitReport, cpu_state, fit
from ensdiv.train.recipes import (
    AUGMENTATIONS,
    METHODS,
    OPTIMIZERS,
    SCHEDULES,
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
)

__all__ = [
    "LoaderBatches",
    "training_transform",
    "AUGMENTATIONS",
    "METHODS",
    "OPTIMIZERS",
    "SCHEDULES",
    "Arch",
    "BatchAugment",
    "DataSpec",
    "Distill",
    "FitReport",
    "Heads",
    "Joint",
    "Optim",
    "Pretrain",
    "Recipe",
    "Seeds",
    "SimCLR",
    "Supervised",
    "build_model",
    "cpu_state",
    "derive_seed",
    "fit",
    "load_training_set",
    "training_data",
    "training_images",
    "lr_factor",
    "make_fabric",
    "make_optimizer",
    "model_cache_config",
    "pretrain_and_probe",
    "seed_everything",
    "moved",
    "set_classifier",
    "simclr_views",
    "train_recipe",
]
