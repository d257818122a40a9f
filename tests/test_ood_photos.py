"""SED's OpenImages-O analogue: crops of every photograph the installed packages ship, as listed."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ensdiv.data import ood_sets


@pytest.fixture(scope="module")
def photographs():
    return ood_sets._photographs()


def test_every_listed_photograph_loads_and_they_are_distinct(photographs):
    assert len(photographs) == len(ood_sets.PHOTOGRAPHS) == 17
    assert all(p.ndim == 2 and min(p.shape) >= 2 * ood_sets.SIZE and 0 <= p.min() and p.max() <= 1
               for p in photographs)
    # distinct pictures: no two share their shape and their mean (a stereo twin or a duplicate would)
    signatures = {(p.shape, round(float(p.mean()), 4)) for p in photographs}
    assert len(signatures) == len(photographs)
    assert not any(name.endswith(("brick.png", "grass.png", "gravel.png", "text.png", "page.png"))
                   for name in ood_sets.PHOTOGRAPHS)  # textures and photographs of text play other sets


def test_crops_cycle_through_the_photographs_and_match_a_naive_crop(tmp_path, monkeypatch, photographs):
    monkeypatch.setenv("ENSDIV_CACHE", str(tmp_path))
    n = 2 * len(photographs)
    data = ood_sets.photo_crops(n, seed=3)
    assert data.x.shape == (n, 1, 28, 28) and (data.y == -1).all()
    assert 0 <= float(data.x.min()) and float(data.x.max()) <= 1
    # the k-th crop comes from photograph k mod 17: redo crop 5 by hand with the same draws
    rng = np.random.default_rng(3)
    for k in range(6):
        photo = photographs[k % len(photographs)]
        h, w = photo.shape
        side = int(round(np.exp(rng.uniform(np.log(56), np.log(min(h, w))))))
        top, left = int(rng.integers(0, h - side + 1)), int(rng.integers(0, w - side + 1))
    crop = torch.from_numpy(photo[top:top + side, left:left + side].copy())[None, None]
    small = F.interpolate(crop, size=(28, 28), mode="bilinear", antialias=True, align_corners=False)[0]
    lo, hi = small.flatten().quantile(0.01), small.flatten().quantile(0.99)
    naive = ((small - lo) / (hi - lo).clamp_min(1e-3)).clamp(0, 1)
    assert torch.allclose(data.x[5], (naive * 255).round() / 255, atol=1 / 255 + 1e-6)
