"""The book's chapters: each chapter's pipeline and its scale presets, one module per chapter.

This package is the book, not the library: it imports :mod:`ensdiv`, and nothing in the library
imports it (``tests/test_layers.py`` checks). A notebook imports ``ensdiv`` and its own chapter module::

    import ensdiv as ed
    from ensdiv.chapters import packed_ensembles as ch
    cfg = ch.preset("tab01_efficient_ensembles", scale)

:mod:`~ensdiv.chapters.zoo` is the model zoo the chapters share. :func:`preset` and :func:`list_presets`
reach every chapter's presets by their full names (``"<slug>/<stem>"``), for tests and the CLI.
"""

from __future__ import annotations

from typing import Any

from ensdiv.chapters import (
    attack_similarity,
    design_diversity,
    design_diversity_training,
    foundations,
    packed_ensembles,
    sed,
    synthesis,
    training_methods,
    zoo,
)
from ensdiv.chapters._presets import chapter_preset
from ensdiv.config import Config
from ensdiv.errors import unknown_name

__all__ = [
    "CHAPTERS", "MODULES", "preset", "list_presets", "list_dry_presets", "attack_similarity", "design_diversity",
    "design_diversity_training", "foundations", "packed_ensembles", "sed", "synthesis", "training_methods", "zoo",
]

#: every chapter module (a chapter may have two: design-diversity's halves share one slug)
MODULES = (foundations, design_diversity, design_diversity_training, training_methods, attack_similarity,
           packed_ensembles, sed, synthesis)
#: chapter slug -> its first module
CHAPTERS = {m.SLUG: m for m in reversed(MODULES)}


def _all_presets() -> dict[str, dict]:
    return {name: spec for module in MODULES for name, spec in module.PRESETS.items()}


def list_presets() -> list[str]:
    """The full names of every chapter's presets."""
    return sorted(_all_presets())


def list_dry_presets() -> list[str]:
    """The full names of the presets that have a ``"dry"`` block (empty when the paper sizes need no change): the
    notebooks ``ensdiv run --dry-run`` is known to run (:mod:`ensdiv.book.dry`)."""
    return sorted(name for name, spec in _all_presets().items() if "dry" in spec)


def preset(name: str, scale: str = "cpu", /, *, verbose: bool = True, **overrides: Any) -> Config:
    """The preset ``"<slug>/<stem>"`` resolved at ``scale`` (see :func:`ensdiv.config.resolve_preset`)."""
    slug = name.split("/", 1)[0]
    if slug not in CHAPTERS:
        raise unknown_name("preset", name, _all_presets())
    return chapter_preset(slug, _all_presets(), name, scale, verbose=verbose, **overrides)
