"""Predictions (logits) and penultimate features of trained models, cached per (recipe, eval set).

``predict(recipe, "fmnist/test")`` trains the recipe's model if needed (:func:`ensdiv.train_recipe`),
runs it once over the set and caches the logits; every notebook that needs them afterwards reads the
cache. Features are timm's ``forward_head(forward_features(x), pre_logits=True)`` (the input of the
classifier), or, for a model without that pair, the input of its last ``nn.Linear``. An ensemble in one
model (Packed-Ensembles, BatchEnsemble, MIMO, Masksembles) gives each member's features through its
``member_features(x) -> (M, B, D)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn as nn

from ensdiv.data.registry import TensorSet, array_fingerprint, get_dataset, registered_fingerprint
from ensdiv.errors import EnsdivError
from ensdiv.progress import bar
from ensdiv.shards import fan_out, rank_and_world
from ensdiv.store import Store, cached, config_key, default_store
from ensdiv.train.build import model_cache_config, train_recipe
from ensdiv.train.recipes import Recipe

__all__ = ["predict", "predict_many", "cached_predictions", "predictions_config", "run_model", "dataset_fingerprint"]


def dataset_fingerprint(data: TensorSet) -> str:
    """SHA-256 of a set's images and labels (keys the cache of an unregistered TensorSet)."""
    return array_fingerprint(data.x, data.y)


def _resolve(dataset: str | TensorSet) -> tuple[TensorSet, str]:
    """The set and its predictions key: the name and a fingerprint of the content actually read."""
    if isinstance(dataset, TensorSet):
        return dataset, f"{dataset.name}#{dataset_fingerprint(dataset)[:16]}"
    if isinstance(dataset, str):
        data = get_dataset(dataset)
        return data, f"{dataset}#{registered_fingerprint(dataset, data)}"
    raise EnsdivError(
        f"predict needs a dataset name or an ed.data.TensorSet, got a {type(dataset).__name__}."
    )


def _features_fn(model: nn.Module):
    if hasattr(model, "member_features"):  # an ensemble in one model: (M, B, D); (B, D) when M = 1
        if getattr(model, "num_estimators", 2) == 1:
            return lambda x: model.member_features(x)[0]
        return model.member_features
    if hasattr(model, "forward_features") and hasattr(model, "forward_head"):
        return lambda x: model.forward_head(model.forward_features(x), pre_logits=True)
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise EnsdivError(
            f"Cannot find the penultimate features of a {type(model).__name__} (no nn.Linear head)."
        )
    grabbed: list[torch.Tensor] = []
    linears[-1].register_forward_hook(lambda mod, inp, out: grabbed.append(inp[0]))

    def fn(x: torch.Tensor) -> torch.Tensor:
        grabbed.clear()
        model(x)
        return grabbed[-1]

    return fn


@torch.no_grad()
def run_model(
    model: nn.Module,
    data: TensorSet,
    *,
    features: bool = False,
    batch_size: int = 512,
    device: str | torch.device | None = None,
) -> dict[str, torch.Tensor]:
    """Logits (and features) of ``model`` on ``data`` without caching; see :func:`predict`."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    first = next((m for m in model.modules() if isinstance(m, nn.Conv2d)), None)
    if first is not None and first.in_channels != data.x.shape[1]:
        raise EnsdivError(
            f"The model takes {first.in_channels}-channel images but {data.name!r} has "
            f"{data.x.shape[1]} channels."
        )
    was_training = model.training
    model.eval().to(device)
    feat_fn = _features_fn(model) if features else None
    logits, feats = [], []
    for i in range(0, len(data), batch_size):
        x = data.x[i : i + batch_size].to(device)
        out = model(x)
        if isinstance(out, tuple | list):
            out = out[0]
        logits.append(out.float().cpu())
        if feat_fn is not None:
            feats.append(feat_fn(x).float().cpu())
    model.train(was_training)
    dim = 1 if logits[0].ndim == 3 else 0  # ensemble-in-one-model: (M, B, C)
    result = {"logits": torch.cat(logits, dim=dim)}
    if feat_fn is not None:
        result["features"] = torch.cat(feats, dim=feats[0].ndim - 2 if feats[0].ndim == 3 else 0)
    n_cls = result["logits"].shape[-1]
    if data.num_classes and n_cls != data.num_classes and data.y.min() >= 0:
        raise EnsdivError(
            f"The model outputs {n_cls} classes but {data.name!r} has {data.num_classes}; "
            "create the model with num_classes matching the dataset."
        )
    return result


def predictions_config(recipe: Recipe, set_key: str, *, features: bool = False) -> dict:
    """The store config of ``recipe``'s predictions on the set keyed ``set_key``."""
    return {"model": model_cache_config(recipe), "dataset": set_key, "features": bool(features)}


