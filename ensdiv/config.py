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
"keep the preset"), checks every override names a known key with a value of the preset's type, checks
every field against its range, and prints the resolved configuration.

**Types and ranges.** A field's type is the type of its preset value (an ``int`` field takes ints, a
``float`` field ints or floats, a ``bool`` field only ``True``/``False``; a field whose preset value is
``None`` takes anything). Its range is, in order: the preset's own ``"ranges"`` block, one line per
field, or else the default of :data:`DEFAULT_RANGES` for its name (``*_subset >= 0``, ``epochs >= 1``,
``num_members >= 1``, ``seed >= 0``, ...)::

    "packed-ensembles/tab01": {
        "common": {...}, "smoke": {...}, "cpu": {...}, "paper": {...},
        "ranges": {"alpha": at_least(1), "ci": between(0, 1), "ood": one_of("inverted", "noise"),
                   "gamma": (1, 8)},  # a (low, high) pair, either end None, is between(low, high)
    }

A list value (``seeds = [0, 1]``) is checked element by element. A value outside its range, or of the
wrong type, is an :class:`~ensdiv.errors.InvalidInputError` whose one sentence names the parameter.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from ensdiv.errors import InvalidInputError, unknown_name

__all__ = ["SCALES", "Config", "resolve_preset", "check_scale", "Range", "at_least", "between", "one_of",
           "DEFAULT_RANGES", "check_field"]

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


@dataclass(frozen=True)
class Range:
    """What values a preset field admits: numbers in ``[low, high]`` (either end ``None`` = open) and/or
    one of ``choices`` (a collection, or a function of the resolved :class:`Config` returning one, so a
    choice list can depend on the scale)."""

    low: float | None = None
    high: float | None = None
    choices: Collection[Any] | Callable[[Config], Collection[Any]] | None = None

    def describe(self) -> str:
        if self.low is not None and self.high is not None:
            return f"between {self.low} and {self.high}"
        if self.low is not None:
            return f"at least {self.low}"
        return f"at most {self.high}"

    def problem(self, value: Any, cfg: Config) -> str | None:
        """Why ``value`` is outside the range (``None`` when it is inside)."""
        if self.choices is not None:
            choices = self.choices(cfg) if callable(self.choices) else self.choices
            if value not in choices:
                shown = ", ".join(repr(c) for c in list(choices)[:20]) + (", ..." if len(choices) > 20 else "")
                return f"must be one of {shown}"
        if (self.low is not None or self.high is not None) and isinstance(value, int | float) \
                and not isinstance(value, bool):
            if value != value or (self.low is not None and value < self.low) or (
                    self.high is not None and value > self.high):
                return f"must be {self.describe()}"
        return None


def at_least(low: float) -> Range:
    """Numbers ``>= low``."""
    return Range(low=low)


def between(low: float | None, high: float | None) -> Range:
    """Numbers in ``[low, high]`` (either end ``None`` = open)."""
    return Range(low=low, high=high)


def one_of(*choices: Any) -> Range:
    """One of the given values, or of ``choices(cfg)`` when a single callable is given."""
    if len(choices) == 1 and callable(choices[0]):
        return Range(choices=choices[0])
    return Range(choices=tuple(choices))


#: Ranges every preset gets by field name (``fnmatch`` patterns, first match wins) unless its
#: ``"ranges"`` block says otherwise. Sizes and counts of things that must exist are >= 1; subset sizes
#: (0 = all), seeds, indices and non-negative hyper-parameters are >= 0.
DEFAULT_RANGES: list[tuple[str, Range]] = [
    ("*_subset", at_least(0)),
    ("subsample", at_least(0)),
    ("epochs", at_least(1)),
    ("num_members", at_least(1)),
    ("max_members", at_least(1)),
    ("num_estimators", at_least(1)),
    ("batch_size", at_least(1)),
    ("batch", at_least(1)),
    ("*_batch", at_least(1)),
    ("repeats", at_least(1)),
    ("*_repeats", at_least(1)),
    ("steps", at_least(1)),
    ("*_steps", at_least(1)),
    ("n_seeds", at_least(1)),
    ("n_clusters", at_least(1)),
    ("n_init", at_least(1)),
    ("n_estimators", at_least(1)),
    ("n_draws", at_least(1)),
    ("seed", at_least(0)),
    ("seeds", at_least(0)),
    ("*_seed", at_least(0)),
    ("image_index", at_least(0)),
    ("lr", at_least(0)),
    ("learning_rate", at_least(0)),
    ("weight_decay", at_least(0)),
    ("eps", at_least(0)),
    ("*_eps", at_least(0)),
    ("ci", between(0, 1)),
]


