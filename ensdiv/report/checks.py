"""Checks: named questions over named quantities, with three outcomes, a null, and the book's one verdict rule.

A check asks whether a *statistic* of the quantities (a difference ``a - b``, a value ``a``, a ratio ``a / b``)
lies in a *region* (below or above a bound, or within a tolerance). On plain numbers the answer is yes or no.
On :class:`~ensdiv.report.uncertainty.Estimate` quantities the statistic gets an interval (computed from the
replicates, see :mod:`ensdiv.report.uncertainty`) and the check has three outcomes:

- ``"pass"``: the whole interval lies inside the region;
- ``"fail"``: the whole interval lies outside it;
- ``"inconclusive"``: it straddles the bound.

Every check also knows its **null**: the values its quantities would take if the effect were absent (a
comparison: ``a = b``; a sign: ``a = 0``; a ratio: ``a = b``; an equivalence: ``a`` off by twice the
tolerance; a threshold: a value the page states). A check that passes on its null cannot tell an effect from
none: it is shown, marked "passes with no effect", and not counted. A check without a null says why
(``null_reason``); it is counted, and the book's test of every page lists it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ensdiv.config import dry_run
from ensdiv.errors import InvalidInputError
from ensdiv.report.uncertainty import LEVEL, Estimate, _interval

__all__ = ["OUTCOMES", "SCALES", "VERDICTS", "Check", "Outcome", "above", "below", "correlated", "evaluate",
           "greater", "less", "negative", "noninferior", "null_values", "positive", "ratio_above", "significant",
           "verdict", "within"]

SCALES = ("smoke", "cpu", "paper")
VERDICTS = ("holds", "holds partly", "mixed", "inconclusive", "does not hold", "not testable at this scale")
OUTCOMES = ("pass", "fail", "inconclusive")

Values = Mapping[str, Any]


@dataclass(frozen=True)
class Check:
    """A named question over a dict of named quantities.

    Built-in checks (:func:`less`, :func:`greater`, :func:`within`, :func:`correlated`, ...) set
    ``statistic`` and ``region`` and get intervals; a hand-made check gives a ``rule`` on point values.

    Args:
        name: What the check asks, as a sentence ("err_ensemble is less than err_single").
        rule: Receives ``{quantity: float}`` (finite point values only) and returns a bool.
        needs: The quantities it reads. If empty, a ``KeyError`` raised by the rule means "not testable".
        statistic: ``f(values) -> number``, applied to point values or to replicate arrays elementwise.
        region: ``("<", bound)``, ``(">", bound)`` or ``("within", tolerance)`` for the statistic.
        null: The quantities under "no effect": a mapping of values that replace this run's, or a function
            of this run's values returning them.
        null_reason: Why the check has no null (shown when ``null`` is None).
        cites: The sentence of the paper the check tests (a quote or a pointer: "Sec. 4.2, 2nd paragraph").
    """

    name: str
    rule: Callable[[Mapping[str, float]], bool] | None = None
    needs: Sequence[str] = field(default=(), kw_only=True)
    statistic: Callable[[Mapping[str, Any]], Any] | None = field(default=None, kw_only=True)
    region: tuple[str, float] | None = field(default=None, kw_only=True)
    null: Mapping[str, float] | Callable[[Mapping[str, float]], Mapping[str, float]] | None = field(
        default=None, kw_only=True)
    null_reason: str = field(default="", kw_only=True)
    cites: str = field(default="", kw_only=True)

    def with_(self, **changes: Any) -> Check:
        """A copy with some fields changed (``check.with_(cites="Sec. 3")``)."""
        return Check(**{**{f: getattr(self, f) for f in self.__dataclass_fields__}, **changes})


@dataclass(frozen=True)
class Outcome:
    """What one check gave on one row of values: ``result`` (``"pass"``, ``"fail"``, ``"inconclusive"``, or
    None when a quantity is missing), the statistic's point value and its interval (None on plain numbers)."""

    result: str | None
    value: float | None = None
    interval: tuple[float, float] | None = None
    source: str | None = None


def _plain(value: Any) -> Any:
    """A JSON-safe copy of a shown value: numpy/torch scalars unwrapped, estimates to their value, NaN/inf → None."""
    if isinstance(value, Estimate):
        value = value.value
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        value = value.item()
    if value is None or isinstance(value, bool | int | str):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError, RuntimeError):
        return str(value)
    return number if math.isfinite(number) else None


def _number(value: Any, quantity: str) -> float | None:
    """A finite float, None for missing/NaN/inf; anything not a scalar number is an error."""
    plain = _plain(value)
    if isinstance(plain, str):
        raise InvalidInputError(f"Quantity {quantity!r} must be a scalar number or an Estimate, got "
                                f"{type(value).__name__}.")
    return None if plain is None else float(plain)


