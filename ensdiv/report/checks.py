"""Checks: named questions over named quantities, with three outcomes, an empirical null, and the book's one rule.

A check asks whether a *statistic* of the quantities (a difference ``a - b``, a value ``a``, a ratio ``a / b``)
lies in a *region* (below or above a bound, or within a tolerance). On plain numbers the answer is yes or no.
On :class:`~ensdiv.report.uncertainty.Estimate` quantities the statistic gets an interval at :data:`LEVEL`
(from the replicates, see :mod:`ensdiv.report.uncertainty`) and a one-sided p-value, and the check has three
outcomes:

- ``"pass"``: the whole interval lies inside the region;
- ``"fail"``: the whole interval lies outside it;
- ``"inconclusive"``: it straddles the bound.

What makes a check *evidence* is decided in :func:`ensdiv.report.claim` from what the check carries: its
empirical null (:class:`~ensdiv.report.nulls.Null`, data built from this run's with the effect removed), the
data where an absence claim is true (``truth``), the unit its interval must resample, the gates it depends on,
the checks that imply it, and its evidence key.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from ensdiv.config import SCALES, dry_run
from ensdiv.errors import InvalidInputError
from ensdiv.report.nulls import Null
from ensdiv.report.uncertainty import LEVEL, Estimate, _interval

__all__ = ["ALPHA", "KEEPS", "OUTCOMES", "RULE", "SCALES", "UNDECIDED", "VERDICTS", "Check", "Outcome", "above",
           "at_bound", "below", "correlated", "evaluate", "greater", "holm", "kept_share", "less", "negative",
           "noninferior", "null_p", "positive", "randomisation_p", "ratio_above", "significant", "verdict", "within"]

VERDICTS = ("holds", "holds partly", "mixed", "inconclusive", "does not hold", "cannot decide",
            "not testable at this scale")
#: The verdicts that decide nothing: too few checks counted.
UNDECIDED = ("cannot decide", "not testable at this scale")
OUTCOMES = ("pass", "fail", "inconclusive")
#: The one-sided level of every test: each end of a :data:`LEVEL` interval.
ALPHA = (1 - LEVEL) / 2

#: The share of a check's null draws (moved to its bound) inside its region above which the null is taken to keep
#: what the region asks (:attr:`Check.beyond`): a null at no effect puts about half its draws there, or fewer.
KEEPS = 0.75

#: The verdict rule in words: the claims page, ``book/intro.md`` and :mod:`ensdiv.report` state this text.
RULE = (
    "Each check computes its statistic (a difference, a ratio, a correlation) on this run's numbers and on null "
    "data built from this run's own data with the effect removed (two methods swapped at random within each seed, "
    "two halves of one method's seeds, models dealt into random groups, permuted labels). Its *p-value* is the "
    "share of null draws at least as extreme on the claimed side: (1 + k) / (1 + D) over D random draws, k / D "
    "where the draws enumerate every pattern (so S seeds can reach no less than 1 / 2^S); for a margin or a "
    "tolerance the draws are first moved to its bound (the statistic minus the margin), and a claim about a bound "
    "(a ratio of at least 0.8, one component above every other) may read its own bootstrap centred on the bound "
    "instead (a bootstrap test, widened for few units); a claim that an effect is "
    "absent or small reads the data where it is true, so moved, and its null as given, and takes the larger "
    "p-value. A check *passes* when its "
    f"p-value survives Holm's correction over the claim's counted checks at {ALPHA:.0%} (one-sided) and its "
    f"{LEVEL:.0%} interval lies wholly on the claimed side; it *fails* when the mirror p-value (the other side) "
    "survives Holm and the interval lies wholly on the other side; otherwise it is *inconclusive*, as is a check "
    "whose interval does not resample what the claim is about (its *unit*: seeds for trained methods, models for "
    "groups of models; shown as \"seed variance not covered\"), and a check whose null keeps what its region asks "
    f"({KEEPS:.0%} of its draws or more inside the region once moved to the bound: a part-whole correlation; a null "
    "centred at the bound is exempt) unless it names what it tests beyond that null. A check is *not counted* when "
    f"its null cannot reach {ALPHA:.0%} (\"cannot decide with S seeds (needs S')\") or none of the claim's can "
    f"reach Holm's first step ({ALPHA:.0%} over the checks counted), when it has no null (or, for a claim that an "
    "effect is absent, no data where the claim is true), when the paper's own numbers fail it (a finding about the "
    "paper), when a gate it depends on fails (a premise the paper states that this run does not meet), or when "
    "another check of the claim implies it (on this run and on every null draw, else the mark is refused); a check "
    "not counted still counts in the claim's total, and no "
    "evidence counts in two claims. Facts (parameter counts, costs, identities) never count. Over the counted "
    "checks: **holds**: all pass; **holds partly**: none fails and at least half pass; **inconclusive**: none "
    "fails and fewer than half pass; **mixed**: some fail and some pass, or some fail and fewer than half; "
    "**does not hold**: none passes and at least half fail. When fewer than half of a claim's checks count, it is "
    "not decided: **not testable at this scale** where the scale is the reason (a smoke build or a dry run, a "
    "premise such as GPU parallelism, a gate this run fails), else **cannot decide**, with the reasons and what "
    "would settle it."
)

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
        null: Null data built from this run's data with the effect removed (:class:`~ensdiv.report.Null`);
            without one the check is shown and not counted.
        null_reason: Why no null can be built from data (shown when ``null`` is None).
        truth: For a claim that an effect is absent or small (``absence``): data built so that the claim is
            true; a check that cannot pass there is not counted.
        absence: The check claims an effect is absent or small (:func:`within` and :func:`noninferior` are).
        unit: What the check's interval must resample, one of :data:`~ensdiv.report.replication.UNITS` (default: the
            claim's unit).
        evidence: The key of the evidence it counts ("packed-ensembles/table-1/pe-vs-single-accuracy"): the book
            refuses two counted checks with one key.
        implied_by: Names of checks of the same claim that imply this one (shown, not counted).
        gates: Names of the claim's gates this check depends on (default: all of them).
        cites: The sentence of the paper the check tests (a quote or a pointer: "Sec. 4.2, 2nd paragraph").
        null_at: The statistic's value with no effect (0 for a difference, 1 for a ratio) when the region's bound
            is elsewhere (a margin, a tolerance): the null draws are moved from there to the bound before the
            p-value is read (:func:`at_bound`). None: the draws are used where they are.
        null_scale: Move them by a factor (a ratio) rather than by a difference.
        beyond: What the check's null keeps and the check tests past it ("each sub-network's gradient scale"),
            for a null that deliberately sits inside the region (an association kept, only its remainder
            dealt). Without it, a check whose null draws lie in its region (:data:`KEEPS` of them or more, moved
            to the bound) is inconclusive: that null keeps what the region asks, so beating it tests something
            the check does not name. A centred null (its own bootstrap moved to the bound) is exempt: it sits at
            the bound by construction, and its share inside the region measures only its skew.
    """

    name: str
    rule: Callable[[Mapping[str, float]], bool] | None = None
    needs: Sequence[str] = field(default=(), kw_only=True)
    statistic: Callable[[Mapping[str, Any]], Any] | None = field(default=None, kw_only=True)
    region: tuple[str, float] | None = field(default=None, kw_only=True)
    null: Null | None = field(default=None, kw_only=True)
    null_reason: str = field(default="", kw_only=True)
    truth: Null | None = field(default=None, kw_only=True)
    absence: bool = field(default=False, kw_only=True)
    unit: str | None = field(default=None, kw_only=True)
    evidence: str | None = field(default=None, kw_only=True)
    implied_by: Sequence[str] = field(default=(), kw_only=True)
    gates: Sequence[str] | None = field(default=None, kw_only=True)
    cites: str = field(default="", kw_only=True)
    null_at: float | None = field(default=None, kw_only=True)
    null_scale: bool = field(default=False, kw_only=True)
    beyond: str = field(default="", kw_only=True)

    def __post_init__(self) -> None:
        if self.null is not None and not isinstance(self.null, Null):
            # the former point-on-the-bound null (a number, a mapping or a function typed on the page): kept out,
            # with the reason, so a page not yet re-written still runs and shows why its check does not count
            object.__setattr__(self, "null", None)
            object.__setattr__(self, "null_reason", TYPED_NULL)
        if self.truth is not None and not isinstance(self.truth, Null):
            raise InvalidInputError(f"Check {self.name!r}: truth= must be an ed.report.Null built from this run's "
                                    f"data, got {type(self.truth).__name__}.")
        object.__setattr__(self, "implied_by", tuple(self.implied_by))
        if self.gates is not None:
            object.__setattr__(self, "gates", tuple(self.gates))

    def with_(self, **changes: Any) -> Check:
        """A copy with some fields changed (``check.with_(null=ed.report.seed_flips(...))``)."""
        return Check(**{**{f: getattr(self, f) for f in self.__dataclass_fields__}, **changes})


