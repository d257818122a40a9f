"""The cache key of a trained model: which recipe, which training data, which code version.

Kept apart from :mod:`ensdiv.train.build` so that the trainers it dispatches to (the streamed heads of
:mod:`ensdiv.train.stream`) key their models the same way without importing it.
"""

from __future__ import annotations

from typing import Any

from ensdiv.data.registry import dataset_names, registered_fingerprint
from ensdiv.models.registry import is_registered, model_info
from ensdiv.train.recipes import Recipe

__all__ = ["TRAIN_VERSION", "model_cache_config"]

TRAIN_VERSION = 2


def _datasets_of(node: Any, found: set[str]) -> set[str]:
    """Every ``dataset`` named in a recipe key (its own, a pre-training source's, a teacher's, a backbone's)."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "dataset" and isinstance(v, str) and v:
                found.add(v)
            else:
                _datasets_of(v, found)
    elif isinstance(node, list | tuple):
        for v in node:
            _datasets_of(v, found)
    return found


def model_cache_config(recipe: Recipe) -> dict[str, Any]:
    """The store config of the trained model of ``recipe`` (also keys its predictions).

    Holds the engine version, the recipe's key, the content fingerprint of every registered training
    set it reads (:func:`ensdiv.data.registry.registered_fingerprint`: other data, other model) and,
    when not 1, the registered model's code version.
    """
    key = recipe.key()
    names = set(dataset_names())
    data = {n: registered_fingerprint(n) for n in sorted(_datasets_of(key, set())) if n in names}
    cfg: dict[str, Any] = {"version": TRAIN_VERSION, "recipe": key, "data": data}
    if is_registered(recipe.model.name):
        version = model_info(recipe.model.name).version
        if version != 1:
            cfg["model_version"] = version
    return cfg