def cached_predictions(recipe: Recipe, dataset: str | TensorSet, *, store: Store | None = None
                       ) -> torch.Tensor | None:
    """The cached logits of ``recipe`` on ``dataset``, or ``None`` if they are not cached (nothing is
    trained or computed)."""
    _, set_key = _resolve(dataset)
    store = store or default_store()
    cfg = predictions_config(recipe, set_key)
    if not store.path("predictions", config_key(cfg)).exists():
        return None
    out = store.load("predictions", cfg, compute=False)
    return None if out is None else out["logits"]


def predict(
    model_or_recipe: nn.Module | Recipe,
    dataset: str | TensorSet,
    *,
    features: bool = False,
    store: Store | None = None,
    batch_size: int = 512,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Logits of a model (or of a recipe's trained model) on an evaluation set.

    Args:
        model_or_recipe: an ``nn.Module``, or an :class:`~ensdiv.Recipe` (trained via
            :func:`ensdiv.train_recipe` if not cached; its predictions are cached).
        dataset: a registered set name (``"fmnist/test"``) or a :class:`TensorSet`.
        features: also return penultimate features.
        store: the cache (default store).
        batch_size: evaluation batch size.

    Returns:
        ``logits``, or ``(logits, features)`` when ``features=True``.

    Shape:
        logits: (N, C) for a single model; (M, N, C) for a model whose eval-mode forward returns
        (M, B, C). features: (N, D) (or (M, N, D)).
    """
    data, set_key = _resolve(dataset)
    if isinstance(model_or_recipe, Recipe):

        recipe = model_or_recipe
        cfg = predictions_config(recipe, set_key, features=features)

        def compute() -> dict[str, torch.Tensor]:
            model = train_recipe(recipe, store=store)
            return run_model(model, data, features=features, batch_size=batch_size)

        out = cached("predictions", cfg, compute, store=store or default_store())
    elif isinstance(model_or_recipe, nn.Module):
        out = run_model(model_or_recipe, data, features=features, batch_size=batch_size)
    else:
        raise EnsdivError(
            f"predict needs an nn.Module or an ed.Recipe, got a {type(model_or_recipe).__name__}."
        )
    return (out["logits"], out["features"]) if features else out["logits"]


def predict_many(
    recipes: Sequence[Recipe | nn.Module], dataset: str | TensorSet, *, store: Store | None = None
) -> torch.Tensor:
    """Stacked logits of several recipes' models (or modules, each as ``predict`` takes it).

    Under ``torchrun`` the evaluations are split across the job's ranks (:func:`ensdiv.shards.fan_out`): every
    rank first trains (or loads) every recipe, in order, since a training is a collective of all ranks; then
    each rank evaluates its share and every rank returns all the logits, read from the cache.

    Returns:
        Logits shaped (M, N, C), one row per recipe, in order.
    """
    recipes = list(recipes)
    if rank_and_world()[1] > 1 and all(isinstance(r, Recipe) for r in recipes):
        for r in recipes:
            train_recipe(r, store=store)
        return torch.stack(fan_out(recipes, lambda r: predict(r, dataset, store=store), desc="models"))
    outs = [
        predict(r, dataset, store=store)
        for r in bar(recipes, desc="models", leave=False, disable=len(recipes) < 2)
    ]
    return torch.stack(outs)
