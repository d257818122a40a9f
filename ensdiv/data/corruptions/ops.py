"""Batched tensor building blocks shared by the ImageNet-C and ImageNet-C̄ corruptions.

Everything works on float images shaped (N, C, H, W) in [0, 1], for any resolution and channel count,
and takes a :class:`torch.Generator` for every random draw so a corruption is a pure function of
``(images, severity, seed)``. No per-pixel Python: blurs are (grouped) convolutions, warps are one
:func:`torch.nn.functional.grid_sample`, procedural textures are FFT or upsampled-grid noise.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

__all__ = [
    "uniform",
    "normal",
    "grey",
    "conv_same",
    "gaussian_kernel1d",
    "gaussian_blur",
    "disk_blur",
    "line_kernels",
    "per_image_blur",
    "pixel_grid",
    "warp",
    "zoom_center",
    "spectral_noise",
    "value_noise",
    "angle_ray_falloff",
]


def uniform(g: torch.Generator, *shape: int, low: float = 0.0, high: float = 1.0) -> torch.Tensor:
    """Uniform draws in [low, high) from the generator ``g``."""
    return torch.rand(*shape, generator=g) * (high - low) + low


def normal(g: torch.Generator, *shape: int) -> torch.Tensor:
    """Standard normal draws from the generator ``g``."""
    return torch.randn(*shape, generator=g)


def grey(x: torch.Tensor) -> torch.Tensor:
    """Luma (Rec. 709 weights) for 3 channels, the channel mean otherwise. Shape (N, 1, H, W)."""
    if x.shape[1] == 3:
        w = torch.tensor([0.2126, 0.7152, 0.0722], dtype=x.dtype).view(1, 3, 1, 1)
        return (x * w).sum(1, keepdim=True)
    return x.mean(1, keepdim=True)


def conv_same(x: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    """Depthwise 2-D convolution of every channel with one (kh, kw) kernel, reflect padding, same size."""
    n, c, h, w = x.shape
    kh, kw = kernel.shape
    ph, pw = kh // 2, kw // 2
    mode = "reflect" if ph < h and pw < w else "replicate"
    xp = F.pad(x.reshape(n * c, 1, h, w), (pw, kw - 1 - pw, ph, kh - 1 - ph), mode=mode)
    return F.conv2d(xp, kernel.to(x.dtype)[None, None]).reshape(n, c, h, w)


def gaussian_kernel1d(sigma: float) -> torch.Tensor:
    """Normalised 1-D Gaussian with radius ceil(3 sigma) (a delta for sigma <= 0)."""
    if sigma <= 1e-6:
        return torch.ones(1)
    r = max(1, math.ceil(3 * sigma))
    t = torch.arange(-r, r + 1, dtype=torch.float32)
    k = torch.exp(-(t**2) / (2 * sigma**2))
    return k / k.sum()


def gaussian_blur(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur with standard deviation ``sigma`` pixels."""
    k = gaussian_kernel1d(sigma)
    if k.numel() == 1:
        return x
    return conv_same(conv_same(x, k[None, :]), k[:, None])


def disk_blur(x: torch.Tensor, radius: float, alias_sigma: float) -> torch.Tensor:
    """Defocus: convolution with an anti-aliased disk of ``radius`` pixels, then a small Gaussian."""
    r = max(int(math.ceil(radius)), 1)
    t = torch.arange(-r, r + 1, dtype=torch.float32)
    dist = (t[:, None] ** 2 + t[None, :] ** 2).sqrt()
    k = (radius + 0.5 - dist).clamp(0, 1)
    k = k / k.sum()
    return gaussian_blur(conv_same(x, k), alias_sigma)


def line_kernels(length: float, sigma: float, angles: torch.Tensor) -> torch.Tensor:
    """Motion-blur kernels: Gaussian weights (std ``sigma``) along a ray of ``length`` px per angle.

    Shape: angles (N,) in radians -> kernels (N, k, k), each summing to 1.
    """
    r = max(int(math.ceil(length)), 1)
    k = 2 * r + 1
    steps = torch.linspace(0, length, 4 * r + 1)
    wts = torch.exp(-(steps**2) / (2 * max(sigma, 1e-3) ** 2))
    px = r + steps[None, :] * torch.cos(angles)[:, None]  # (N, S)
    py = r - steps[None, :] * torch.sin(angles)[:, None]
    out = torch.zeros(angles.shape[0], k * k)
    x0, y0 = px.floor(), py.floor()
    for dx in (0, 1):  # bilinear splat of each ray sample onto the kernel grid
        for dy in (0, 1):
            xi, yi = (x0 + dx).clamp(0, k - 1), (y0 + dy).clamp(0, k - 1)
            w = (1 - (px - xi).abs()).clamp(min=0) * (1 - (py - yi).abs()).clamp(min=0) * wts
            out.scatter_add_(1, (yi * k + xi).long(), w)
    out = out.view(-1, k, k)
    return out / out.sum((1, 2), keepdim=True)


def per_image_blur(x: torch.Tensor, kernels: torch.Tensor) -> torch.Tensor:
    """Convolve image i (all channels) with ``kernels[i]``: one grouped convolution for the batch."""
    n, c, h, w = x.shape
    k = kernels.shape[-1]
    p = k // 2
    mode = "reflect" if p < h and p < w else "replicate"
    xp = F.pad(x.reshape(1, n * c, h, w), (p, p, p, p), mode=mode)
    weight = kernels.to(x.dtype).repeat_interleave(c, 0)[:, None]
    return F.conv2d(xp, weight, groups=n * c).reshape(n, c, h, w)


