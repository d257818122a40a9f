"""Scale presets: the mechanics that say what ``smoke``, ``cpu`` and ``paper`` mean for a notebook.

A preset is named ``"<paper-slug>/<notebook-stem>"``; the presets themselves are book content and live
in the chapter modules (:mod:`ensdiv.chapters`, one ``PRESETS`` dict per chapter), which resolve them
here::

    PRESETS = {
        "packed-ensembles/tab01": {
            "common": {"seed": 0, "num_members": 4},
            "smoke": {"epochs": 1, "train_subset": 512},
            "cpu": {"epochs": 5, "train_subset": None},
            "paper": {"epochs": 200, "dataset": "cifar10"},
        },
    }

:func:`resolve_preset` merges ``common`` with the scale's block, applies explicit overrides (``None`` means
"keep the preset"), checks every override names a known key with a value of the preset's type, and
prints the resolved configuration.
"""

from __future__ import annotations

from typing import Any

from ensdiv.errors import EnsdivError, unknown_name

__all__ = ["SCALES", "Config", "resolve_preset", "check_scale"]

SCALES = ("smoke", "cpu", "paper")


class Config(dict):
    """A dict whose keys are also attributes (``cfg.epochs``), printed one key per line."""

    def __getattr__(self, item: str) -> Any:
        try:
            return self[item]
        except KeyError:
            raise AttributeError(f"Config has no field {item!r}; fields: {', '.join(self)}.") from None

    def __repr__(self) -> str:
        width = max((len(k) for k in self), default=0)
        return "\n".join(f"{k:<{width}} = {v!r}" for k, v in self.items())


def check_scale(scale: str) -> str:
    if scale not in SCALES:
        raise unknown_name("scale", scale, SCALES)
    return scale


def _type_ok(default: Any, value: Any) -> bool:
    if default is None or value is None:
        return True
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, list | tuple):
        return isinstance(value, list | tuple)
    return isinstance(value, type(default))


def resolve_preset(
    name: str, spec: dict[str, dict[str, Any]], scale: str = "cpu", /, *, verbose: bool = True, **overrides: Any
) -> Config:
    """Resolve the preset ``spec`` (named ``name``) at ``scale`` with explicit overrides.

    Args:
        name: ``"<paper-slug>/<notebook-stem>"`` (for messages and the ``preset`` field).
        spec: ``{"common": {...}, "smoke": {...}, "cpu": {...}, "paper": {...}}``.
        scale: ``"smoke"``, ``"cpu"`` or ``"paper"``.
        verbose: print the resolved configuration.
        **overrides: values that replace the preset's; ``None`` keeps the preset's value.

    Returns:
        The resolved :class:`Config`, with ``scale`` and ``preset`` fields added.

    Raises:
        UnknownNameError: unknown preset, scale, or override key.
        EnsdivError: an override whose type differs from the preset's value.
    """
    check_scale(scale)
    cfg = Config(preset=name, scale=scale)
    cfg.update(spec.get("common", {}))
    cfg.update(spec.get(scale, {}))
    for key, value in overrides.items():
        if value is None:
            continue
        if key not in cfg:
            raise unknown_name(f"parameter of preset {name!r}", key, [k for k in cfg if k not in ("preset", "scale")])
        if not _type_ok(cfg[key], value):
            raise EnsdivError(
                f"Parameter {key!r} of preset {name!r} must be a {type(cfg[key]).__name__} "
                f"(like {cfg[key]!r}), got the {type(value).__name__} {value!r}."
            )
        cfg[key] = value
    if verbose:
        print(f"# preset {name} at scale {scale}\n{cfg!r}")
    return cfg
