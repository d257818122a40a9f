"""The book's chapters: each chapter's pipeline and its scale presets, one module per chapter.

This package is the book, not the library: it imports :mod:`ensdiv`, and nothing in the library
imports it (``tests/test_layers.py`` checks). A notebook imports ``ensdiv`` and its own chapter module::

    import ensdiv as ed
    from ensdiv.chapters import packed_ensembles as ch
    cfg = ch.preset("tab01_efficient_ensembles", scale)

:mod:`~ensdiv.chapters.zoo` is the model zoo the chapters share. :func:`preset` and :func:`list_presets`
reach every chapter's presets by their full names (``"<slug>/<stem>"``), for tests and the CLI.

The chapter modules are imported when first asked for (``from ensdiv.chapters import sed``, ``chapters.MODULES``),
never by this package itself: a page imports its own chapter and what that chapter imports, so the code a page
runs, and what its cache entries and dry-run record depend on, leaves the other chapters out. :data:`SLUGS` names
each chapter's modules; ``tests/test_chapter_registry.py`` checks it against the modules' own ``SLUG``.
"""

from __future__ import annotations

import importlib
from typing import Any

from ensdiv.chapters._presets import chapter_preset
from ensdiv.config import Config
from ensdiv.errors import unknown_name

__all__ = [
    "CHAPTERS", "MODULES", "SLUGS", "preset", "list_presets", "list_dry_presets", "attack_similarity",
    "design_diversity", "design_diversity_training", "foundations", "packed_ensembles", "sed", "synthesis",
    "training_methods", "zoo",
]  # fmt: skip

#: chapter slug -> the names of its modules, in the book's order (design-diversity's two halves share one slug)
SLUGS: dict[str, tuple[str, ...]] = {
    "foundations": ("foundations",),
    "design-diversity": ("design_diversity", "design_diversity_training"),
    "training-methods": ("training_methods",),
    "attack-similarity": ("attack_similarity",),
    "packed-ensembles": ("packed_ensembles",),
    "sed": ("sed",),
    "synthesis": ("synthesis",),
}
_SUBMODULES = {name for names in SLUGS.values() for name in names} | {"zoo"}


def _modules(slug: str | None = None) -> list[Any]:
    names = SLUGS[slug] if slug is not None else [n for names in SLUGS.values() for n in names]
    return [importlib.import_module(f"{__name__}.{n}") for n in names]


def __getattr__(name: str) -> Any:
    """``MODULES`` (every chapter module), ``CHAPTERS`` (slug -> its first module) and the chapter modules
    themselves, imported on first use."""
    if name == "MODULES":
        return tuple(_modules())
    if name == "CHAPTERS":
        return {slug: _modules(slug)[0] for slug in SLUGS}
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _all_presets(slug: str | None = None) -> dict[str, dict]:
    return {name: spec for module in _modules(slug) for name, spec in module.PRESETS.items()}


def list_presets() -> list[str]:
    """The full names of every chapter's presets."""
    return sorted(_all_presets())


def list_dry_presets() -> list[str]:
    """The full names of the presets that have a ``"dry"`` block (empty when the paper sizes need no change): the
    notebooks ``ensdiv run --dry-run`` is known to run (:mod:`ensdiv.book.dry`)."""
    return sorted(name for name, spec in _all_presets().items() if "dry" in spec)


def preset(name: str, scale: str = "cpu", /, *, verbose: bool = True, **overrides: Any) -> Config:
    """The preset ``"<slug>/<stem>"`` resolved at ``scale`` (see :func:`ensdiv.config.resolve_preset`); only the
    chapter of ``slug`` is imported."""
    slug = name.split("/", 1)[0]
    if slug in SLUGS:
        for module in _modules(slug):
            if name in module.PRESETS:
                return chapter_preset(slug, module.PRESETS, name, scale, verbose=verbose, **overrides)
    raise unknown_name("preset", name, _all_presets())
