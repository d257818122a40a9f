"""A registry of model factories: ``create_model(name, ...)`` in the style of ``timm.create_model``.

Every entry is a factory ``factory(num_classes, in_chans, img_size, **kw) -> nn.Module`` registered with
:func:`register_model` under a name, a family and a one-line description. The ``cpu``-scale zoo
(:mod:`ensdiv.models.zoo_cpu`) registers small configurations of timm's own model classes sized for
28x28x1 Fashion-MNIST, plus tiny ``test_*`` variants for smoke runs; other helpers register their
ensembles-in-one-model (Packed-Ensembles, BatchEnsemble, ...) the same way. At ``paper`` scale a zoo
name maps to the paper's timm model (:mod:`ensdiv.models.paper`), and any timm model name is
accepted directly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch.nn as nn

from ensdiv.errors import EnsdivError, unknown_name

__all__ = ["register_model", "create_model", "list_models", "model_info", "ModelEntry"]


@dataclass(frozen=True)
class ModelEntry:
    """One registered factory."""

    name: str
    factory: Callable[..., nn.Module]
    family: str
    description: str
    version: int = 1


_MODELS: dict[str, ModelEntry] = {}


def register_model(name: str, *, family: str, description: str = "", version: int = 1) -> Callable:
    """Decorator registering ``factory(num_classes, in_chans, img_size, **kw) -> nn.Module`` as ``name``.

    Example::

        @ed.register_model("packed_resnet", family="Packed-Ensembles", description="...")
        def packed_resnet(num_classes, in_chans, img_size, *, alpha=2, num_estimators=4): ...

    Re-registering a name replaces the previous factory (so a reloaded module does not fail).
    Bump ``version`` when the architecture code changes: it is part of the cache key of trained models.
    """

    def deco(factory: Callable[..., nn.Module]) -> Callable[..., nn.Module]:
        _MODELS[name] = ModelEntry(name, factory, family, description, version)
        return factory

    return deco


def _ensure_builtin() -> None:
    # Importing the modules of ensdiv.models registers their models (the cpu zoo, Packed-Ensembles, ...).
    import importlib
    import pkgutil

    import ensdiv.models as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name not in ("registry", "paper", "stats", "plain"):
            importlib.import_module(f"{pkg.__name__}.{info.name}")


def list_models(
    pattern: str | None = None, *, family: str | None = None, include_test: bool = True
) -> list[str]:
    """Names of registered models, optionally filtered by a glob ``pattern`` and/or a family.

    Args:
        pattern: fnmatch-style pattern, e.g. ``"test_*"``.
        family: keep only this family (case-insensitive).
        include_test: keep the tiny ``test_*`` smoke variants.
    """
    import fnmatch

    _ensure_builtin()
    names = sorted(_MODELS)
    if pattern:
        names = [n for n in names if fnmatch.fnmatch(n, pattern)]
    if family:
        names = [n for n in names if _MODELS[n].family.lower() == family.lower()]
    if not include_test:
        names = [n for n in names if not n.startswith("test_")]
    return names


def model_info(name: str) -> ModelEntry:
    """The registry entry of ``name`` (raises :class:`UnknownNameError` with close matches)."""
    _ensure_builtin()
    if name not in _MODELS:
        raise unknown_name("model", name, _MODELS)
    return _MODELS[name]


def _check_int(what: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise EnsdivError(f"create_model needs {what} as a positive int, got {value!r}.")
    return value


def create_model(
    name: str,
    *,
    num_classes: int = 10,
    in_chans: int = 1,
    img_size: int = 28,
    scale: str = "cpu",
    pretrained: bool | str = False,
    **overrides: Any,
) -> nn.Module:
    """Build a registered model (or, at ``paper`` scale, the paper's timm model).

    Args:
        name: a registered name (:func:`list_models`), e.g. ``"resnet"``, ``"vit"``, ``"test_cnn"``;
            at ``scale="paper"`` also any timm model name, or a name of the SAT table (renamed timm
            names are aliased).
        num_classes: number of output classes.
        in_chans: image channels (1 for Fashion-MNIST).
        img_size: image side in pixels.
        scale: ``"cpu"`` (and ``"smoke"``): the small registered configuration; ``"paper"``: the
            paper's timm architecture for this zoo name (``"resnet"`` -> ``resnet50``, ...).
        pretrained: paper scale only: ``True`` uses timm's local cache, a path loads that file;
            nothing is downloaded.
        **overrides: passed to the factory (e.g. ``drop_rate=0.1``, widths).

    Returns:
        The model, in train mode, on CPU.

    Raises:
        UnknownNameError: unknown name (the message lists close matches).
        EnsdivError: a bad size argument, or pretrained weights not found locally.
    """
    _check_int("num_classes", num_classes)
    _check_int("in_chans", in_chans)
    _check_int("img_size", img_size)
    if scale == "paper":
        from ensdiv.models.paper import create_paper_model

        return create_paper_model(
            name,
            num_classes=num_classes,
            in_chans=in_chans,
            img_size=img_size,
            pretrained=pretrained,
            **overrides,
        )
    if scale not in ("cpu", "smoke"):
        raise unknown_name("scale", scale, ["smoke", "cpu", "paper"])
    if pretrained:
        raise EnsdivError(
            f"Pretrained weights exist only at paper scale; call create_model({name!r}, scale='paper', "
            "pretrained=True) or train the cpu-scale model with ed.train_recipe."
        )
    entry = model_info(name)
    try:
        return entry.factory(num_classes, in_chans, img_size, **overrides)
    except TypeError as exc:
        raise EnsdivError(f"Model {name!r} does not accept these options ({exc}).") from None
