"""Shared helper of the chapter modules: resolve one of a chapter's presets by its notebook stem."""

from __future__ import annotations

from typing import Any

from ensdiv.config import Config, resolve_preset
from ensdiv.errors import unknown_name


def chapter_preset(
    slug: str, presets: dict[str, dict], stem: str, scale: str, /, *, verbose: bool = True, **overrides: Any
) -> Config:
    """Resolve ``presets["<slug>/<stem>"]`` at ``scale`` (a full ``"<slug>/<stem>"`` name works too)."""
    name = stem if "/" in stem else f"{slug}/{stem}"
    if name not in presets:
        raise unknown_name(f"preset of the {slug} chapter", name, presets)
    return resolve_preset(name, presets[name], scale, verbose=verbose, **overrides)
