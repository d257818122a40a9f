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
every field against its range, and shows the resolved configuration (:class:`PresetSummary`: on a page,
one folded line naming the values a parameter set, the whole table under it; in a terminal, one line per
field).

**Types and ranges.** A field's type is the type of its preset value (an ``int`` field takes ints, a
``float`` field ints or floats, a ``bool`` field only ``True``/``False``, a list field lists whose
elements have the type of the preset list's elements, a mapping field mappings with string keys whose
values have the type of the preset mapping's values), unless the preset's ``"types"`` block declares it.
A field whose preset value says nothing of its type (``None``, an empty list or mapping) *must* be
declared there, and its value is then ``None`` or of that type; a preset that leaves one undeclared is a
``TypeError`` when it is resolved, so ``tests/test_parameters.py`` finds it at every scale. Types are
written ``bool``, ``int``, ``float``, ``str``, ``list[T]``, ``dict[str, T]`` and :data:`typing.Any`
(any plain data)::

    "demo/fig01": {
        "common": {"data_root": None, "widths": None, "committee": []}, "smoke": {...}, ...,
        "types": {"data_root": str, "widths": list[int], "committee": list[str]},
    }

Every value is also *plain data* (:func:`plain_data_problem`): ``None``, ``bool``, ``int``, finite
``float``, ``str``, and lists and string-keyed mappings of them, at most :data:`MAX_DEPTH` levels deep
and :data:`MAX_ELEMENTS` elements in all, so that ``repr`` writes it as a Python literal.

A field's range is, in order: the preset's own ``"ranges"`` block, one line per
field, or else the default of :data:`DEFAULT_RANGES` for its name (``*_subset >= 0``, ``epochs >= 1``,
``num_members >= 1``, ``seed >= 0``, ...)::

    "packed-ensembles/tab01": {
        "common": {...}, "smoke": {...}, "cpu": {...}, "paper": {...},
        "ranges": {"alpha": at_least(1), "ci": between(0, 1), "ood": one_of("inverted", "noise"),
                   "gamma": (1, 8)},  # a (low, high) pair, either end None, is between(low, high)
    }

A list value (``seeds = [0, 1]``) is checked element by element. A value outside its range, or of the
wrong type, is an :class:`~ensdiv.errors.InvalidInputError` whose one sentence names the parameter.

**Dry runs.** A preset may have a ``"dry"`` block: the sizes a *dry run* of its ``paper`` preset uses (issue #33:
``ensdiv run --dry-run`` executes a notebook at ``paper`` scale on generated fake data in the published layouts,
with randomly initialised timm models, to find a broken paper path on a CPU before it costs a GPU day). With
:data:`DRY_RUN_ENV` set to ``1``, :func:`resolve_preset` at ``paper`` applies that block after the ``paper`` one.
The block may change sizes only (:func:`check_dry_block`): a number whose name says it is a size (images,
epochs, steps, seeds, repeats, ...: :data:`DRY_SIZE_KEYS`), or a list whose elements all appear in the paper
list (fewer models, fewer sets) or whose name says it is a size (milestones, epoch lists); a string, a flag or
a mapping never changes. An element of the paper list may stand for several: an fnmatch pattern (``"arch/*"``
holds ``"arch/vit"``) or a token a lower layer registered with :func:`register_list_token` (``"sat69"``, the 69
models of the SAT table, holds ``"resnet50"``).
"""

from __future__ import annotations

import fnmatch
import html
import math
import os
import typing
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from ensdiv.errors import InvalidInputError, unknown_name

__all__ = ["SCALES", "Config", "PresetSummary", "resolve_preset", "check_scale", "Range", "at_least", "between",
           "one_of", "DEFAULT_RANGES", "check_field", "MAX_DEPTH", "MAX_ELEMENTS", "plain_data_problem", "type_of",
           "field_type", "SIZE_HEADROOM", "MAX_SIZE", "size_bound", "DRY_RUN_ENV", "DRY_SIZE_KEYS", "dry_run",
           "check_dry_block", "register_list_token",
           "list_holds"]

SCALES = ("smoke", "cpu", "paper")
#: the environment variable that makes a ``paper`` run a dry run (``ensdiv run --dry-run`` sets it to ``1``)
DRY_RUN_ENV = "ENSDIV_DRY_RUN"
#: the field names a preset's ``"dry"`` block may give a smaller number (fnmatch patterns)
DRY_SIZE_KEYS = ("*images*", "*subset*", "*epochs*", "*steps*", "milestones", "seeds", "*repeats*", "*rounds*",
                 "*resamples*", "*batch*", "*restarts*", "k_step", "*iter*", "*draws", "*per_class*", "*_size", "n_*",
                 "*_n", "*samples*", "subsample", "*process_sets*", "*candidates*", "subnets", "sizes", "pair_models",
                 "show", "*members*", "*warmup*", "*triples*", "per_run")


def dry_run() -> bool:
    """Whether this process runs a dry run (:data:`DRY_RUN_ENV` is ``1``): fake data, random weights, sizes
    from each preset's ``"dry"`` block, every verdict *not testable*."""
    return os.environ.get(DRY_RUN_ENV, "") == "1"


