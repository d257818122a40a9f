"""Tests of the ImageNet-C / ImageNet-C̄ corruptions: shapes, ranges, determinism, monotonicity, references."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import ndimage

from ensdiv.data.corruptions import PAPER_CBAR, corrupt, list_corruptions, ops
from ensdiv.errors import EnsdivError, UnknownNameError

C_NAMES = list_corruptions("c")
CBAR_NAMES = list_corruptions("cbar")
CBAR_LEVELS = [1.0, 2.5, 4.0, 7.0, 10.0]
# Corruptions with no random draw: their output does not depend on the seed.
SEEDLESS = {"defocus_blur", "zoom_blur", "brightness", "contrast", "pixelate", "jpeg_compression"}


def _images(n: int = 6, c: int = 1, h: int = 28, w: int = 28) -> torch.Tensor:
    """A deterministic batch that looks like Fashion-MNIST: bright textured objects on black."""
    ys, xs = torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w), indexing="ij")
    out = []
    for i in range(n):
        r = 0.45 + 0.08 * (i % 3)
        blob = ((xs / (r + 0.1 * (i % 2))) ** 2 + (ys / r) ** 2 < 1).float()
        texture = 0.6 + 0.3 * torch.sin(6 * xs + i) * torch.cos(4 * ys)
        img = (blob * texture).clamp(0, 1)
        out.append(torch.stack([img * (1 - 0.2 * k) for k in range(c)]))
    return torch.stack(out)


def _levels(name: str) -> list[float]:
    return [1, 2, 3, 4, 5] if name in C_NAMES else CBAR_LEVELS


def test_list_corruptions_has_the_families():
    assert len(C_NAMES) == 15 and C_NAMES[0] == "gaussian_noise" and C_NAMES[-1] == "jpeg_compression"
    assert set(PAPER_CBAR) <= set(CBAR_NAMES)
    assert len(CBAR_NAMES) >= 12
    assert list_corruptions() == C_NAMES + CBAR_NAMES


@pytest.mark.parametrize("name", C_NAMES + CBAR_NAMES)
def test_shape_dtype_range_and_determinism(name):
    x = _images(4, 1)
    level = _levels(name)[2]
    y = corrupt(x, name, level, seed=3)
    assert y.shape == x.shape and y.dtype == x.dtype
    assert y.min() >= 0 and y.max() <= 1
    assert torch.equal(y, corrupt(x, name, level, seed=3))
    assert not torch.equal(y, x)
    if name not in SEEDLESS:
        assert not torch.equal(y, corrupt(x, name, level, seed=4))


@pytest.mark.parametrize("name", C_NAMES + CBAR_NAMES)
def test_damage_grows_with_severity(name):
    """Mean |corrupted - clean| strictly increases over the five levels (same seed)."""
    x = _images(8, 1)
    damage = [(corrupt(x, name, s, seed=0) - x).abs().mean().item() for s in _levels(name)]
    assert all(b > a for a, b in zip(damage, damage[1:], strict=False)), damage


@pytest.mark.parametrize("name", C_NAMES + CBAR_NAMES)
def test_rgb_non_square_and_single_image(name):
    x = _images(2, 3, 40, 56)
    level = _levels(name)[3]
    y = corrupt(x, name, level, seed=1, profile="imagenet")
    assert y.shape == x.shape and 0 <= y.min() and y.max() <= 1
    single = corrupt(x[0], name, level, seed=1, profile="imagenet")
    assert single.shape == x[0].shape


@pytest.mark.parametrize(
    "name", ["gaussian_noise", "frost", "lines", "jpeg_compression", "motion_blur", "snow"]
)
def test_imagenet_resolution(name):
    x = torch.nn.functional.interpolate(_images(2, 3), size=224, mode="bilinear").clamp(0, 1)
    y = corrupt(x, name, _levels(name)[4], seed=0)
    assert y.shape == (2, 3, 224, 224) and 0 <= y.min() and y.max() <= 1


def test_other_channel_counts():
    x = _images(2, 4)
    for name in [
        "jpeg_compression",
        "brightness",
        "frost",
        "plasma_noise",
        "transverse_chromatic_abberation",
    ]:
        assert corrupt(x, name, _levels(name)[1], seed=0).shape == x.shape


# ---------------------------------------------------------------- against hand-computed references
def test_contrast_and_brightness_match_the_formulas():
    x = _images(3, 1)
    xn = x.numpy()
    mean = xn.mean(axis=(1, 2, 3), keepdims=True)
    np.testing.assert_allclose(
        corrupt(x, "contrast", 2, seed=0).numpy(), np.clip((xn - mean) * 0.5 + mean, 0, 1), atol=1e-6
    )
    np.testing.assert_allclose(
        corrupt(x, "brightness", 5, seed=0).numpy(), np.clip(xn + 0.3, 0, 1), atol=1e-6
    )
    rgb = torch.tensor([0.2, 0.4, 0.5]).view(1, 3, 1, 1).expand(1, 3, 2, 2)  # HSV value 0.5 -> 0.6
    np.testing.assert_allclose(
        corrupt(rgb, "brightness", 2, seed=0)[0, :, 0, 0].numpy(), [0.24, 0.48, 0.6], atol=1e-6
    )


def test_pixelate_matches_a_loop_over_blocks():
    x = _images(2, 1)
    y = corrupt(x, "pixelate", 5, seed=0).numpy()  # factor 0.65: 28 px -> 18 cells
    cells = np.floor(np.arange(28) * 18 / 28).astype(int)
    ref = np.empty_like(x.numpy())
    for n in range(2):
        for i in range(28):
            for j in range(28):
                rows, cols = cells == cells[i], cells == cells[j]
                ref[n, 0, i, j] = x.numpy()[n, 0][np.ix_(rows, cols)].mean()
    np.testing.assert_allclose(y, ref, atol=1e-5)


def test_impulse_noise_sets_a_fraction_of_pixels_to_0_or_1():
    x = torch.full((4, 1, 64, 64), 0.5)
    y = corrupt(x, "impulse_noise", 5, seed=0)  # cifar profile: 7% of pixels
    changed = y != 0.5
    assert set(y[changed].unique().tolist()) <= {0.0, 1.0}
    assert abs(changed.float().mean().item() - 0.07) < 0.01


def test_gaussian_noise_has_the_published_std():
    x = torch.full((4, 1, 64, 64), 0.5)
    assert abs((corrupt(x, "gaussian_noise", 3, seed=0) - x).std().item() - 0.08) < 0.004
    x224 = torch.full((1, 3, 96, 96), 0.5)
    assert (
        abs((corrupt(x224, "gaussian_noise", 1, seed=0, profile="imagenet") - x224).std().item() - 0.08)
        < 0.006
    )


def test_checkerboard_greys_half_the_cells_times_strength():
    x = torch.zeros(64, 1, 28, 28)
    y = corrupt(x, "checkerboard_cutout", 4.0, seed=0)
    assert set(y.unique().tolist()) <= {0.0, 0.5}
    assert abs((y == 0.5).float().mean().item() - 0.2) < 0.05


def test_blurs_keep_constant_images():
    x = torch.full((2, 3, 32, 32), 0.3)
    for name in ["defocus_blur", "glass_blur", "motion_blur", "zoom_blur", "circular_motion_blur"]:
        torch.testing.assert_close(corrupt(x, name, _levels(name)[4], seed=0), x, atol=1e-5, rtol=0)


def test_gaussian_blur_matches_scipy():
    x = torch.rand(2, 1, 20, 24, generator=torch.Generator().manual_seed(0))
    ref = np.stack(
        [ndimage.gaussian_filter(x[i, 0].numpy(), 1.0, mode="mirror", truncate=3.0) for i in range(2)]
    )
    np.testing.assert_allclose(ops.gaussian_blur(x, 1.0)[:, 0].numpy(), ref, atol=1e-5)


def test_per_image_blur_matches_scipy_correlate():
    x = torch.rand(2, 2, 16, 16, generator=torch.Generator().manual_seed(1))
    kernels = ops.line_kernels(4.0, 2.0, torch.tensor([0.3, -1.0]))
    assert torch.allclose(kernels.sum((1, 2)), torch.ones(2))
    y = ops.per_image_blur(x, kernels)
    for i in range(2):
        for c in range(2):
            ref = ndimage.correlate(x[i, c].numpy(), kernels[i].numpy(), mode="mirror")
            np.testing.assert_allclose(y[i, c].numpy(), ref, atol=1e-5)


def test_warp_identity_and_zoom_one_are_identity():
    x = torch.rand(2, 1, 9, 13)
    ys, xs = ops.pixel_grid(2, 9, 13)
    torch.testing.assert_close(ops.warp(x, ys, xs), x)
    torch.testing.assert_close(ops.zoom_center(x, 1.0), x)


def test_spectral_noise_is_standardised():
    noise = ops.spectral_noise(torch.Generator().manual_seed(0), 3, 2, 32, 32, -1.0)
    assert torch.allclose(noise.mean((2, 3)), torch.zeros(3, 2), atol=1e-5)
    assert torch.allclose(noise.std((2, 3)), torch.ones(3, 2), atol=1e-4)


def test_line_coverage_matches_a_per_pixel_distance_loop():
    from ensdiv.data.corruptions.imagenet_cbar import line_coverage

    h, w = 12, 15
    lines = [(6.0, 7.0, math.radians(30)), (2.5, 3.0, math.radians(100)), (9.0, 1.0, math.radians(-60))]
    for cy, cx, ang in lines:
        ref = np.zeros((h, w))
        for i in range(h):
            for j in range(w):
                ref[i, j] = max(0.0, 1 - abs((i - cy) * math.cos(ang) - (j - cx) * math.sin(ang)))
        t = torch.tensor
        out = line_coverage(t([[cy]]), t([[cx]]), t([[ang]]), t([[1.0]]), h, w)
        np.testing.assert_allclose(out[0, 0].numpy(), ref, atol=1e-5)
    x = torch.zeros(1, 1, 12, 12)
    y = corrupt(x, "lines", 10.0, seed=5)  # many grey lines
    assert y.max() <= 0.5 + 1e-6 and (y > 0).float().mean() > 0.5


# ---------------------------------------------------------------- bad input
def test_unknown_corruption_lists_valid_names():
    with pytest.raises(UnknownNameError, match="gaussian_noise") as err:
        corrupt(_images(1), "gausian_noise", 1)
    assert "Did you mean" in str(err.value)


@pytest.mark.parametrize(
    "name,level",
    [("fog", 0), ("fog", 6), ("fog", 2.5), ("lines", 0), ("lines", 10.5), ("lines", "high"), ("fog", True)],
)
def test_severity_out_of_range(name, level):
    with pytest.raises(EnsdivError, match="severity|strength"):
        corrupt(_images(1), name, level)


def test_bad_images_are_refused():
    with pytest.raises(EnsdivError, match="float images"):
        corrupt((_images(1) * 255).to(torch.uint8), "fog", 1)
    with pytest.raises(EnsdivError, match=r"in \[0, 1\]"):
        corrupt(_images(1) * 2 - 1, "fog", 1)
    with pytest.raises(EnsdivError, match="shaped"):
        corrupt(torch.rand(28, 28), "fog", 1)
    with pytest.raises(EnsdivError, match="Tensor"):
        corrupt(np.zeros((1, 1, 8, 8)), "fog", 1)
    with pytest.raises(UnknownNameError, match="profile"):
        corrupt(_images(1), "fog", 1, profile="mnist")


def test_aliases_of_the_paper_names():
    x = _images(2)
    torch.testing.assert_close(corrupt(x, "plasma", 4.0, seed=0), corrupt(x, "plasma_noise", 4.0, seed=0))
    torch.testing.assert_close(corrupt(x, "Waterdrop", 7.0, seed=0), corrupt(x, "water_drop", 7.0, seed=0))


def test_frost_falls_back_to_a_procedural_texture(monkeypatch):
    import importlib.resources

    from ensdiv.data.corruptions import imagenet_c as corruptions_c

    def missing(_name):
        raise ModuleNotFoundError("torch_uncertainty_assets")

    corruptions_c._frost_textures.cache_clear()
    monkeypatch.setattr(importlib.resources, "files", missing)
    try:
        x = _images(3, 3)
        y = corrupt(x, "frost", 3, seed=0)
        assert y.shape == x.shape and 0 <= y.min() and y.max() <= 1 and (y - x).abs().mean() > 0.05
    finally:
        corruptions_c._frost_textures.cache_clear()
