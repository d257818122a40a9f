"""One verb for every natural corruption: ``corrupt(images, name, severity, seed=...)``.

Two families, both batched tensor transforms that work at any resolution and channel count
(28x28x1 Fashion-MNIST as well as 224x224x3 ImageNet):

* **ImageNet-C** (Hendrycks & Dietterich, 2019): 15 corruptions at integer severities 1-5, used by
  the SED paper (severities 1 and 5) and, through CIFAR-10/100-C, by Packed-Ensembles. See
  :mod:`ensdiv.data.corruptions.imagenet_c` for the parameter tables and where we deviate.
* **ImageNet-C̄** (Mintun et al., 2021): corruptions with a continuous strength in (0, 10], used by the
  design-diversity paper at Lines 1.6, Plasma 4.0, Checkerboard 4.0 and Waterdrop 7.0. See
  :mod:`ensdiv.data.corruptions.imagenet_cbar` for the strength -> parameter mapping.

``corrupt`` is deterministic: the same images, name, severity and seed give the same output on any
machine. The batch is processed in fixed chunks of 256 images, each with a generator seeded from
``(seed, chunk start)``, which bounds memory and keeps the random stream independent of the severity
(so, for one seed, a higher severity is the same corruption made stronger).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from ensdiv.data.corruptions.imagenet_c import C_CORRUPTIONS, C_FUNCTIONS, C_PARAMS
from ensdiv.data.corruptions.imagenet_cbar import CBAR_CORRUPTIONS, CBAR_FUNCTIONS
from ensdiv.errors import EnsdivError, unknown_name

__all__ = ["corrupt", "list_corruptions", "C_CORRUPTIONS", "CBAR_CORRUPTIONS", "CBAR_ALIASES", "PAPER_CBAR"]

#: Short names used in the design-diversity paper for ImageNet-C̄ corruptions.
CBAR_ALIASES = {
    "plasma": "plasma_noise",
    "checkerboard": "checkerboard_cutout",
    "waterdrop": "water_drop",
    "blue_noise": "blue_noise_sample",
    "transverse_chromatic_aberration": "transverse_chromatic_abberation",
}
#: The four ImageNet-C̄ corruptions and strengths of design-diversity (Sec. 4.1, Figure 4).
PAPER_CBAR = {"lines": 1.6, "plasma_noise": 4.0, "checkerboard_cutout": 4.0, "water_drop": 7.0}
_CHUNK = 256  # images per generator; also bounds the memory of the (N, lines, H, W)-style temporaries


@contextmanager
def _threads(n: int | None) -> Iterator[None]:
    """Temporarily run torch's CPU ops on ``n`` threads (``None``: leave as is)."""
    old = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def list_corruptions(family: str = "all") -> list[str]:
    """Names of the corruptions of one family.

    Args:
        family: ``"c"`` (the 15 ImageNet-C corruptions, in the benchmark's order), ``"cbar"`` (the
            ImageNet-C̄ family, alphabetical) or ``"all"`` (both).
    """
    if family == "c":
        return list(C_CORRUPTIONS)
    if family == "cbar":
        return list(CBAR_CORRUPTIONS)
    if family == "all":
        return list(C_CORRUPTIONS) + list(CBAR_CORRUPTIONS)
    raise unknown_name("corruption family", family, ["c", "cbar", "all"])


def _canonical(name: str) -> str:
    key = str(name).lower().replace("-", "_").replace(" ", "_")
    key = CBAR_ALIASES.get(key, key)
    if key == "jpeg":
        key = "jpeg_compression"
    if key == "elastic":
        key = "elastic_transform"
    if key not in C_FUNCTIONS and key not in CBAR_FUNCTIONS:
        raise unknown_name("corruption", name, list_corruptions())
    return key


def _check_images(images: torch.Tensor) -> torch.Tensor:
    if not isinstance(images, torch.Tensor):
        raise EnsdivError(f"corrupt expects a torch.Tensor of images, got {type(images).__name__}.")
    if not images.is_floating_point():
        raise EnsdivError(
            f"corrupt expects float images in [0, 1], got dtype {images.dtype}; "
            "convert with images.float() / 255."
        )
    if images.ndim not in (3, 4) or images.shape[-1] < 2 or images.shape[-2] < 2:
        raise EnsdivError(
            f"corrupt expects images shaped (N, C, H, W) or (C, H, W), got {tuple(images.shape)}."
        )
    if images.numel() and (images.min() < -1e-4 or images.max() > 1 + 1e-4):
        raise EnsdivError(
            f"corrupt expects images in [0, 1], got values in "
            f"[{images.min().item():.3g}, {images.max().item():.3g}]; "
            "undo any normalisation first (corrupt, then normalise)."
        )
    return images


