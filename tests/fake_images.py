"""Random JPEG files for the fake paper-scale folders of the tests (ImageNet layouts, OOD sets)."""

from __future__ import annotations

from pathlib import Path

from ensdiv.data.paper.fake import write_images


def write_jpegs(folder: Path, n: int, seed: int) -> None:
    """``n`` random RGB JPEGs ``img<i>.JPEG`` of different heights (40 + 4 i) by 48 px in ``folder``."""
    write_images(folder, n, seed)