@dataclass(frozen=True)
class Outcome:
    """What one check gave on one row of values: ``result`` (``"pass"``, ``"fail"``, ``"inconclusive"``, or
    None when a quantity is missing), the statistic's point value, its interval, what the interval resampled and
    the one-sided p-value of "the statistic is not in the region" (None on plain numbers or a given interval)."""

    result: str | None
    value: float | None = None
    interval: tuple[float, float] | None = None
    source: str | None = None
    p: float | None = None


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


def _statistic_interval(check: Check, values: Values, level: float, *, with_p: bool = True
                        ) -> tuple[tuple[float, float], str, float | None] | None:
    """The interval of ``check.statistic`` over the estimates among its quantities, what it resampled, and the
    one-sided p-value of "not in the region".

    Bootstrap estimates of one group are combined replicate by replicate (paired); seed estimates with as many
    seeds, seed by seed; estimates of different groups are combined as independent (each replicate vector
    shuffled with a fixed seed). A single estimate known only by its interval maps its two ends (the built-in
    statistics of one quantity are monotone) and has no p-value."""
    ests = {k: values[k] for k in check.needs if isinstance(values.get(k), Estimate)}
    if not ests or check.statistic is None:
        return None
    source = " + ".join(sorted({e.source for e in ests.values()}))
    if any(e.kind == "interval" for e in ests.values()):
        if len(ests) > 1:
            return None  # an interval alone cannot be combined with another quantity
        (name, est), = ests.items()
        iv = est.interval(level)
        if iv is None:
            return None
        ends = [float(check.statistic({**_points(values), name: end})) for end in iv]
        return (min(ends), max(ends)), source, None
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
        stat = np.broadcast_to(np.asarray(check.statistic({**_points(values), **arrays}), dtype=float),
                               (size,)).copy()
    iv = _interval(stat, kind, level)
    if iv is None:
        return None
    return iv, source, _p_value(stat, kind, check.region) if with_p else None