def pixel_grid(n: int, h: int, w: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Pixel-centre coordinates ``(ys, xs)`` each shaped (n, h, w)."""
    ys = torch.arange(h, dtype=torch.float32).view(1, h, 1).expand(n, h, w)
    xs = torch.arange(w, dtype=torch.float32).view(1, 1, w).expand(n, h, w)
    return ys, xs


def warp(
    x: torch.Tensor, src_y: torch.Tensor, src_x: torch.Tensor, *, padding: str = "border"
) -> torch.Tensor:
    """Output pixel (i, j) takes the bilinear sample of ``x`` at (src_y, src_x) (pixel units, (N, H, W))."""
    _, _, h, w = x.shape
    gx = (2 * src_x + 1) / w - 1
    gy = (2 * src_y + 1) / h - 1
    grid = torch.stack([gx, gy], -1).to(x.dtype)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode=padding, align_corners=False)


def _zoom_matrix(size: int, factor: float) -> torch.Tensor:
    """(size, size) linear-interpolation matrix of a centred zoom (border values repeated)."""
    c = (size - 1) / 2
    src = (c + (torch.arange(size, dtype=torch.float32) - c) / factor).clamp(0, size - 1)
    lo = src.floor().clamp(max=size - 1)
    frac = src - lo
    m = torch.zeros(size, size)
    rows = torch.arange(size)
    m[rows, lo.long()] += 1 - frac
    m[rows, (lo + 1).clamp(max=size - 1).long()] += frac
    return m


def zoom_center(x: torch.Tensor, factor: float) -> torch.Tensor:
    """Zoom into the centre by ``factor`` (>= 1), keeping the size (a centre crop resampled up).

    Separable, so done as two small matrix products (the same values as a bilinear ``warp``).
    """
    h, w = x.shape[-2:]
    return _zoom_matrix(h, factor).to(x.dtype) @ x @ _zoom_matrix(w, factor).T.to(x.dtype)


def spectral_noise(
    g: torch.Tensor | torch.Generator, n: int, c: int, h: int, w: int, exponent: float
) -> torch.Tensor:
    """Random-phase noise with amplitude spectrum ``|f| ** exponent`` (negative: smooth, positive: blue).

    Standardised to zero mean and unit standard deviation per image and channel. Shape (n, c, h, w).
    """
    fy = torch.fft.fftfreq(h).view(h, 1)
    fx = torch.fft.rfftfreq(w).view(1, -1)
    f = (fy**2 + fx**2).sqrt()
    amp = torch.where(f > 0, f.clamp(min=1e-6) ** exponent, torch.zeros(()))
    white = torch.randn(n, c, h, w, generator=g)
    noise = torch.fft.irfft2(torch.fft.rfft2(white) * amp, s=(h, w))
    noise = noise - noise.mean((2, 3), keepdim=True)
    return noise / noise.std((2, 3), keepdim=True).clamp(min=1e-8)


def value_noise(
    g: torch.Generator, n: int, c: int, h: int, w: int, *, base: float, octaves: int, turbulence: bool = False
) -> torch.Tensor:
    """Fractal value noise: sum of bicubically upsampled random grids (cell ``base`` px, halving per octave).

    With ``turbulence`` each octave is folded (``|2u - 1|``), as in Perlin's turbulence. Returns values
    in [0, 1], shape (n, c, h, w).
    """
    total = torch.zeros(n, c, h, w)
    norm = 0.0
    for o in range(octaves):
        cell = max(base / 2**o, 1.0)
        gh, gw = int(math.ceil(h / cell)) + 2, int(math.ceil(w / cell)) + 2
        grid = torch.rand(n, c, gh, gw, generator=g)
        up = F.interpolate(grid, size=(int(gh * cell), int(gw * cell)), mode="bicubic", align_corners=False)
        up = up[..., :h, :w].clamp(0, 1)
        if turbulence:
            up = (2 * up - 1).abs()
        total += up * 0.5**o
        norm += 0.5**o
    return total / norm


def angle_ray_falloff(
    dy: torch.Tensor, dx: torch.Tensor, ray_lengths: torch.Tensor, power: float
) -> torch.Tensor:
    """Star-shaped falloff used by the sparkles corruptions, in [0, 1].

    For each pixel at offset (dy, dx) from a centre, the ray length is interpolated between the random
    lengths of the two nearest rays; the weight is ``(length^2 / dist^2) ** power`` tapered across the ray.

    Shape: dy, dx (N, H, W); ray_lengths (N, R) -> (N, H, W).
    """
    rays = ray_lengths.shape[1]
    d = (torch.atan2(dx, dy) + math.pi) / (2 * math.pi) * rays
    i = d.floor().long() % rays
    frac = d - d.floor()
    n = ray_lengths.shape[0]
    lo = ray_lengths.gather(1, i.reshape(n, -1)).view_as(d)
    hi = ray_lengths.gather(1, ((i + 1) % rays).reshape(n, -1)).view_as(d)
    length = lo + frac * (hi - lo)
    gain = (length**2 / (dy**2 + dx**2 + 1e-4)) ** power
    return ((1 - (frac - 0.5) ** 2) * gain).clamp(0, 1)