#: list tokens that stand for several names (``"sat69"``): token -> a function listing them, registered by the
#: layer that knows them (:func:`register_list_token`), read by :func:`check_dry_block`
_LIST_TOKENS: dict[str, Callable[[], list[str]]] = {}


def register_list_token(token: str, names: Callable[[], list[str]]) -> None:
    """Say that a preset list element ``token`` stands for the names ``names()`` lists, so that a ``"dry"`` block
    may pick some of them (``ensdiv.models.paper`` registers ``"sat69"``)."""
    _LIST_TOKENS[token] = names


def list_holds(paper_list: list, value: Any) -> bool:
    """Whether ``value`` is an element of ``paper_list``, matches one of its fnmatch patterns, or is one of the
    names a registered token of it stands for."""
    for old in paper_list:
        if value == old:
            return True
        if isinstance(value, str) and isinstance(old, str):
            if any(c in old for c in "*?[") and fnmatch.fnmatchcase(value, old):
                return True
            if old in _LIST_TOKENS and value in _LIST_TOKENS[old]():
                return True
    return False


def check_dry_block(name: str, paper: dict[str, Any], dry: dict[str, Any]) -> None:
    """Refuse a ``"dry"`` block that changes more than sizes (module docstring, "Dry runs").

    Raises:
        TypeError: a key that is no field of the paper preset, or a value that is not a size change
            (one sentence naming the field).
    """
    for key, value in dry.items():
        if key not in paper:
            raise TypeError(f"The \"dry\" block of preset {name!r} sets {key!r}, which is no field of its paper "
                            "preset.")
        sized = any(fnmatch.fnmatchcase(key, p) for p in DRY_SIZE_KEYS)
        old = paper[key]
        if isinstance(value, bool) or isinstance(old, bool) or not isinstance(value, int | float | list):
            ok = value == old
        elif isinstance(value, list):
            ok = sized or (isinstance(old, list) and all(list_holds(old, v) for v in value))
        else:
            ok = sized
        if not ok:
            raise TypeError(f"The \"dry\" block of preset {name!r} changes {key!r} from {old!r} to {value!r}; a dry "
                            "run changes sizes only (numbers of images, epochs, steps, seeds; fewer models or sets).")


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


@dataclass(frozen=True)
class PresetSummary:
    """What a page runs with: the resolved preset, each value marked by where it came from.

    On an executed page (``_repr_html_``) it is one folded line — the preset, the scale, and the values a
    parameter set (those that differ from the notebook's defaults, which keep the preset) — with the
    whole table under it; as text (``repr``) one ``field = value`` line per field, parameters marked.
    """

    name: str
    scale: str
    values: dict[str, Any]
    from_parameters: tuple[str, ...] = ()

    def __repr__(self) -> str:
        width = max((len(k) for k in self.values), default=0)
        lines = [f"# preset {self.name} at scale {self.scale}"]
        lines += [f"{k:<{width}} = {v!r}" + ("  # parameter" if k in self.from_parameters else "")
                  for k, v in self.values.items()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        def code(v: Any) -> str:
            return f"<code>{html.escape(repr(v))}</code>"

        shown = {k: v for k, v in self.values.items() if k not in ("preset", "scale")}
        set_here = ", ".join(f"{html.escape(k)} = {code(shown[k])}" for k in self.from_parameters)
        head = (f"Preset <code>{html.escape(self.name)}</code> at scale <b>{html.escape(self.scale)}</b>: "
                f"{len(shown)} values, " + (f"set by parameters: {set_here}" if set_here else "all from the preset"))
        rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{code(v)}</td>"
                       f"<td>{'parameter' if k in self.from_parameters else 'preset'}</td></tr>"
                       for k, v in shown.items())
        return (f'<details class="ensdiv-preset"><summary>{head}</summary><table><thead><tr><th>field</th>'
                f"<th>value</th><th>from</th></tr></thead><tbody>{rows}</tbody></table></details>")