def _in_region(x: float, region: tuple[str, float]) -> bool:
    op, bound = region
    return x < bound if op == "<" else x > bound if op == ">" else abs(x) <= bound


def _region_outcome(interval: tuple[float, float], region: tuple[str, float]) -> str:
    lo, hi = interval
    op, bound = region
    if op == "<":
        return "pass" if hi < bound else "fail" if lo >= bound else "inconclusive"
    if op == ">":
        return "pass" if lo > bound else "fail" if hi <= bound else "inconclusive"
    return "pass" if -bound <= lo and hi <= bound else "fail" if lo > bound or hi < -bound else "inconclusive"


def _statistic_interval(check: Check, values: Values, level: float) -> tuple[tuple[float, float], str] | None:
    """The interval of ``check.statistic`` over the estimates among its quantities, and what it randomises.

    Bootstrap estimates of one group are combined replicate by replicate (paired); seed estimates with as many
    seeds, seed by seed; estimates of different groups are combined as independent (each replicate vector
    shuffled with a fixed seed). A single estimate known only by its interval maps its two ends (the built-in
    statistics of one quantity are monotone)."""
    ests = {k: values[k] for k in check.needs if isinstance(values.get(k), Estimate)}
    if not ests or check.statistic is None:
        return None
    sources = sorted({e.source for e in ests.values()})
    source = sources[0] if len(sources) == 1 else "both"
    if any(e.kind == "interval" for e in ests.values()):
        if len(ests) > 1:
            return None  # an interval alone cannot be combined with another quantity
        (name, est), = ests.items()
        iv = est.interval(level)
        if iv is None:
            return None
        ends = [float(check.statistic({**_points(values), name: end})) for end in iv]
        return (min(ends), max(ends)), source
    kinds = {e.kind for e in ests.values()}
    groups = {e.group for e in ests.values()}
    lengths = {len(e.replicates) for e in ests.values()}
    rng = np.random.default_rng(0)
    arrays = {}
    paired = (kinds == {"bootstrap"} and len(groups) == 1) or (kinds == {"seeds"} and len(lengths) == 1)
    size = min(lengths)
    for k, e in ests.items():
        reps = np.asarray(e.replicates, dtype=float)
        arrays[k] = reps[:size] if paired else rng.permutation(reps)[:size]
    kind = "seeds" if kinds == {"seeds"} else "bootstrap"
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = np.asarray(check.statistic({**_points(values), **arrays}), dtype=float)
    iv = _interval(np.broadcast_to(stat, (size,)).copy(), kind, level)
    return (iv, source) if iv is not None else None


def _points(values: Values) -> dict[str, float]:
    """The finite point values among ``values`` (labels, NaN and inf are invisible to rules)."""
    return {k: float(p) for k, v in values.items() if isinstance(p := _plain(v), int | float)}


def evaluate(check: Check, values: Values, *, level: float = LEVEL) -> Outcome:
    """Run one check on a dict of quantities.

    Args:
        check: The check.
        values: Quantities by name: floats, ints, bools, numpy scalars, 0-d torch tensors or
            :class:`~ensdiv.report.uncertainty.Estimate` objects.
        level: The interval level.

    Returns:
        The :class:`Outcome`: ``result`` None when a needed quantity is missing, NaN or infinite (or the rule
        raises ``KeyError``); ``"inconclusive"`` only when the statistic has an interval that straddles.
    """
    for name in check.needs:
        if _number(values.get(name), name) is None:
            return Outcome(None)
    points = _points(values)
    try:
        if check.statistic is not None and check.region is not None:
            value = float(check.statistic(points))
            if not math.isfinite(value):
                return Outcome(None)
            found = _statistic_interval(check, values, level)
            if found is None:
                return Outcome("pass" if _in_region(value, check.region) else "fail", value)
            iv, source = found
            return Outcome(_region_outcome(iv, check.region), value, iv, source)
        if check.rule is None:
            raise InvalidInputError(f"Check {check.name!r} has neither a rule nor a statistic and region.")
        return Outcome("pass" if check.rule(points) else "fail")
    except KeyError:
        return Outcome(None)


def null_values(check: Check, values: Values) -> dict[str, float] | None:
    """This run's point values with the check's quantities set to "no effect" (None: the check has no null)."""
    if check.null is None:
        return None
    points = _points(values)
    try:
        changed = check.null(points) if callable(check.null) else check.null
    except KeyError:
        return None
    return {**points, **{k: float(v) for k, v in changed.items()}}


def _fmt_name(text: str, name: str | None) -> str:
    return name or text


def _null_of(a: str, b: str, null: Mapping[str, float] | None) -> Any:
    return null if null is not None else (lambda v: {a: v[b]})