def _p_value(stat: np.ndarray, kind: str, region: tuple[str, float] | None) -> float | None:
    """One-sided p-value that the statistic is *not* in ``region``: the share of bootstrap replicates on the
    wrong side of the bound (``(k + 1) / (B + 1)``), or a one-sample t-test over per-seed values; for an
    equivalence region the larger of its two one-sided tests (TOST).

    >>> round(_p_value(np.array([0.1, 0.2, 0.3, -0.1]), "bootstrap", (">", 0.0)), 3)
    0.4
    >>> round(_p_value(np.array([1.0, 2.0, 3.0]), "seeds", (">", 0.0)), 4)  # 2 df: 1/2 - t / (2 sqrt(t² + 2))
    0.0371
    """
    if region is None:
        return None
    stat = stat[np.isfinite(stat)]
    if stat.size < 2:
        return None
    op, bound = region
    if kind == "bootstrap":
        wrong = {">": np.sum(stat <= bound), "<": np.sum(stat >= bound),
                 "within": max(np.sum(stat >= bound), np.sum(stat <= -bound))}[op]
        return float((wrong + 1) / (stat.size + 1))
    mean, se, df = stat.mean(), stat.std(ddof=1) / math.sqrt(stat.size), stat.size - 1
    if se == 0:
        return 0.0 if _in_region(float(mean), region) else 1.0
    if op == ">":
        return float(stats.t.sf((mean - bound) / se, df))
    if op == "<":
        return float(stats.t.cdf((mean - bound) / se, df))
    return float(max(stats.t.sf((mean + bound) / se, df), stats.t.cdf((mean - bound) / se, df)))


def _points(values: Values) -> dict[str, float]:
    """The finite point values among ``values`` (labels, NaN and inf are invisible to rules)."""
    return {k: float(p) for k, v in values.items() if isinstance(p := _plain(v), int | float)}


