"""Dry runs of the ``paper`` presets: ``ensdiv run --dry-run`` (issue #33).

A researcher's first paper-scale run should not be where a preset bug shows up. A dry run executes a notebook at
``paper`` scale with everything a CPU cannot afford replaced, and nothing else:

- the data: ``$ENSDIV_DATA`` is a folder of fake data in every published layout the loaders read
  (:func:`ensdiv.data.paper.fake.write_fake_data`; the design-diversity chapter's ImageNet-C̄ strengths, the
  training-methods chapter's logits/features folder for a made-up population), written once per build folder;
- the weights: every pretrained timm model is built with random weights (:func:`ensdiv.config.dry_run`);
- the sizes: each preset's ``"dry"`` block (images, epochs, steps, numbers of models or seeds; checked to change
  sizes only, :func:`ensdiv.config.check_dry_block`);
- the verdicts: every claim is *not testable at this scale*.

Everything a dry run writes stays in its own folder (``<build>/dry-run``: ``data/``, ``cache/``, ``executed/``):
it never mixes with a real paper run's cache or pages.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from ensdiv.book.run import _environ
from ensdiv.chapters.design_diversity import CBAR_SETS
from ensdiv.chapters.training_methods import DRY_POPULATION
from ensdiv.config import DRY_RUN_ENV
from ensdiv.data.paper.fake import is_fake_data, write_fake_data, write_training_methods
from ensdiv.paths import build_dir

__all__ = ["dry_root", "dry_environment", "prepare_dry_data"]


def dry_root() -> Path:
    """Where dry runs write: ``<build>/dry-run`` (``$ENSDIV_BUILD`` or ``_build``)."""
    return build_dir() / "dry-run"


def _cbar_levels() -> dict[str, list[float]]:
    """The ImageNet-C̄ strengths the book's paper presets read (the design-diversity chapter's four sets)."""
    levels: dict[str, list[float]] = {}
    for corruption, strength in CBAR_SETS.values():
        levels.setdefault(corruption, []).append(float(strength))
    return levels


def prepare_dry_data(root: Path) -> Path:
    """The fake data folder below ``root`` (``root/data``), written unless this version already wrote it: every
    published layout, and the training-methods folder of its made-up population (``DRY_POPULATION``)."""
    data = root / "data"
    if not is_fake_data(data):
        write_training_methods(data / "training-methods", DRY_POPULATION)
        write_fake_data(data, cbar_levels=_cbar_levels())  # last: its stamp says the folder is complete
    return data


@contextlib.contextmanager
def dry_environment(root: Path | None = None) -> Iterator[Path]:
    """Within the block: ``$ENSDIV_DATA`` is the fake data, ``$ENSDIV_CACHE`` the dry run's own cache and
    :data:`~ensdiv.config.DRY_RUN_ENV` is ``1`` (papermill's kernels inherit them); yields the dry-run folder.
    The variables are restored afterwards."""
    root = Path(root or dry_root())
    with _environ(ENSDIV_DATA=str(prepare_dry_data(root)), ENSDIV_CACHE=str(root / "cache"), **{DRY_RUN_ENV: "1"}):
        yield root