def less(a: str, b: str, *, name: str | None = None, margin: float = 0.0, cites: str = "",
         null: Mapping[str, float] | None = None) -> Check:
    """Check that ``a < b - margin`` (with estimates: the interval of ``a - b`` lies below ``-margin``).
    Null: ``a = b`` (or the values ``null`` states)."""
    by = f" by more than {margin:g}" if margin else ""
    return Check(_fmt_name(f"{a} is less than {b}{by}", name), needs=(a, b), statistic=lambda v: v[a] - v[b],
                 region=("<", -margin), null=_null_of(a, b, null), cites=cites)


def greater(a: str, b: str, *, name: str | None = None, margin: float = 0.0, cites: str = "",
            null: Mapping[str, float] | None = None) -> Check:
    """Check that ``a > b + margin`` (with estimates: the interval of ``a - b`` lies above ``margin``).
    Null: ``a = b`` (or the values ``null`` states)."""
    by = f" by more than {margin:g}" if margin else ""
    return Check(_fmt_name(f"{a} is greater than {b}{by}", name), needs=(a, b), statistic=lambda v: v[a] - v[b],
                 region=(">", margin), null=_null_of(a, b, null), cites=cites)


def noninferior(a: str, b: str, *, margin: float, higher_is_better: bool = True, name: str | None = None,
                cites: str = "") -> Check:
    """Check that ``a`` is no worse than ``b`` by more than ``margin`` (a non-inferiority claim: "matches",
    "on par with"): ``a - b > -margin`` when higher is better, ``a - b < margin`` otherwise; with estimates,
    the whole interval of ``a - b`` lies on the good side of the margin. Null: ``a`` worse than ``b`` by twice
    the margin (equality is not "no effect" here: it is what the claim says).

    Raises:
        InvalidInputError: a margin that is not positive.
    """
    if not margin > 0:
        raise InvalidInputError(f"noninferior() needs a positive margin, got {margin!r}.")
    word = "lower" if higher_is_better else "higher"
    sign = 1.0 if higher_is_better else -1.0
    return Check(_fmt_name(f"{a} is not {word} than {b} by more than {margin:g}", name), needs=(a, b),
                 statistic=lambda v: v[a] - v[b], region=(">", -margin) if higher_is_better else ("<", margin),
                 null=lambda v: {a: v[b] - sign * 2 * margin}, cites=cites)


def ratio_above(a: str, b: str, ratio: float, *, name: str | None = None, cites: str = "") -> Check:
    """Check that ``a / b > ratio`` (``b`` positive). Null: ``a = b`` (a ratio of one)."""
    return Check(_fmt_name(f"{a} is more than {ratio:g} times {b}", name), needs=(a, b),
                 statistic=lambda v: v[a] / v[b], region=(">", ratio), null=lambda v: {a: v[b]}, cites=cites)


def negative(a: str, *, name: str | None = None, cites: str = "") -> Check:
    """Check that ``a < 0``. Null: ``a = 0``."""
    return Check(_fmt_name(f"{a} is negative", name), needs=(a,), statistic=lambda v: v[a], region=("<", 0.0),
                 null={a: 0.0}, cites=cites)


def positive(a: str, *, name: str | None = None, cites: str = "") -> Check:
    """Check that ``a > 0``. Null: ``a = 0``."""
    return Check(_fmt_name(f"{a} is positive", name), needs=(a,), statistic=lambda v: v[a], region=(">", 0.0),
                 null={a: 0.0}, cites=cites)


def correlated(r: str, *, sign: int, name: str | None = None, cites: str = "") -> Check:
    """Check that the correlation ``r`` has the claimed sign (with an estimate: its interval excludes zero on
    that side). Null: ``r = 0``."""
    if sign not in (-1, 1):
        raise InvalidInputError(f"correlated() needs sign=1 or sign=-1, got {sign!r}.")
    word = "positive" if sign > 0 else "negative"
    return Check(_fmt_name(f"the correlation {r} is {word}", name), needs=(r,), statistic=lambda v: v[r],
                 region=(">" if sign > 0 else "<", 0.0), null={r: 0.0}, cites=cites)


def below(a: str, threshold: float, *, name: str | None = None, null: float | None = None, null_reason: str = "",
          cites: str = "") -> Check:
    """Check that ``a < threshold``. Null: ``a = null``, the value the page states ``a`` would take with no
    effect (chance level, the baseline's value); without one, say why in ``null_reason``."""
    return Check(_fmt_name(f"{a} is below {threshold:g}", name), needs=(a,), statistic=lambda v: v[a],
                 region=("<", threshold), null=None if null is None else {a: null},
                 null_reason=null_reason or ("" if null is not None else "no null value stated"), cites=cites)


