"""The accuracy band of §3.2 carried from the paper's ImageNet base to another base model, as a ratio of errors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ensdiv.chapters.training_methods.paper import PAPER_BAND, PAPER_BAND_CENTRE, PAPER_BASE_ACCURACY
from ensdiv.errors import InvalidInputError

if TYPE_CHECKING:
    from ensdiv.chapters.training_methods.population import Population

BAND_MODES = ("error_ratio", "points", "absolute")


def error_ratio_band(base_accuracy: float, *, band: Sequence[float] = PAPER_BAND,
                     centre: float = PAPER_BAND_CENTRE) -> tuple[float, float]:
    """The paper's accuracy band carried to another base model as a ratio of errors.

    §3.2 keeps models in the absolute band 74-78 % around a base of 76.2 % (our reading, see
    :data:`PAPER_BAND_CENTRE`): errors of 26.0 % and 22.0 % against the base's 23.8 %, i.e. from
    22.0 / 23.8 = 0.924 to 26.0 / 23.8 = 1.092 times the base's error. A model of another task is in the band
    when its error is within those ratios of its own base's error: with base accuracy ``a`` the band is
    ``[1 - 1.092 (1 - a), 1 - 0.924 (1 - a)]``. Points around the base would not carry over: two points are
    8 % of the paper's error but 20 % of a 90 %-accurate base's.

    Args:
        base_accuracy: the base model's accuracy (a fraction in (0, 1)).
        band: the paper's ``(low, high)`` accuracy band in %.
        centre: the paper's base accuracy in % (inside ``band``).

    Returns:
        ``(low, high)`` accuracy bounds (fractions).

    Raises:
        InvalidInputError: an accuracy outside (0, 1), or a band that does not hold its centre.

    >>> [round(v, 4) for v in error_ratio_band(0.762)]
    [0.74, 0.78]
    >>> [round(v, 4) for v in error_ratio_band(0.9)]
    [0.8908, 0.9076]
    """
    lo, hi = (float(b) for b in band)
    if not 0.0 < base_accuracy < 1.0:
        raise InvalidInputError(f"The base accuracy must be a fraction in (0, 1), got {base_accuracy}.")
    if not lo <= centre <= hi < 100.0:
        raise InvalidInputError(f"The paper's band {tuple(band)} must hold its centre {centre} and stay below 100 %.")
    err = 1.0 - base_accuracy
    return 1.0 - err * (100.0 - lo) / (100.0 - centre), 1.0 - err * (100.0 - hi) / (100.0 - centre)


def band_reading(pop: Population, mode: str) -> str:
    """How the band was read, for the page: with ``mode="error_ratio"`` the derivation, and which models the other
    reading of the paper's base accuracy (76.5 % instead of 76.2 %) would move across the band's edges."""
    lo, hi = pop.band
    if mode != "error_ratio":
        return f"Band [{100 * lo:.2f}, {100 * hi:.2f}] % on validation accuracy ({mode})."
    a = pop.accuracy[pop.base]
    p_lo, p_hi = PAPER_BAND
    r_lo, r_hi = (100 - p_hi) / (100 - PAPER_BAND_CENTRE), (100 - p_lo) / (100 - PAPER_BAND_CENTRE)
    alt = error_ratio_band(a, centre=PAPER_BASE_ACCURACY)
    moved = sorted(k for k, v in pop.accuracy.items()
                   if k != pop.base and (alt[0] <= v <= alt[1]) != (lo <= v <= hi))
    return (f"The paper keeps {p_lo:g}-{p_hi:g} % around its base's {PAPER_BAND_CENTRE:g} %: errors {r_lo:.3f} to "
            f"{r_hi:.3f} times the base's. Our base's validation error is {100 * (1 - a):.2f} %, so the band is "
            f"[{100 * lo:.2f}, {100 * hi:.2f}] % validation accuracy. Read around {PAPER_BASE_ACCURACY:g} % (the "
            f"abstract's figure) it would be [{100 * alt[0]:.2f}, {100 * alt[1]:.2f}] %, which moves "
            f"{', '.join(moved) if moved else 'no model'} across an edge.")