def _show(obj: Any) -> None:
    """``display`` in a notebook kernel (the rich form), ``print`` elsewhere."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # IPython is optional outside the book
        print(repr(obj))
        return
    shell = get_ipython()
    if shell is not None and getattr(shell, "kernel", None) is not None:
        display(obj)
    else:
        print(repr(obj))


def check_scale(scale: str) -> str:
    if scale not in SCALES:
        raise unknown_name("scale", scale, SCALES)
    return scale


#: The most a value may hold: containers nested in one another, and elements in all (every scalar, list
#: and mapping counts one).
MAX_DEPTH = 8
MAX_ELEMENTS = 1000

_SCALAR_TYPES = (type(None), bool, int, float, str)


def plain_data_problem(value: Any, *, max_depth: int = MAX_DEPTH, max_elements: int = MAX_ELEMENTS) -> str | None:
    """Why ``value`` is not plain data, or ``None`` when it is.

    Plain data is ``None``, ``bool``, ``int``, a finite ``float``, ``str`` (those exact types, not
    subclasses, whose ``repr`` could be anything), and lists, tuples and mappings with ``str`` keys of
    plain data, at most ``max_depth`` containers deep and ``max_elements`` elements in all. Its ``repr``
    is a Python literal. The walk is iterative, so no value is too deep for it.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    count = 0
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > max_elements:
            return f"holds more than {max_elements:,} elements"
        kind = type(item)
        if kind is float and not math.isfinite(item):
            return f"holds the non-finite number {item!r}"
        if kind in _SCALAR_TYPES:
            continue
        if kind not in (list, tuple, dict):
            return f"holds a {kind.__name__}, which is not plain data"
        if depth + 1 > max_depth:
            return f"is nested deeper than {max_depth} levels"
        if kind is dict:
            keys = [k for k in item if type(k) is not str]
            if keys:
                return f"has the mapping key {_short(keys[0])}, which is not a string"
            stack.extend((v, depth + 1) for v in item.values())
        else:
            stack.extend((v, depth + 1) for v in item)
    return None


def _unify(types: list[Any]) -> Any:
    """One type for values of ``types`` (``None`` = unknown): equal types stay, ints with floats are
    floats, lists and mappings unify their elements, and anything else is :data:`typing.Any`."""
    known = [t for t in types if t is not None]
    if len(known) < len(types) and known:
        return Any  # some elements are None
    if not known:
        return None
    first = known[0]
    if all(t == first for t in known):
        return first
    if set(known) <= {int, float}:
        return float
    origins = {typing.get_origin(t) for t in known}
    if origins == {list}:
        return list[_unify([typing.get_args(t)[0] for t in known])]
    if origins == {dict}:
        return dict[str, _unify([typing.get_args(t)[1] for t in known])]
    return Any


def type_of(value: Any) -> Any:
    """The type a preset value stands for (``None`` where it says nothing: ``None``, ``[]``, ``{}``)."""
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return list[_unify([type_of(v) for v in value])]
    if isinstance(value, dict):
        return dict[str, _unify([type_of(v) for v in value.values()])]
    return type(value)


def field_type(key: str, value: Any, types: dict[str, Any] | None = None) -> Any:
    """The type of field ``key`` whose preset value is ``value``: the ``"types"`` block's, else its value's."""
    return (types or {}).get(key, type_of(value))


def _complete(t: Any) -> bool:
    """Whether type ``t`` says what every part of a value must be."""
    if t is None:
        return False
    args = typing.get_args(t)
    return all(_complete(a) for a in args)


def _check_type(t: Any, name: str, key: str) -> None:
    ok = t is Any or t in (bool, int, float, str) or (
        typing.get_origin(t) is list and len(typing.get_args(t)) == 1) or (
        typing.get_origin(t) is dict and typing.get_args(t)[:1] == (str,) and len(typing.get_args(t)) == 2)
    if not ok:
        raise TypeError(f"The type of {key!r} in preset {name!r} must be bool, int, float, str, list[T], "
                        f"dict[str, T] or typing.Any, got {t!r}.")
    for arg in typing.get_args(t)[-1:]:
        _check_type(arg, name, key)


def _matches(value: Any, t: Any) -> bool:
    """Whether ``value`` (plain data, so at most :data:`MAX_DEPTH` deep) has type ``t``."""
    if t is Any:
        return True
    if t is bool:
        return isinstance(value, bool)
    if t is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if t is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if t is str:
        return isinstance(value, str)
    if typing.get_origin(t) is list:
        return isinstance(value, list | tuple) and all(_matches(v, typing.get_args(t)[0]) for v in value)
    if typing.get_origin(t) is dict:
        return isinstance(value, dict) and all(
            isinstance(k, str) and _matches(v, typing.get_args(t)[1]) for k, v in value.items())
    return False