def evaluate(check: Check, values: Values, *, level: float = LEVEL, with_p: bool = True) -> Outcome:
    """Run one check on a dict of quantities.

    Args:
        check: The check.
        values: Quantities by name: floats, ints, bools, numpy scalars, 0-d torch tensors or
            :class:`~ensdiv.report.uncertainty.Estimate` objects.
        level: The interval level.
        with_p: Also compute the interval's own one-sided p-value (``Outcome.p``; a null draw needs none).

    Returns:
        The :class:`Outcome`: ``result`` None when a needed quantity is missing, NaN or infinite (or the rule
        raises ``KeyError``, or a ratio's denominator is zero); ``"inconclusive"`` only when the statistic has an
        interval that straddles.
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
            found = _statistic_interval(check, values, level, with_p=with_p)
            if found is None:
                return Outcome("pass" if _in_region(value, check.region) else "fail", value)
            iv, source, p = found
            return Outcome(_region_outcome(iv, check.region), value, iv, source, p)
        if check.rule is None:
            raise InvalidInputError(f"Check {check.name!r} has neither a rule nor a statistic and region.")
        return Outcome("pass" if check.rule(points) else "fail")
    except (KeyError, ZeroDivisionError):  # a quantity missing, or a ratio over a zero point value
        return Outcome(None)


def _fmt_name(text: str, name: str | None) -> str:
    return name or text


#: Why a check built without an empirical null has none.
NO_NULL = "no null built from this run's data"
#: Why a number typed on the page is not a null (pages not yet re-written pass one).
TYPED_NULL = "a value typed on the page is not a null built from this run's data"


def _null(null: Any, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``null``/``null_reason`` fields for a builder's ``null=`` argument: a :class:`Null` is kept; a number
    or mapping typed on the page (the former point-on-the-bound null) is kept out, with the reason. A
    ``null_reason`` among the builder's ``options`` (why no null can be built) is taken from them and kept when
    there is no null."""
    reason = (options or {}).pop("null_reason", "")
    if isinstance(null, Null):
        return {"null": null}
    return {"null": None, "null_reason": reason if reason and null is None else NO_NULL if null is None
            else TYPED_NULL}


def less(a: str, b: str, *, name: str | None = None, margin: float = 0.0, cites: str = "", null: Null | None = None,
         **options: Any) -> Check:
    """Check that ``a < b - margin`` (with estimates: the interval of ``a - b`` lies below ``-margin``).
    ``null``: data with the effect removed (:class:`~ensdiv.report.Null`); ``options``: the other
    :class:`Check` fields (``evidence``, ``unit``, ``gates``, ``implied_by``)."""
    by = f" by more than {margin:g}" if margin else ""
    return Check(_fmt_name(f"{a} is less than {b}{by}", name), needs=(a, b), statistic=lambda v: v[a] - v[b],
                 region=("<", -margin), cites=cites, null_at=0.0, **_null(null, options), **options)


def greater(a: str, b: str, *, name: str | None = None, margin: float = 0.0, cites: str = "",
            null: Null | None = None, **options: Any) -> Check:
    """Check that ``a > b + margin`` (with estimates: the interval of ``a - b`` lies above ``margin``).
    ``null`` and ``options`` as in :func:`less`."""
    by = f" by more than {margin:g}" if margin else ""
    return Check(_fmt_name(f"{a} is greater than {b}{by}", name), needs=(a, b), statistic=lambda v: v[a] - v[b],
                 region=(">", margin), cites=cites, null_at=0.0, **_null(null, options), **options)


def noninferior(a: str, b: str, *, margin: float, higher_is_better: bool = True, name: str | None = None,
                cites: str = "", null: Null | None = None, truth: Null | None = None, **options: Any) -> Check:
    """Check that ``a`` is no worse than ``b`` by more than ``margin`` (a non-inferiority claim: "matches",
    "on par with"): ``a - b > -margin`` when higher is better, ``a - b < margin`` otherwise; with estimates,
    the whole interval of ``a - b`` lies on the good side of the margin. An absence claim: ``null`` is data where
    ``a`` is worse by the margin, ``truth`` data where the two are equal (e.g. an A/A of ``b``).

    Raises:
        InvalidInputError: a margin that is not positive.
    """
    if not margin > 0:
        raise InvalidInputError(f"noninferior() needs a positive margin, got {margin!r}.")
    word = "lower" if higher_is_better else "higher"
    return Check(_fmt_name(f"{a} is not {word} than {b} by more than {margin:g}", name), needs=(a, b),
                 statistic=lambda v: v[a] - v[b], region=(">", -margin) if higher_is_better else ("<", margin),
                 cites=cites, truth=truth, absence=True, null_at=0.0, **_null(null, options), **options)


