"""textures/frost: the CPU-scale Textures analogue built from the frost photographs of a package."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ensdiv.data import textures as tx
from ensdiv.data.registry import get_dataset
from ensdiv.errors import DataNotFoundError


def test_frost_textures_are_ood_crops_in_range_and_seeded():
    a = tx.frost_textures(40, seed=3)
    b = tx.frost_textures.__wrapped__(40, seed=3)  # recomputed, not the lru cache
    assert a.x.shape == (40, 1, 28, 28) and a.x.dtype == torch.float32
    assert torch.equal(a.x, b.x)
    assert bool((a.y == -1).all())
    assert float(a.x.min()) >= 0.0 and float(a.x.max()) <= 1.0
    # the stretch maps each crop's 1st-99th percentiles onto [0, 1]
    q = a.x.flatten(1).quantile(torch.tensor([0.01, 0.99]), dim=1)
    assert torch.allclose(q[0], torch.zeros(40), atol=0.02) and torch.allclose(q[1], torch.ones(40), atol=0.02)
    assert not torch.equal(a.x, tx.frost_textures.__wrapped__(40, seed=4).x)


def test_first_crop_matches_a_naive_crop_of_the_first_photograph():
    """Crop 0 cut by hand from the same random draws: its 4x4 block means track ours (r > 0.95)."""
    photo = tx.frost_photographs()[0]
    rng = np.random.default_rng(7)
    side = int(round(np.exp(rng.uniform(np.log(28), np.log(min(280, *photo.shape))))))
    top, left = rng.integers(0, photo.shape[0] - side + 1), rng.integers(0, photo.shape[1] - side + 1)
    crop = photo[top:top + side, left:left + side]
    # block-average the crop to 4x4 and compare the ranking of blocks with the 28x28 result
    ours = tx.frost_textures.__wrapped__(1, seed=7).x[0, 0].numpy()
    edges = np.linspace(0, side, 5).astype(int)
    e28 = np.linspace(0, 28, 5).astype(int)
    naive = np.array([[crop[edges[i]:edges[i + 1], edges[j]:edges[j + 1]].mean() for j in range(4)] for i in range(4)])
    mine = np.array([[ours[e28[i]:e28[i + 1], e28[j]:e28[j + 1]].mean() for j in range(4)] for i in range(4)])
    # a monotone stretch keeps the order of block means (up to resampling noise)
    r = np.corrcoef(naive.ravel(), mine.ravel())[0, 1]
    assert r > 0.95


def test_registered_under_textures_frost():
    t = get_dataset("textures/frost")
    assert len(t) == tx.N_CROPS and t.name == "textures/frost"


def test_missing_assets_package_one_sentence(monkeypatch):
    def boom(name):
        raise ModuleNotFoundError(name)

    monkeypatch.setattr(tx, "files", boom)
    with pytest.raises(DataNotFoundError, match="pip install torch-uncertainty-assets"):
        tx.frost_photographs()