def _describe(t: Any, plural: bool = False) -> str:
    names = {bool: ("a boolean (true or false)", "booleans"), float: ("a number", "numbers"),
             int: ("an integer", "integers"), str: ("a string", "strings"), Any: ("plain data", "plain data")}
    if t in names:
        return names[t][plural]
    args = typing.get_args(t)
    if typing.get_origin(t) is list:
        return ("lists" if plural else "a list") + f" of {_describe(args[0], True)}"
    if typing.get_origin(t) is dict:
        return ("mappings" if plural else "a mapping") + f" from strings to {_describe(args[1], True)}"
    return f"a {getattr(t, '__name__', t)}"


def _short(value: Any, width: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 4] + " ..."


def _example(value: Any) -> str:
    return "list[str]" if isinstance(value, list | tuple) else "dict[str, str]" if isinstance(value, dict) else "str"


def _type_problem(value: Any, t: Any) -> str | None:
    """Why ``value`` is not of type ``t`` (``None`` when it is), naming the first wrong element."""
    if _matches(value, t):
        return None
    got = f"the {type(value).__name__} {_short(value)}"
    origin = typing.get_origin(t)
    if origin is list and isinstance(value, list | tuple):
        bad = next(v for v in value if not _matches(v, typing.get_args(t)[0]))
        return f"{got} (the element {_short(bad)})"
    if origin is dict and isinstance(value, dict):
        bad_key = next(k for k, v in value.items() if not isinstance(k, str) or not _matches(v, typing.get_args(t)[1]))
        what = f"the key {bad_key!r}" if not isinstance(bad_key, str) else f"the value of {bad_key!r}"
        return f"{got} ({what})"
    return got


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
    ("n_resamples", at_least(2)),
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


def check_field(name: str, key: str, value: Any, default: Any, cfg: Config, declared: dict[str, Any] | None = None,
                types: dict[str, Any] | None = None) -> None:
    """Check one field's ``value``: plain data, of its type (``types[key]``, else that of its preset value
    ``default``; ``None`` is always accepted) and in its range (``declared[key]``, else
    :data:`DEFAULT_RANGES`).

    Raises:
        InvalidInputError: one sentence naming the parameter, what it must be and what it got.
    """
    why = plain_data_problem(value)
    if why:
        raise InvalidInputError(f"Parameter {key!r} of preset {name!r} must be plain data (strings, numbers, "
                                f"booleans, None, lists and string-keyed mappings of them); its value {why}.")
    t = field_type(key, default, types)
    got = None if value is None else _type_problem(value, t)
    if got:
        like = "" if default is None else f" (like {_short(default)})"
        raise InvalidInputError(f"Parameter {key!r} of preset {name!r} must be {_describe(t)}{like}, got {got}.")
    rng = _range_of(key, declared or {}, name)
    if rng is None or value is None:
        return
    items = value if isinstance(value, list | tuple) and rng.choices is None else [value]
    for item in items:
        why = rng.problem(item, cfg)
        if why:
            got = f"{value!r}" if item is value else f"{value!r} (the element {item!r})"
            raise InvalidInputError(f"Parameter {key!r} of preset {name!r} {why}, got {got}.")


#: a size a parameter sets (members, epochs, steps, images, subsets, draws, resamples, batches ...: these names and
#: :data:`DRY_SIZE_KEYS`) may be at most this many times the largest value its preset gives it at any scale
SIZE_HEADROOM = 10
#: the bound of a size whose preset gives no number (``None``: all the images), and of any size at all: more images,
#: steps or draws than any run of the book could use
MAX_SIZE = 10**8
_COUNT_KEYS = ("num_*", "max_*", "epochs", "steps", "repeats", "n_resamples")


def _largest(values: list[Any]) -> float | None:
    """The largest number among ``values`` and the elements of the lists among them (``None`` when none)."""
    nums = [v for x in values for v in (x if isinstance(x, list) else [x])
            if isinstance(v, int | float) and not isinstance(v, bool)]
    return max(nums) if nums else None


def size_bound(key: str, spec: dict[str, Any]) -> tuple[float, str] | None:
    """The largest value a parameter may give the size field ``key`` of preset ``spec`` and why (``None`` when
    ``key`` is no size): :data:`SIZE_HEADROOM` times the largest value the preset gives it at any scale, at most
    :data:`MAX_SIZE`. A seed list is sized by its length, not its values.

    >>> size_bound("epochs", {"common": {}, "smoke": {"epochs": 1}, "cpu": {"epochs": 5}, "paper": {"epochs": 200}})
    (2000, '10 × 200, the largest value its preset gives it')
    """
    if "seed" in key or not any(fnmatch.fnmatchcase(key, p) for p in (*_COUNT_KEYS, *DRY_SIZE_KEYS)):
        return None
    largest = _largest([spec.get(b, {}).get(key) for b in ("common", *SCALES)])
    if not largest or largest < 1:
        return MAX_SIZE, "the bound of a size its preset leaves open"
    bound = min(SIZE_HEADROOM * largest, MAX_SIZE)
    return bound, f"{SIZE_HEADROOM} × {largest:g}, the largest value its preset gives it"