def ratio_above(a: str, b: str, ratio: float, *, name: str | None = None, cites: str = "", null: Null | None = None,
                **options: Any) -> Check:
    """Check that ``a / b > ratio`` (``b`` positive); ``null`` and ``options`` as in :func:`less`."""
    return Check(_fmt_name(f"{a} is more than {ratio:g} times {b}", name), needs=(a, b),
                 statistic=lambda v: v[a] / v[b], region=(">", ratio), cites=cites, null_at=1.0, null_scale=True,
                 **_null(null, options), **options)


def negative(a: str, *, name: str | None = None, cites: str = "", null: Null | None = None,
             **options: Any) -> Check:
    """Check that ``a < 0``; ``null`` and ``options`` as in :func:`less`."""
    return Check(_fmt_name(f"{a} is negative", name), needs=(a,), statistic=lambda v: v[a], region=("<", 0.0),
                 cites=cites, null_at=0.0, **_null(null, options), **options)


def positive(a: str, *, name: str | None = None, cites: str = "", null: Null | None = None,
             **options: Any) -> Check:
    """Check that ``a > 0``; ``null`` and ``options`` as in :func:`less`."""
    return Check(_fmt_name(f"{a} is positive", name), needs=(a,), statistic=lambda v: v[a], region=(">", 0.0),
                 cites=cites, null_at=0.0, **_null(null, options), **options)


def correlated(r: str, *, sign: int, name: str | None = None, cites: str = "", null: Null | None = None,
               **options: Any) -> Check:
    """Check that the correlation ``r`` has the claimed sign (with an estimate: its interval excludes zero on
    that side). ``null``: e.g. the correlation with one series permuted, or computed on models dealt at random
    (a part–whole correlation stays high there and so never counts)."""
    if sign not in (-1, 1):
        raise InvalidInputError(f"correlated() needs sign=1 or sign=-1, got {sign!r}.")
    word = "positive" if sign > 0 else "negative"
    return Check(_fmt_name(f"the correlation {r} is {word}", name), needs=(r,), statistic=lambda v: v[r],
                 region=(">" if sign > 0 else "<", 0.0), cites=cites, null_at=0.0, **_null(null, options), **options)


def below(a: str, threshold: float, *, name: str | None = None, null: Null | float | None = None,
          null_reason: str = "", cites: str = "", **options: Any) -> Check:
    """Check that ``a < threshold``. ``null``: data where the effect is absent (the statistic on permuted labels,
    a model at chance), never a typed number; without one, say why in ``null_reason``. For a claim that
    something is small, pass ``absence=True`` and ``truth=``."""
    built = _null(null)
    return Check(_fmt_name(f"{a} is below {threshold:g}", name), needs=(a,), statistic=lambda v: v[a],
                 region=("<", threshold), cites=cites,
                 **{**built, **({"null_reason": null_reason} if null_reason and not built["null"] else {})},
                 **options)


def above(a: str, threshold: float, *, name: str | None = None, null: Null | float | None = None,
          null_reason: str = "", cites: str = "", **options: Any) -> Check:
    """Check that ``a > threshold`` (``null`` as in :func:`below`)."""
    built = _null(null)
    return Check(_fmt_name(f"{a} is above {threshold:g}", name), needs=(a,), statistic=lambda v: v[a],
                 region=(">", threshold), cites=cites,
                 **{**built, **({"null_reason": null_reason} if null_reason and not built["null"] else {})},
                 **options)


def significant(p: str, *, alpha: float = 0.05, name: str | None = None, cites: str = "", null: Null | None = None,
                **options: Any) -> Check:
    """Check that the p-value ``p`` is below ``alpha`` (``null``: the p-value recomputed on null data).
    Prefer an interval check (:func:`correlated`, :func:`greater`) where the quantity has replicates."""
    return Check(_fmt_name(f"{p} is significant at the {alpha:g} level", name), needs=(p,),
                 statistic=lambda v: v[p], region=("<", alpha), cites=cites, **_null(null, options), **options)