def above(a: str, threshold: float, *, name: str | None = None, null: float | None = None, null_reason: str = "",
          cites: str = "") -> Check:
    """Check that ``a > threshold``. Null: ``a = null`` (see :func:`below`)."""
    return Check(_fmt_name(f"{a} is above {threshold:g}", name), needs=(a,), statistic=lambda v: v[a],
                 region=(">", threshold), null=None if null is None else {a: null},
                 null_reason=null_reason or ("" if null is not None else "no null value stated"), cites=cites)


def significant(p: str, *, alpha: float = 0.05, name: str | None = None, cites: str = "") -> Check:
    """Check that the p-value ``p`` is below ``alpha``. Null: ``p = 0.5`` (the median p-value with no effect).
    Prefer an interval check (:func:`correlated`, :func:`greater`) where the quantity has replicates."""
    return Check(_fmt_name(f"{p} is significant at the {alpha:g} level", name), needs=(p,),
                 statistic=lambda v: v[p], region=("<", alpha), null={p: 0.5}, cites=cites)


def within(a: str, b: str, *, rel: float | None = None, abs: float | None = None, name: str | None = None,
           cites: str = "") -> Check:
    """Check that ``|a - b| <= abs`` or ``|a - b| <= rel * |b|`` (the looser tolerance applies); with
    estimates, the interval of ``a - b`` lies inside the tolerance (an equivalence test). Null: ``a`` off by
    twice the tolerance.

    Raises:
        InvalidInputError: If neither tolerance is given, or one is negative.
    """
    if rel is None and abs is None:
        raise InvalidInputError("within() needs a tolerance: give rel=, abs= or both.")
    if (rel is not None and rel < 0) or (abs is not None and abs < 0):
        raise InvalidInputError(f"within() tolerances must be non-negative, got rel={rel}, abs={abs}.")
    tols = ([f"{rel * 100:g}%"] if rel is not None else []) + ([f"{abs:g}"] if abs is not None else [])

    def tolerance(v: Mapping[str, float]) -> float:
        return max(abs or 0.0, (rel or 0.0) * math.fabs(float(np.mean(v[b]))))

    def scaled(v: Mapping[str, Any]) -> Any:  # |a - b| / tolerance <= 1, so the region's bound is fixed
        tol = tolerance(v)
        return (v[a] - v[b]) / tol if tol > 0 else (v[a] - v[b]) * math.inf

    return Check(_fmt_name(f"{a} is within {' or '.join(tols)} of {b}", name), needs=(a, b), statistic=scaled,
                 region=("within", 1.0), null=lambda v: {a: v[b] + 2 * max(tolerance(v), 1e-12)}, cites=cites)


def _check_scale(scale: str) -> None:
    if scale not in SCALES:
        raise InvalidInputError(f"Unknown scale {scale!r}; valid scales: {', '.join(SCALES)}.")


def verdict(results: Sequence[str | bool | None], *, scale: str, total: int | None = None) -> str:
    """The book's one verdict rule over the *counted* checks' outcomes (see :mod:`ensdiv.report`).

    Args:
        results: One entry per counted check: ``"pass"``, ``"fail"``, ``"inconclusive"`` (True/False are read
            as pass/fail), or None when it could not be computed.
        scale: ``"smoke"``, ``"cpu"`` or ``"paper"`` (a paper *dry run*, :func:`ensdiv.config.dry_run`, is
            not testable like smoke).
        total: How many checks the claim has in all (default ``len(results)``); if fewer than half of them
            could be computed, the claim is not testable.

    Returns:
        One of :data:`VERDICTS`.

    >>> verdict(["pass", "pass"], scale="cpu"), verdict(["pass", "inconclusive"], scale="cpu")
    ('holds', 'holds partly')
    >>> verdict(["inconclusive"], scale="cpu"), verdict(["pass", "pass", "fail"], scale="cpu")
    ('inconclusive', 'mixed')
    >>> verdict(["pass", "fail"], scale="cpu"), verdict(["pass", None, None], scale="cpu")
    ('does not hold', 'not testable at this scale')
    """
    _check_scale(scale)
    norm = [r if r is None or isinstance(r, str) else "pass" if bool(r) else "fail" for r in results]
    computed = [r for r in norm if r is not None]
    total = len(norm) if total is None else total
    if scale == "smoke" or dry_run() or not computed or 2 * len(computed) < total:
        return "not testable at this scale"  # a dry run's numbers come from fake data and random weights
    passed, failed = computed.count("pass"), computed.count("fail")
    if failed == 0:
        return "holds" if passed == len(computed) else "holds partly" if passed else "inconclusive"
    return "does not hold" if 2 * failed >= len(computed) else "mixed"
