"""The cache key of a trained model: which recipe and which training data (the code that trained it is recorded
in the entry and checked on load: :mod:`ensdiv.store`).

Kept apart from :mod:`ensdiv.train.build` so that the trainers it dispatches to (the streamed heads of
:mod:`ensdiv.train.stream`) key their models the same way without importing it.
"""

from __future__ import annotations

from typing import Any

from ensdiv.data.paper.stream import is_stream_set, stream_files_fingerprint
from ensdiv.data.registry import dataset_names, registered_fingerprint
from ensdiv.train.recipes import Heads, Recipe

__all__ = ["model_cache_config"]


def _datasets_of(node: Any, found: set[str]) -> set[str]:
    """Every set named in a recipe key: its own ``dataset``, a pre-training source's, a teacher's, a backbone's,
    and a Heads method's unlabeled ``ood_set`` (the naive methods train on it, so its content is part of the
    model)."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("dataset", "ood_set") and isinstance(v, str) and v:
                found.add(v)
            else:
                _datasets_of(v, found)
    elif isinstance(node, list | tuple):
        for v in node:
            _datasets_of(v, found)
    return found


def model_cache_config(recipe: Recipe, *, trained: bool = True) -> dict[str, Any]:
    """The store config of the trained model of ``recipe`` (also keys its predictions).

    Holds the recipe's key, the content fingerprint of every registered training
    set it reads (:func:`ensdiv.data.registry.registered_fingerprint`: other data, other model; for a
    full model on a stream set such as ``imagenet/train``, its files and labels:
    :func:`ensdiv.data.paper.stream.stream_files_fingerprint`, unless ``trained=False``: a pretrained
    backbone used frozen, never trained on its set). The code that trains and builds the model is not in the
    key: the entry records it and a load checks it (:mod:`ensdiv.store`).
    """
    key = recipe.key()
    names = set(dataset_names())
    data = {n: registered_fingerprint(n) for n in sorted(_datasets_of(key, set())) if n in names}
    if trained and is_stream_set(recipe.data.dataset) and not isinstance(recipe.method, Heads):
        # a full model trained on image folders (heads on them are keyed by train.stream.stream_model_config)
        data[recipe.data.dataset] = stream_files_fingerprint(recipe.data.dataset)
    return {"recipe": key, "data": data}
