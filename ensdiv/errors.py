"""Errors that carry one clear sentence for the user.

Every bad-input case in ensdiv raises an :class:`EnsdivError` (or a subclass) whose message is a
single sentence saying what was wrong and what would work. The CLI prints that sentence without a
traceback; notebooks show it as the cell's error.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class EnsdivError(Exception):
    """Base class: a user-facing error with a one-sentence message."""


class UnknownNameError(EnsdivError, KeyError):
    """A model, dataset, preset, scale or parameter name that is not registered."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DataNotFoundError(EnsdivError, FileNotFoundError):
    """Data that is needed is not on this machine."""


class InvalidInputError(EnsdivError, ValueError):
    """An argument with the wrong shape, dtype, range or value (a metric's input, a loss's logits, ...).

    It is both an :class:`EnsdivError` (one sentence for the user) and a :class:`ValueError` (what
    torchmetrics and the standard library raise for the same mistakes), so either ``except`` catches it.
    """


class CorruptDataError(DataNotFoundError):
    """A data file is there but unreadable (truncated, corrupt, or not in the published format).

    A :class:`DataNotFoundError` (a usable copy is not on this machine) whose one sentence
    names the file, what was wrong with it and where to get a good copy.
    """


class CacheError(EnsdivError, OSError):
    """The cache directory cannot be used."""


class UndefinedMetricWarning(RuntimeWarning):
    """A metric is undefined for these inputs (it averages over an empty set, e.g. the SAT score of two models
    that share no correctly classified input) and NaN is returned. A :class:`RuntimeWarning`, as such
    warnings are elsewhere; its own class lets an executed page show it as a note (``ensdiv.progress``)."""


def unknown_name(kind: str, name: str, valid: Iterable[str]) -> UnknownNameError:
    """Build an :class:`UnknownNameError` that lists close matches and the valid names."""
    valid = sorted(valid)
    close = difflib.get_close_matches(str(name), valid, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    shown = ", ".join(valid[:40]) + (f", ... ({len(valid)} in all)" if len(valid) > 40 else "")
    plural = f"{kind[:-1]}ies" if kind.endswith("y") and kind[-2:-1] not in "aeiou" else f"{kind}s"
    return UnknownNameError(f"Unknown {kind} {name!r}.{hint} Valid {plural}: {shown}.")