def _check_severity(name: str, severity: float) -> float:
    if isinstance(severity, bool) or not isinstance(severity, int | float):
        raise EnsdivError(f"The severity of {name!r} must be a number, got {type(severity).__name__}.")
    if name in C_FUNCTIONS:
        if severity not in (1, 2, 3, 4, 5):
            raise EnsdivError(
                f"ImageNet-C corruption {name!r} takes an integer severity 1-5, got {severity!r}."
            )
        return int(severity)
    if not 0 < severity <= 10:
        raise EnsdivError(f"ImageNet-C̄ corruption {name!r} takes a strength in (0, 10], got {severity!r}.")
    return float(severity)


def corrupt(
    images: torch.Tensor,
    name: str,
    severity: float,
    *,
    seed: int = 0,
    profile: str = "auto",
    threads: int | None = 1,
) -> torch.Tensor:
    """Apply one natural corruption to a batch of images.

    Args:
        images: float images in [0, 1], any resolution (>= 2x2) and channel count.
        name: an ImageNet-C corruption (``"gaussian_noise"`` ... ``"jpeg_compression"``) or an
            ImageNet-C̄ one (``"lines"``, ``"plasma_noise"``, ...; aliases such as ``"plasma"``,
            ``"checkerboard"``, ``"waterdrop"`` are accepted). :func:`list_corruptions` lists them.
        severity: ImageNet-C: integer 1-5. ImageNet-C̄: the continuous strength in (0, 10] of
            Mintun et al. (design-diversity uses Lines 1.6, Plasma 4.0, Checkerboard 4.0, Waterdrop 7.0);
            it scales each corruption's parameter linearly, ``param = strength / 10 * max``.
        seed: seed of every random draw; the same seed gives the same output.
        profile: ImageNet-C parameter table: ``"cifar"`` (CIFAR-10-C values at 32 px), ``"imagenet"``
            (ImageNet-C values at 224 px) or ``"auto"`` (``"cifar"`` when min(H, W) <= 64). Pixel-sized
            parameters are rescaled by ``size / reference``.
        threads: torch CPU threads while corrupting (restored afterwards). The default 1 is fastest
            for the small per-chunk tensors, above all on a busy machine, where multi-threaded
            ``grid_sample`` can be tens of times slower; ``None`` keeps the current setting.

    Returns:
        Corrupted images, same shape and dtype, values in [0, 1].

    Shape:
        images: (N, C, H, W) or (C, H, W) -> same.

    Raises:
        UnknownNameError: unknown corruption name (the message lists the valid ones).
        EnsdivError: severity out of range, images not float in [0, 1] or badly shaped.
    """
    key = _canonical(name)
    sev = _check_severity(key, severity)
    images = _check_images(images)
    single = images.ndim == 3
    x = images[None] if single else images
    dtype = x.dtype
    x = x.float()
    h, w = x.shape[-2:]
    if profile == "auto":
        profile = "cifar" if min(h, w) <= 64 else "imagenet"
    if profile not in ("cifar", "imagenet"):
        raise unknown_name("corruption profile", profile, ["auto", "cifar", "imagenet"])
    with _threads(threads):
        outs = _run(x, key, sev, seed, profile)
    out = torch.cat(outs).to(dtype) if outs else x.to(dtype)
    return out[0] if single else out


def _run(x: torch.Tensor, key: str, sev: float, seed: int, profile: str) -> list[torch.Tensor]:
    h, w = x.shape[-2:]
    outs = []
    for start in range(0, x.shape[0], _CHUNK):
        g = torch.Generator().manual_seed(int(seed) * 1_000_003 + start)
        chunk = x[start : start + _CHUNK]
        if key in C_FUNCTIONS:
            table = C_PARAMS[key][0 if profile == "cifar" else 1]
            scale = max(h, w) / (32 if profile == "cifar" else 224)
            kw = {"profile": profile} if key == "frost" else {}
            out = C_FUNCTIONS[key](chunk, table[sev - 1], g, scale, **kw)
        else:
            out = CBAR_FUNCTIONS[key](chunk, sev / 10, g)
        outs.append(out.clamp(0, 1))
    return outs
