"""Shared helper of the chapter modules: resolve one of a chapter's presets by its notebook stem."""

from __future__ import annotations

import sys
from typing import Any

from ensdiv import tracing
from ensdiv.config import Config, list_holds, resolve_preset
from ensdiv.errors import unknown_name


def chapter_preset(
    slug: str, presets: dict[str, dict], stem: str, scale: str, /, *, verbose: bool = True, **overrides: Any
) -> Config:
    """Resolve ``presets["<slug>/<stem>"]`` at ``scale`` (a full ``"<slug>/<stem>"`` name works too).

    The page's record (and any cache entry computed meanwhile) notes this one preset, not the chapter's whole
    ``PRESETS``: an edit to one page's preset re-runs that page alone (:data:`ensdiv.tracing.KEYED`)."""
    name = stem if "/" in stem else f"{slug}/{stem}"
    if name not in presets:
        raise unknown_name(f"preset of the {slug} chapter", name, presets)
    file = _defining_file(presets)
    if file is not None:
        tracing.note_entry(file, "PRESETS", name)
    return resolve_preset(name, presets[name], scale, verbose=verbose, **overrides)


def _defining_file(presets: dict[str, dict]) -> str | None:
    """The source file of the chapter module whose ``PRESETS`` is ``presets``."""
    for mod_name, module in list(sys.modules.items()):
        if mod_name.startswith("ensdiv.chapters.") and module.__dict__.get("PRESETS") is presets:
            return module.__file__
    return None


def add_dry_blocks(presets: dict[str, dict], sizes: dict[str, Any], *, pick: dict[str, list] | None = None) -> None:
    """Give every preset of ``presets`` its ``"dry"`` block (:mod:`ensdiv.config`, "Dry runs"): the entries of
    ``sizes`` that are fields of its paper preset, and for each ``pick`` field (a list of names, such as a zoo)
    the picked names that its paper list holds (:func:`ensdiv.config.list_holds`: an element, a name a pattern
    matches, a name of a token such as ``"sat69"``), in the paper list's order, picked names in their own order
    under one pattern or token (none held: the field is left as is).
    A preset's own ``"dry"`` entries win."""
    for spec in presets.values():
        paper = {**spec.get("common", {}), **spec.get("paper", {})}
        dry = {k: v for k, v in sizes.items() if k in paper}
        for key, names in (pick or {}).items():
            held = list(dict.fromkeys(n for old in paper.get(key) or [] for n in names if list_holds([old], n)))
            if held:
                dry[key] = held
        spec["dry"] = {**dry, **spec.get("dry", {})}
