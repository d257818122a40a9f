"""SED's OpenImages-O analogue: crops of every photograph the installed packages ship, as listed: 17 large ones and
scikit-image's 200 small LFW ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ensdiv.data import ood_sets


@pytest.fixture(scope="module")
def photographs():
    return ood_sets._photographs()


@pytest.fixture(scope="module")
def small():
    return ood_sets._small_photographs()


def test_every_listed_photograph_loads_and_they_are_distinct(photographs):
    assert len(photographs) == len(ood_sets.PHOTOGRAPHS) == 17
    assert all(p.ndim == 2 and min(p.shape) >= 2 * ood_sets.SIZE and 0 <= p.min() and p.max() <= 1
               for p in photographs)
    # distinct pictures: no two share their shape and their mean (a stereo twin or a duplicate would)
    signatures = {(p.shape, round(float(p.mean()), 4)) for p in photographs}
    assert len(signatures) == len(photographs)
    assert not any(name.endswith(("brick.png", "grass.png", "gravel.png", "text.png", "page.png"))
                   for name in ood_sets.PHOTOGRAPHS)  # textures and photographs of text play other sets


def test_the_small_photographs_are_200_distinct_25_pixel_pictures_faces_first(small):
    assert len(small) == 200 and all(p.shape == (25, 25) and 0 <= p.min() and p.max() <= 1 for p in small)
    flat = np.stack([p.ravel() for p in small])
    assert len(np.unique(flat.round(4), axis=0)) == 200  # no duplicate picture
    # the file's order, as scikit-image documents it: 100 faces, then 100 patches without a face; a face is
    # brighter in its centre than in its corners on average, a random patch is not
    centre = flat.reshape(200, 25, 25)[:, 8:17, 8:17].mean(axis=(1, 2))
    corners = flat.reshape(200, 25, 25)[:, [0, 0, -1, -1], [0, -1, 0, -1]].mean(axis=1)
    assert (centre - corners)[:100].mean() > (centre - corners)[100:].mean() + 0.05


def _naive_crop(photo, rng):
    h, w = photo.shape
    low = min(56, round(0.8 * min(h, w)))
    side = int(round(np.exp(rng.uniform(np.log(low), np.log(min(h, w))))))
    top, left = int(rng.integers(0, h - side + 1)), int(rng.integers(0, w - side + 1))
    crop = torch.from_numpy(photo[top:top + side, left:left + side].copy())[None, None]
    small = F.interpolate(crop, size=(28, 28), mode="bilinear", antialias=True, align_corners=False)[0]
    lo, hi = small.flatten().quantile(0.01), small.flatten().quantile(0.99)
    return ((small - lo) / (hi - lo).clamp_min(1e-3)).clamp(0, 1), side


def test_crops_alternate_large_and_small_photographs_and_match_a_naive_crop(tmp_path, monkeypatch, photographs,
                                                                            small):
    monkeypatch.setenv("ENSDIV_CACHE", str(tmp_path))
    n = 40
    data = ood_sets.photo_crops(n, seed=3)
    assert data.x.shape == (n, 1, 28, 28) and (data.y == -1).all()
    assert 0 <= float(data.x.min()) and float(data.x.max()) <= 1
    assert "217 photographs" in data.description
    # crop k comes from large photograph k // 2 mod 17 (k even) or small photograph k // 2 mod 200 (k odd): redo
    # every crop by hand with the same draws
    rng = np.random.default_rng(3)
    for k in range(n):
        photo = photographs[(k // 2) % 17] if k % 2 == 0 else small[(k // 2) % 200]
        naive, side = _naive_crop(photo, rng)
        assert (56 <= side) if k % 2 == 0 else (20 <= side <= 25)
        assert torch.allclose(data.x[k], (naive * 255).round() / 255, atol=1 / 255 + 1e-6), k


def test_the_registered_set_is_described_by_what_it_holds():
    from ensdiv.data.registry import list_datasets

    assert dict(list_datasets())["photos"] == ood_sets.PHOTOS_DESCRIPTION
