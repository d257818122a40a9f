"""A registry of model factories: ``create_model(name, ...)`` in the style of ``timm.create_model``.

Every entry is a factory ``factory(num_classes, in_chans, img_size, **kw) -> nn.Module`` registered with
:func:`register_model` under a name, a family and a one-line description. The ``cpu``-scale zoo
(:mod:`ensdiv.models.cpu`) registers small configurations of timm's own model classes sized for
28x28x1 Fashion-MNIST, plus tiny ``test_*`` variants for smoke runs; other helpers register their
ensembles-in-one-model (Packed-Ensembles, BatchEnsemble, ...) the same way. A name that is not
registered but is a timm model name builds that timm model (:mod:`ensdiv.models.paper`), with
pretrained weights from local files only. Importing :mod:`ensdiv.models` imports every module that
registers models, so the registry is complete after ``import ensdiv``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import timm
import torch.nn as nn

from ensdiv.errors import EnsdivError, unknown_name
from ensdiv.models.paper import create_paper_model, is_timm_name

__all__ = ["register_model", "create_model", "list_models", "model_info", "is_registered", "ModelEntry"]


@dataclass(frozen=True)
class ModelEntry:
    """One registered factory."""

    name: str
    factory: Callable[..., nn.Module]
    family: str
    description: str


_MODELS: dict[str, ModelEntry] = {}


def register_model(name: str, *, family: str, description: str = "") -> Callable:
    """Decorator registering ``factory(num_classes, in_chans, img_size, **kw) -> nn.Module`` as ``name``.

    Example::

        @ed.register_model("packed_resnet", family="Packed-Ensembles", description="...")
        def packed_resnet(num_classes, in_chans, img_size, *, alpha=2, num_estimators=4): ...

    Re-registering a name replaces the previous factory (so a reloaded module does not fail). A model's code
    is not in the cache key of its trained weights: the entry records the factory and module code that built
    and trained it, and a load checks it (:mod:`ensdiv.store`), so an architecture edit retrains on its own.
    """

    def deco(factory: Callable[..., nn.Module]) -> Callable[..., nn.Module]:
        _MODELS[name] = ModelEntry(name, factory, family, description)
        return factory

    return deco


def is_registered(name: str) -> bool:
    """Whether ``name`` is a registered ensdiv model (timm's own names are not)."""
    return name in _MODELS


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
    pretrained: bool | str = False,
    **overrides: Any,
) -> nn.Module:
    """Build a registered model, or a timm ImageNet model by its timm name.

    A name is one architecture: the CPU-scale ResNet is ``"resnet"``, the paper's ResNet-50 is timm's
    ``"resnet50"``; presets and the zoo pick the name per scale.

    Args:
        name: a registered name (:func:`list_models`), e.g. ``"resnet"``, ``"vit"``, ``"test_cnn"``;
            or any timm model name (``"resnet50"``, ``"deit_tiny_patch16_224"``), or a name of the
            SAT table that newer timm renamed (:data:`ensdiv.models.paper.ALIASES`).
        num_classes: number of output classes.
        in_chans: image channels (1 for Fashion-MNIST).
        img_size: image side in pixels.
        pretrained: timm models only: ``True`` uses timm's local cache, a path loads that file;
            nothing is downloaded.
        **overrides: passed to the factory (e.g. ``drop_rate=0.1``, widths).

    Returns:
        The model, in train mode, on CPU.

    Raises:
        UnknownNameError: neither registered nor a timm name (the message lists close matches).
        EnsdivError: a bad size argument, or pretrained weights not found locally.
    """
    _check_int("num_classes", num_classes)
    _check_int("in_chans", in_chans)
    _check_int("img_size", img_size)
    if name not in _MODELS:
        if not is_timm_name(name):
            raise unknown_name("model", name, [*_MODELS, *timm.list_models()])
        return create_paper_model(
            name, num_classes=num_classes, in_chans=in_chans, img_size=img_size, pretrained=pretrained, **overrides
        )
    if pretrained:
        raise EnsdivError(
            f"{name!r} is a registered CPU-scale model without pretrained weights; train it with "
            "ed.train_recipe, or name a timm model (e.g. 'resnet50') for pretrained weights."
        )
    entry = _MODELS[name]
    try:
        return entry.factory(num_classes, in_chans, img_size, **overrides)
    except TypeError as exc:
        raise EnsdivError(f"Model {name!r} does not accept these options ({exc}).") from None
