"""Random JPEG files for the fake paper-scale folders of the tests (ImageNet layouts, OOD sets)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image


def write_jpegs(folder: Path, n: int, seed: int) -> None:
    """``n`` random RGB JPEGs ``img<i>.JPEG`` of different heights (40 + 4 i) by 48 px in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (40 + 4 * i, 48, 3), dtype=np.uint8)).save(folder / f"img{i}.JPEG")