def within(a: str, b: str, *, rel: float | None = None, abs: float | None = None, name: str | None = None,
           cites: str = "", null: Null | None = None, truth: Null | None = None, **options: Any) -> Check:
    """Check that ``|a - b| <= abs`` or ``|a - b| <= rel * |b|`` (the looser tolerance applies); with
    estimates, the interval of ``a - b`` lies inside the tolerance (an equivalence test). An absence claim:
    ``null`` is data where the two differ by the tolerance, ``truth`` data where they are equal.

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
                 region=("within", 1.0), cites=cites, truth=truth, absence=True, null_at=0.0, **_null(null, options),
                 **options)


def _check_scale(scale: str) -> None:
    if scale not in SCALES:
        raise InvalidInputError(f"Unknown scale {scale!r}; valid scales: {', '.join(SCALES)}.")


def holm(p_values: Sequence[float | None], *, alpha: float = ALPHA) -> list[bool | None]:
    """Which of several one-sided tests still reject at ``alpha`` after Holm's step-down correction (the
    ``k``-th smallest of ``m`` p-values against ``alpha / (m - k + 1)``, stopping at the first that is above);
    None where a test has no p-value. Written out rather than taken from statsmodels, whose ``multipletests``
    runs a full garbage collection on every call (``benchmarks/bench_holm.py``), and every claim calls Holm twice.

    >>> holm([0.01, 0.04, 0.03, None])  # 0.01 <= 0.05/3; then 0.03 > 0.05/2 stops the step-down
    [True, False, False, None]
    """
    known = sorted((float(p), i) for i, p in enumerate(p_values) if p is not None)
    out: list[bool | None] = [None if p is None else False for p in p_values]
    for k, (p, i) in enumerate(known):
        if p > alpha / (len(known) - k):
            break
        out[i] = True
    return out


def randomisation_p(observed: float, draws: Any, *, side: str, exact: bool = False) -> float | None:
    """One-sided randomisation p-value of ``observed`` against the statistic's values on null draws.

    ``side=">"``: the share of draws at least as large as ``observed`` (``"<"``: at least as small), as
    ``(1 + k) / (1 + D)`` over ``D`` random draws, or ``k / D`` (at least ``1 / D``) when the draws enumerate
    every pattern, this run's own among them. Draws that are not finite are left out; None when none is left.

    >>> randomisation_p(2.0, [0.5, -1.0, 2.0, 3.0], side=">")  # k = 2 of D = 4: (1 + 2) / (1 + 4)
    0.6
    >>> randomisation_p(2.0, [2.0, -2.0, 0.0, 0.0], side=">", exact=True)  # all 4 patterns: only this run's
    0.25
    """
    d = np.asarray(draws, dtype=float).ravel()
    d = d[np.isfinite(d)]
    if d.size == 0 or not math.isfinite(observed):
        return None
    tol = 1e-9 * max(1.0, math.fabs(observed))  # this run's own pattern recomputed may differ in the last bits
    k = int(np.sum(d >= observed - tol) if side == ">" else np.sum(d <= observed + tol))
    return max(k, 1) / d.size if exact else (k + 1) / (d.size + 1)


def at_bound(check: Check, draws: Any, bound: float) -> np.ndarray:
    """The null draws of ``check``'s statistic moved from its no-effect value (``check.null_at``) to ``bound``:
    ``t + bound - null_at`` (``t * bound / null_at`` for a ratio); unchanged when ``null_at`` is None.

    >>> at_bound(greater("a", "b", margin=0.5), [-0.1, 0.0, 0.2], 0.5).tolist()  # the statistic minus the margin
    [0.4, 0.5, 0.7]
    """
    t = np.asarray(draws, dtype=float)
    if check.null_at is None:
        return t
    return t * (bound / check.null_at) if check.null_scale else t + (bound - check.null_at)


def kept_share(check: Check, draws: Any) -> float | None:
    """The share of ``check``'s null draws (its statistic on each, moved to the region's bound as
    :func:`null_p` reads them) that lie inside its region; None for a tolerance, a check without a region, or no
    finite draw. Above :data:`KEEPS` the null keeps what the region asks.

    >>> kept_share(correlated("r", sign=1), [0.8, 0.9, 0.7, -0.1])  # a part-whole r stays high when dealt
    0.75
    >>> kept_share(greater("a", "b", margin=0.5), [-0.1, 0.0, 0.1, 0.2])  # moved to the margin: 0.4 .. 0.7
    0.5
    """
    if check.region is None or check.region[0] == "within":
        return None
    t = at_bound(check, draws, check.region[1]).ravel()
    t = t[np.isfinite(t)]
    if t.size == 0:
        return None
    return float(np.mean([_in_region(float(x), check.region) for x in t]))


def null_p(check: Check, observed: float, draws: Any, *, exact: bool = False) -> tuple[float | None, float | None]:
    """The two one-sided p-values of a check against its null draws: that its statistic lies in the claimed
    region, and that it lies outside (the mirror test), each with the draws moved to the region's bound.

    For a tolerance (:func:`within`) the first is the larger of the two one-sided tests against the draws at
    ``+tolerance`` and at ``-tolerance`` (TOST), the second twice the smaller of the outward ones. A check whose
    null draws are a reference rather than its no-effect value moved to the bound (``null_at`` None: a threshold
    against a model at chance) has no mirror p-value: its fail rests on its interval alone.

    >>> null_p(greater("a", "b"), 3.0, [-1.0, 1.0, -2.0, 2.0, 0.0])  # (1 + 0) / 6 and (1 + 5) / 6
    (0.16666666666666666, 1.0)
    """
    if check.region is None:
        return None, None
    op, bound = check.region
    if op == "within":
        hi, lo = at_bound(check, draws, bound), at_bound(check, draws, -bound)
        inside = [randomisation_p(observed, hi, side="<", exact=exact),
                  randomisation_p(observed, lo, side=">", exact=exact)]
        outside = [randomisation_p(observed, hi, side=">", exact=exact),
                   randomisation_p(observed, lo, side="<", exact=exact)]
        if None in inside or None in outside:
            return None, None
        return max(inside), min(1.0, 2 * min(outside))
    t = at_bound(check, draws, bound)
    if check.null_at is None:  # draws from a reference (chance, permuted labels), not from the bound: no mirror
        return randomisation_p(observed, t, side=op, exact=exact), None
    other = "<" if op == ">" else ">"
    return randomisation_p(observed, t, side=op, exact=exact), randomisation_p(observed, t, side=other, exact=exact)


def verdict(results: Sequence[str | bool | None], *, scale: str, total: int | None = None) -> str:
    """The book's one verdict rule over the *counted* checks' outcomes (after Holm; see :data:`RULE`).

    Args:
        results: One entry per counted check: ``"pass"``, ``"fail"``, ``"inconclusive"`` (True/False are read
            as pass/fail), or None when it could not be computed.
        scale: ``"smoke"``, ``"cpu"`` or ``"paper"`` (a paper *dry run*, :func:`ensdiv.config.dry_run`, is
            not testable like smoke).
        total: How many checks the claim built, counted or not (default ``len(results)``); if fewer than half of
            them count and could be computed, the claim *cannot decide* (:func:`ensdiv.report.claim` says
            *not testable at this scale* instead where the scale is the reason).

    Returns:
        One of :data:`VERDICTS`.

    >>> verdict(["pass", "pass"], scale="cpu"), verdict(["pass", "inconclusive"], scale="cpu")
    ('holds', 'holds partly')
    >>> verdict(["pass", "inconclusive", "inconclusive"], scale="cpu")  # fewer than half pass
    'inconclusive'
    >>> verdict(["inconclusive"], scale="cpu"), verdict(["pass", "pass", "fail"], scale="cpu")
    ('inconclusive', 'mixed')
    >>> verdict(["pass", "fail"], scale="cpu"), verdict(["fail", "fail", "inconclusive"], scale="cpu")
    ('mixed', 'does not hold')
    >>> verdict(["pass"], scale="cpu", total=3), verdict(["pass", None, None], scale="cpu")  # 1 of 3 counted
    ('cannot decide', 'cannot decide')
    """
    _check_scale(scale)
    norm = [r if r is None or isinstance(r, str) else "pass" if bool(r) else "fail" for r in results]
    computed = [r for r in norm if r is not None]
    total = len(norm) if total is None else total
    if scale == "smoke" or dry_run():
        return "not testable at this scale"  # a dry run's numbers come from fake data and random weights
    if not computed or 2 * len(computed) < total:
        return "cannot decide"
    passed, failed = computed.count("pass"), computed.count("fail")
    if failed == 0:
        return "holds" if passed == len(computed) else "holds partly" if 2 * passed >= len(computed) else \
            "inconclusive"
    if passed:
        return "mixed"
    return "does not hold" if 2 * failed >= len(computed) else "mixed"