def _check_size(name: str, key: str, value: Any, spec: dict[str, Any]) -> None:
    """Refuse a parameter that sets a size beyond :func:`size_bound` (each element of a list), or a seed list
    longer than :data:`SIZE_HEADROOM` times the preset's longest, in one sentence with the bound."""
    if "seed" in key and isinstance(value, list):
        longest = max([len(v) for b in ("common", *SCALES) if isinstance(v := spec.get(b, {}).get(key), list)] + [1])
        if len(value) > SIZE_HEADROOM * longest:
            raise InvalidInputError(f"Parameter {key!r} of preset {name!r} may list at most {SIZE_HEADROOM * longest} "
                                    f"seeds ({SIZE_HEADROOM} × the preset's {longest}), got {len(value)}.")
        return
    bound = size_bound(key, spec)
    if bound is None or value is None:
        return
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, int | float) and not isinstance(item, bool) and item > bound[0]:
            got = f"{value!r}" if item is value else f"{value!r} (the element {item!r})"
            raise InvalidInputError(f"Parameter {key!r} of preset {name!r} must be at most {bound[0]:g} ({bound[1]}), "
                                    f"got {got}.")


def resolve_preset(
    name: str, spec: dict[str, dict[str, Any]], scale: str = "cpu", /, *, verbose: bool = True, **overrides: Any
) -> Config:
    """Resolve the preset ``spec`` (named ``name``) at ``scale`` with explicit overrides.

    Args:
        name: ``"<paper-slug>/<notebook-stem>"`` (for messages and the ``preset`` field).
        spec: ``{"common": {...}, "smoke": {...}, "cpu": {...}, "paper": {...}}``, optionally with
            ``"ranges"`` and ``"types"`` blocks (see the module's docstring).
        scale: ``"smoke"``, ``"cpu"`` or ``"paper"``.
        verbose: show the resolved configuration (:class:`PresetSummary`).
        **overrides: values that replace the preset's; ``None`` keeps the preset's value.

    Returns:
        The resolved :class:`Config`, with ``scale`` and ``preset`` fields added.

    Raises:
        UnknownNameError: unknown preset, scale, or override key.
        InvalidInputError: an override that is not plain data or whose type differs from the field's (the
            preset's ``"types"`` block, else its value's), a field outside its range (the preset's
            ``"ranges"`` block, else :data:`DEFAULT_RANGES`), or an override of ``scale``/``preset``.
        TypeError: the preset itself is wrong: a field whose value says nothing of its type (``None``,
            ``[]``, ``{}``) missing from its ``"types"`` block, or a ``"types"`` entry that is no field.
    """
    check_scale(scale)
    declared = dict(spec.get("ranges", {}))
    types = dict(spec.get("types", {}))
    fields = {k for block in ("common", *SCALES) for k in spec.get(block, {})}
    for key, t in types.items():
        if key not in fields:
            raise TypeError(f"The \"types\" block of preset {name!r} declares {key!r}, which is no field of it.")
        _check_type(t, name, key)
    cfg = Config(preset=name, scale=scale)
    cfg.update(spec.get("common", {}))
    cfg.update(spec.get(scale, {}))
    if scale == "paper" and dry_run() and spec.get("dry"):
        check_dry_block(name, dict(cfg), spec["dry"])
        cfg.update(spec["dry"])
    defaults = dict(cfg)
    for key, value in defaults.items():
        if key not in ("preset", "scale") and not _complete(field_type(key, value, types)):
            raise TypeError(
                f"Preset {name!r} gives {key!r} the value {value!r} at scale {scale!r}, which does not say its "
                f"type; declare it in the preset's \"types\" block, e.g. \"types\": {{{key!r}: {_example(value)}}}.")
    from_parameters = []
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
        from_parameters.append(key)
    for key, value in cfg.items():
        if key not in ("preset", "scale"):
            check_field(name, key, value, defaults[key], cfg, declared, types)
    for key in from_parameters:
        _check_size(name, key, cfg[key], spec)
    if verbose:
        _show(PresetSummary(name, scale, dict(cfg), tuple(from_parameters)))
    return cfg
