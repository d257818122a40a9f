"""Tests of the CPU-scale shift and OOD sets built from Fashion-MNIST (each built in a temporary cache)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ensdiv.data import shifts
from ensdiv.data.corruptions import corrupt
from ensdiv.data.registry import get_dataset, list_datasets
from ensdiv.errors import EnsdivError, UnknownNameError


@pytest.fixture(autouse=True)
def _tmp_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ENSDIV_CACHE", str(tmp_path / "cache"))


def _check(ts, n, labelled=True):
    assert ts.x.shape == (n, 1, 28, 28) and ts.x.dtype == torch.float32
    assert ts.x.min() >= 0 and ts.x.max() <= 1
    assert ts.y.dtype == torch.int64 and len(ts.y) == n
    if labelled:
        assert set(ts.y.unique().tolist()) == set(range(10))
    else:
        assert (ts.y == -1).all()


def test_every_shift_set_is_registered_and_listed():
    names = shifts.shift_set_names()
    assert len([n for n in names if n.startswith("fmnist-c/")]) == 75
    assert {
        "fmnist-cbar/lines/1.6",
        "fmnist-cbar/plasma_noise/4.0",
        "fmnist-cbar/checkerboard_cutout/4.0",
        "fmnist-cbar/water_drop/7.0",
        "fmnist-v2",
        "fmnist-r",
        "digits",
        "noise/uniform",
    } <= set(names)
    listed = dict(list_datasets())
    assert set(names) <= set(listed)
    assert all(listed[n] for n in names)  # every set has a one-line description
    assert "10,000" in listed["fmnist-c/fog/3"] and "1,797" in listed["digits"]


def test_fashion_c_is_the_quantised_corruption_of_the_test_split():
    ts = get_dataset("fmnist-c/gaussian_noise/2")
    _check(ts, 10000)
    from ensdiv.data.fashion import load_fashion_mnist

    test = load_fashion_mnist("test")
    assert torch.equal(ts.y, test.y)
    ref = corrupt(test.x[:256], "gaussian_noise", 2, seed=shifts._seed("fmnist-c/gaussian_noise/2"))
    np.testing.assert_allclose(ts.x[:256].numpy(), (ref * 255).round().numpy() / 255, atol=1e-6)
    again = get_dataset("fmnist-c/gaussian_noise/2")  # second call: from the cache, identical
    assert torch.equal(again.x, ts.x)


def test_fashion_cbar_at_the_paper_strength():
    ts = get_dataset("fmnist-cbar/checkerboard_cutout/4.0")
    _check(ts, 10000)
    grey = (ts.x - 128 / 255).abs() < 1e-6
    assert 0.1 < grey.float().mean() < 0.3  # about p/2 = 20% of the pixels greyed out


def test_fashion_v2_is_clean_but_different():
    ts = get_dataset("fmnist-v2")
    _check(ts, 10000)
    from ensdiv.data.fashion import load_fashion_mnist

    test = load_fashion_mnist("test")
    diff = (ts.x - test.x).abs().mean().item()
    worst = (get_dataset("fmnist-c/gaussian_noise/1").x - test.x).abs().mean().item()
    assert 0.005 < diff < 0.15 and diff < 5 * worst
    # mean brightness of the product stays close: re-framed, not corrupted
    assert abs(ts.x.mean().item() - test.x.mean().item()) < 0.06


def test_resample_with_no_change_is_the_identity():
    x = torch.rand(3, 1, 28, 28)
    ys, xs = shifts.ops.pixel_grid(3, 28, 28)
    torch.testing.assert_close(shifts.ops.warp(x, ys, xs, padding="zeros"), x)
    assert torch.equal(shifts.resample(x, seed=1), shifts.resample(x, seed=1))


def test_renditions_by_hand():
    x = torch.zeros(1, 1, 28, 28)
    x[0, 0, 8:20, 10:18] = 0.7
    sil = shifts.render(x, "silhouette")
    assert sil[0, 0, 14, 14] > 0.99 and sil[0, 0, 0, 0] == 0
    out = shifts.render(x, "outline")
    assert out[0, 0, 14, 14] == 0 and out[0, 0, 8, 14] == 1 and out[0, 0, 7, 14] == 1 and out[0, 0, 0, 0] == 0
    sk = shifts.render(x, "sketch")
    assert sk[0, 0, 0, 0] == 1 and sk[0, 0, 14, 14] > 0.999 and sk[0, 0, 8, 14] < 0.5  # dark strokes on white
    cart = shifts.render(x, "cartoon")
    assert cart[0, 0, 14, 14] == 1 and cart[0, 0, 0, 0] == 0  # 0.7 is in the top tone (> 0.65)
    assert shifts.render(x * 0.5 / 0.7, "cartoon")[0, 0, 14, 14] == pytest.approx(2 / 3)  # 0.5: middle tone
    dots = shifts.render(torch.full((1, 1, 64, 64), 0.5), "stipple", seed=0)
    assert set(dots.unique().tolist()) <= {0.0, 1.0} and abs(dots.mean().item() - 0.5**1.2) < 0.03
    with pytest.raises(UnknownNameError, match="sketch"):
        shifts.render(x, "watercolour")
    ring = torch.zeros(1, 1, 12, 12)
    ring[0, 0, 2:10, 2:10] = 0.8
    ring[0, 0, 4:8, 4:8] = 0.0  # a dark hole inside the object: the silhouette fills it, the border does not
    sil = shifts.render(ring, "silhouette")
    assert sil[0, 0, 5, 5] > 0.99 and sil[0, 0, 0, 0] < 1e-3


@pytest.mark.slow
def test_fashion_r_mixes_styles_and_single_styles():
    ts = get_dataset("fmnist-r")
    _check(ts, 10000)
    sil = get_dataset("fmnist-r/silhouette")
    _check(sil, 10000)
    same = (ts.x == sil.x).flatten(1).all(1).float().mean().item()
    assert 0.1 < same < 0.35  # about a fifth of the mixed set is drawn as silhouettes


def test_digits_are_ood_28x28():
    ts = get_dataset("digits")
    _check(ts, 1797, labelled=False)
    assert ts.x[:, :, :4].max() == 0 and ts.x[:, :, :, -4:].max() == 0  # padded like MNIST
    from sklearn.datasets import load_digits

    first = torch.from_numpy(load_digits().images[0]).float() / 16
    small = torch.nn.functional.avg_pool2d(ts.x[0:1, :, 4:24, 4:24], 1)
    assert (
        torch.corrcoef(
            torch.stack(
                [torch.nn.functional.interpolate(small, size=8, mode="area").flatten(), first.flatten()]
            )
        )[0, 1]
        > 0.9
    )


@pytest.mark.parametrize("kind", shifts.NOISE_KINDS)
def test_noise_sets(kind):
    ts = get_dataset(f"noise/{kind}")
    _check(ts, 2000, labelled=False)
    if kind == "uniform":
        assert abs(ts.x.mean().item() - 0.5) < 0.01 and abs(ts.x.std().item() - (1 / 12) ** 0.5) < 0.01


def test_unknown_shift_names():
    with pytest.raises(UnknownNameError, match="fmnist-c/fog/3"):
        get_dataset("fmnist-c/fog/9")
    with pytest.raises(UnknownNameError, match="Valid shift sets"):
        shifts.load_shift_set("fmnist-q")
    with pytest.raises(UnknownNameError, match="uniform"):
        shifts.noise_ood("pink")
    with pytest.raises(EnsdivError, match="at most one style"):
        shifts._r_builder("sketch", "extra")


def test_held_out_class_split():
    from ensdiv.data.fashion import load_fashion_mnist
    from ensdiv.data.heldout import fashion_holdout

    test = load_fashion_mnist("test")
    ind, ood = get_dataset("fmnist-holdout/test"), get_dataset("fmnist-holdout/ood")
    assert len(ind) + len(ood) == len(test) == 10000 and len(ood) == int((test.y >= 8).sum())
    assert ind.y.max() == 7 and ind.num_classes == 8 and (ood.y == -1).all()
    assert torch.equal(ood.x, test.x[test.y >= 8])
    train = get_dataset("fmnist-holdout/train")
    assert set(train.y.unique().tolist()) == set(range(8)) and len(train) == int(
        (load_fashion_mnist("train").y < 8).sum()
    )
    with pytest.raises(UnknownNameError, match="ood"):
        fashion_holdout("extra")
