"""How long work reports itself: live bars for people, one line per finished unit for rendered pages.

``ENSDIV_PROGRESS`` decides: ``bars`` (the default: tqdm bars, as widgets in Jupyter when ipywidgets is
installed, else text), ``lines`` (no bars; one line per finished model, set, attack — what the book's
executed pages show; ``ensdiv run`` and ``ensdiv book`` set it for the notebooks they execute) or
``off`` (silent).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterable
from typing import Any

from tqdm import tqdm as text_tqdm

__all__ = ["mode", "bar", "line"]

MODES = ("bars", "lines", "off")


def mode() -> str:
    """``bars``, ``lines`` or ``off`` (from ``$ENSDIV_PROGRESS``; unknown values mean ``bars``)."""
    value = os.environ.get("ENSDIV_PROGRESS", "bars").strip().lower()
    return value if value in MODES else "bars"


def _bar_class() -> Any:
    if importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.auto import tqdm

        return tqdm
    return text_tqdm  # tqdm.auto without ipywidgets warns "IProgress not found" in a notebook


def bar(iterable: Iterable | None = None, *, disable: bool = False, **kwargs: Any) -> Any:
    """A tqdm bar, disabled unless the mode is ``bars`` (arguments as ``tqdm``)."""
    return _bar_class()(iterable, disable=disable or mode() != "bars", **kwargs)


def line(message: str) -> None:
    """Print ``message`` as one line when the mode is ``lines`` (bars carry it otherwise)."""
    if mode() == "lines":
        print(message, flush=True)
