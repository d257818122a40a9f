"""A real-texture OOD set for the CPU scale: crops of the frost photographs shipped by a package.

Packed-Ensembles' Table 2 uses Textures (DTD, 5,640 photographs of 47 texture classes) as an OOD set
for ImageNet. DTD cannot be downloaded here, so the CPU-scale book uses the only texture photographs
that a package ships: the five frost images of ``torch-uncertainty-assets`` (the images ImageNet-C's
frost corruption overlays). ``textures/frost`` holds 28×28 grey crops of them at random positions and
scales (crop sides 28 to 280 pixels, so both fine grain and large ice structures appear).

Each crop is stretched to its own 1st-99th intensity percentiles. The raw photographs are low-contrast
(standard deviation 0.07-0.17 on [0, 1]), whereas DTD photographs span the whole range; without the
stretch the set would be a near-constant grey that any model flags as OOD.
The paper-scale DTD loader is :func:`ensdiv.data.paper.sets.textures`.
"""

from __future__ import annotations

import io
from functools import lru_cache
from importlib.resources import files

import numpy as np
import torch

from ensdiv.data.registry import TensorSet, register_family
from ensdiv.errors import DataNotFoundError

__all__ = ["frost_textures", "frost_photographs"]

N_CROPS, SIZE, SEED = 2000, 28, 0


def frost_photographs() -> list[np.ndarray]:
    """The five frost photographs of ``torch-uncertainty-assets`` as grey float arrays in [0, 1]."""
    from PIL import Image

    try:
        folder = files("torch_uncertainty_assets") / "frost"
    except ModuleNotFoundError as exc:
        raise DataNotFoundError(
            "textures/frost needs the frost photographs of the package torch-uncertainty-assets; "
            "install it with pip install torch-uncertainty-assets."
        ) from exc
    return [np.asarray(Image.open(io.BytesIO((folder / f"frost{i}.jpg").read_bytes())).convert("L"),
                       dtype=np.float32) / 255.0 for i in range(1, 6)]


@lru_cache(maxsize=2)
def frost_textures(n: int = N_CROPS, *, size: int = SIZE, seed: int = SEED) -> TensorSet:
    """``n`` seeded ``size``×``size`` crops of the frost photographs, contrast-stretched, labelled -1.

    Crops cycle over the five photographs; each has a side drawn log-uniformly in
    [size, min(10·size, photo side)] and a uniform position, and is resized with antialiasing.
    """
    import torch.nn.functional as F

    photos = frost_photographs()
    rng = np.random.default_rng(seed)
    out = torch.empty(n, 1, size, size)
    for k in range(n):
        photo = photos[k % len(photos)]
        h, w = photo.shape
        side = int(round(np.exp(rng.uniform(np.log(size), np.log(min(10 * size, h, w))))))
        top, left = rng.integers(0, h - side + 1), rng.integers(0, w - side + 1)
        crop = torch.from_numpy(photo[top:top + side, left:left + side].copy())[None, None]
        out[k] = F.interpolate(crop, size=(size, size), mode="bilinear", antialias=True, align_corners=False)[0]
    lo = out.flatten(1).quantile(0.01, dim=1).view(-1, 1, 1, 1)
    hi = out.flatten(1).quantile(0.99, dim=1).view(-1, 1, 1, 1)
    x = ((out - lo) / (hi - lo).clamp_min(1e-3)).clamp(0, 1)
    return TensorSet(x, torch.full((n,), -1, dtype=torch.int64), "textures/frost",
                     description=_DESCRIPTION)


_DESCRIPTION = "2,000 28x28 grey crops of real frost photographs (a Textures/DTD analogue), OOD label -1"

register_family("textures", lambda *parts: frost_textures(), names=lambda: ["textures/frost"],
                description=_DESCRIPTION)