def _as_range(spec: Any, name: str, key: str) -> Range:
    if isinstance(spec, Range):
        return spec
    if isinstance(spec, tuple) and len(spec) == 2 and all(v is None or isinstance(v, int | float) for v in spec):
        return between(*spec)
    raise TypeError(f"The range of {key!r} in preset {name!r} must be a Range or a (low, high) pair, got {spec!r}.")


def _range_of(key: str, declared: dict[str, Any], name: str) -> Range | None:
    if key in declared:
        return None if declared[key] is None else _as_range(declared[key], name, key)
    return next((r for pattern, r in DEFAULT_RANGES if fnmatch.fnmatchcase(key, pattern)), None)


def _type_name(default: Any) -> str:
    if isinstance(default, bool):
        return "a boolean (true or false)"
    if isinstance(default, float):
        return "a number"
    if isinstance(default, int):
        return "an integer"
    if isinstance(default, list | tuple):
        return "a list"
    if isinstance(default, str):
        return "a string"
    return f"a {type(default).__name__}"


def check_field(name: str, key: str, value: Any, default: Any, cfg: Config, declared: dict[str, Any] | None = None
                ) -> None:
    """Check one field's ``value`` against the type of its preset value ``default`` and its range.

    Raises:
        InvalidInputError: one sentence naming the parameter, what it must be and what it got.
    """
    if not _type_ok(default, value):
        raise InvalidInputError(
            f"Parameter {key!r} of preset {name!r} must be {_type_name(default)} (like {default!r}), "
            f"got the {type(value).__name__} {value!r}."
        )
    rng = _range_of(key, declared or {}, name)
    if rng is None or value is None:
        return
    items = value if isinstance(value, list | tuple) and rng.choices is None else [value]
    for item in items:
        why = rng.problem(item, cfg)
        if why:
            got = f"{value!r}" if item is value else f"{value!r} (the element {item!r})"
            raise InvalidInputError(f"Parameter {key!r} of preset {name!r} {why}, got {got}.")


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
        InvalidInputError: an override whose type differs from the preset's value, a field outside its
            range (the preset's ``"ranges"`` block, else :data:`DEFAULT_RANGES`), or an override of
            ``scale``/``preset``.
    """
    check_scale(scale)
    declared = dict(spec.get("ranges", {}))
    cfg = Config(preset=name, scale=scale)
    cfg.update(spec.get("common", {}))
    cfg.update(spec.get(scale, {}))
    defaults = dict(cfg)
    for key, value in overrides.items():
        if value is None:
            continue
        if key in ("preset", "scale"):
            raise InvalidInputError(
                f"Parameter {key!r} of preset {name!r} cannot be overridden; "
                + ("choose the scale with the scale argument (ensdiv run --scale)." if key == "scale"
                   else "it names the preset itself.")
            )
        if key not in cfg:
            raise unknown_name(f"parameter of preset {name!r}", key, [k for k in cfg if k not in ("preset", "scale")])
        cfg[key] = value
    for key, value in cfg.items():
        if key not in ("preset", "scale"):
            check_field(name, key, value, defaults[key], cfg, declared)
    if verbose:
        print(f"# preset {name} at scale {scale}\n{cfg!r}")
    return cfg
