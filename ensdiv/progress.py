"""How long work reports itself: live bars for people, one line per finished unit for rendered pages.

``ENSDIV_PROGRESS`` decides: ``bars`` (the default: tqdm bars, as widgets in Jupyter when ipywidgets is
installed, else text), ``lines`` (no bars; one line per finished model, set, attack — what the book's
executed pages show; ``ensdiv run`` and ``ensdiv book`` set it for the notebooks they execute) or
``off`` (silent).

In ``lines`` mode (an executed page) the library's own warnings reach the reader once each, as a note in
plain words (:func:`show_warnings_as_notes`): no file path, no line of source, no repeat.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterable
from typing import Any

from tqdm import tqdm as text_tqdm

__all__ = ["mode", "bar", "line", "show_warnings_as_notes"]

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


_PACKAGE = os.path.dirname(os.path.abspath(__file__))
_NOTES_ON = False


def _ours(category: type, filename: str) -> bool:
    """A warning of the library: its class is defined in ensdiv, or ensdiv code raised it."""
    return category.__module__.split(".")[0] == "ensdiv" or os.path.abspath(filename).startswith(_PACKAGE)


def show_warnings_as_notes() -> None:
    """Show the library's warnings on an executed page as a note admonition, once per distinct message and
    without the file path and source line Python prints; other packages' warnings are shown as Python shows
    them. Installed at import in ``lines`` mode (idempotent)."""
    import html
    import warnings

    global _NOTES_ON
    if _NOTES_ON:
        return
    _NOTES_ON = True
    seen: set[tuple[str, str]] = set()
    default = warnings.showwarning

    def show(message: Any, category: type, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        if not _ours(category, filename):
            default(message, category, filename, lineno, file, line)
            return
        key = (category.__name__, str(message))
        if key in seen:
            return
        seen.add(key)
        text = html.escape(str(message))
        try:
            from IPython.display import HTML, display

            display(HTML(f'<div class="admonition note"><p class="admonition-title">Note</p><p>{text}</p></div>'))
        except ImportError:
            print(f"Note: {message}")

    warnings.showwarning = show


if mode() == "lines":
    show_warnings_as_notes()
