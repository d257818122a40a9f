"""SED chapter evaluation and training sets at CPU scale: a rendition set of *training* images, rendered
letters and photo crops.

===================  ======  ==========================================================================
name                 size    analogue of
===================  ======  ==========================================================================
``fmnist-r-train``   10,000  ImageNet-R used as the *unlabeled training* OOD set of naive A2D / DivDis:
                             renditions (``ed.data.shift_images("fmnist-r", ...)``) of 10,000
                             Fashion-MNIST **training** images (seeded subset 1), never of the test
                             images that ``fmnist-r`` is evaluated on; labels kept (unused in training)
``letters``          2,000   iNaturalist (semantic OOD, a different kind of object): letters A-Z / a-z
                             rendered from the fonts matplotlib ships (DejaVu, STIX, Computer Modern),
                             random size, rotation and position, bright on black as Fashion-MNIST; label -1
``photos``           2,000   OpenImages-O (semantic OOD natural photographs): grey 28x28 crops of the
                             three photographs scikit-learn and matplotlib ship (china.jpg, flower.jpg,
                             grace_hopper.jpg), random scale and position, contrast-stretched; label -1
===================  ======  ==========================================================================
"""

from __future__ import annotations

import zlib

import numpy as np
import torch
import torch.nn.functional as F

from ensdiv.data.fashion import FASHION_CLASSES
from ensdiv.data.registry import TensorSet, get_dataset, register_family
from ensdiv.data.shifts import shift_images
from ensdiv.store import cached

__all__ = ["rendition_train", "letters", "photo_crops", "LETTER_FONTS"]

_VERSION = 1
N_OOD, SIZE = 2000, 28
LETTER_FONTS = ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSerif.ttf", "DejaVuSerif-Italic.ttf",
               "DejaVuSansMono.ttf", "STIXGeneral.ttf", "cmr10.ttf", "cmss10.ttf")
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _seed(text: str) -> int:
    return zlib.crc32(text.encode())


def _set(name: str, config: dict, compute, classes: list[str], description: str) -> TensorSet:
    out = cached("dataset", {"family": "sed-ood", "name": name, "version": _VERSION, **config}, compute)
    return TensorSet(out["x"].float() / 255.0, out["y"], name, classes, description=description)


def _u8(x: torch.Tensor) -> torch.Tensor:
    return (x.clamp(0, 1) * 255).round().to(torch.uint8)


def rendition_train(n: int = 10000) -> TensorSet:
    """``fmnist-r-train``: ``n`` Fashion-MNIST *training* images (seeded subset 1) as renditions."""

    def compute():
        train = get_dataset("fmnist/train").subset(n, seed=1)
        return {"x": _u8(shift_images("fmnist-r", train.x)), "y": train.y}

    return _set("fmnist-r-train", {"n": n}, compute, list(FASHION_CLASSES),
                "renditions of 10,000 Fashion-MNIST training images (unlabeled OOD set of naive A2D/DivDis)")


def letters(n: int = N_OOD, *, seed: int = 0) -> TensorSet:
    """``letters``: ``n`` letters rendered from matplotlib's fonts at 28x28 (label -1)."""

    def compute():
        import matplotlib
        from PIL import Image, ImageDraw, ImageFont

        root = f"{matplotlib.get_data_path()}/fonts/ttf/"
        rng = np.random.default_rng(seed)
        x = torch.empty(n, 1, SIZE, SIZE)
        for k in range(n):
            font = ImageFont.truetype(root + LETTER_FONTS[k % len(LETTER_FONTS)], int(rng.integers(40, 80)))
            img = Image.new("L", (96, 96), 0)
            ImageDraw.Draw(img).text((48, 48), _LETTERS[int(rng.integers(len(_LETTERS)))], fill=255, font=font,
                                     anchor="mm")
            img = img.rotate(float(rng.uniform(-20, 20)), resample=Image.BILINEAR,
                             translate=tuple(int(v) for v in rng.integers(-8, 9, 2)))
            t = torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0)[None, None]
            x[k] = F.interpolate(t, size=(SIZE, SIZE), mode="bilinear", antialias=True, align_corners=False)[0]
        return {"x": _u8(x), "y": torch.full((n,), -1, dtype=torch.int64)}

    return _set("letters", {"n": n, "seed": seed, "fonts": list(LETTER_FONTS)}, compute, [],
                "letters rendered from matplotlib's fonts, semantic OOD (iNaturalist analogue), label -1")


def _photographs() -> list[np.ndarray]:
    import matplotlib
    from PIL import Image
    from sklearn.datasets import load_sample_images

    photos = [np.asarray(Image.fromarray(im).convert("L"), dtype=np.float32) / 255.0
              for im in load_sample_images().images]
    hopper = Image.open(f"{matplotlib.get_data_path()}/sample_data/grace_hopper.jpg").convert("L")
    return [*photos, np.asarray(hopper, dtype=np.float32) / 255.0]


def photo_crops(n: int = N_OOD, *, seed: int = 0) -> TensorSet:
    """``photos``: ``n`` grey 28x28 crops of the photographs scikit-learn and matplotlib ship (label -1)."""

    def compute():
        photos = _photographs()
        rng = np.random.default_rng(seed)
        out = torch.empty(n, 1, SIZE, SIZE)
        for k in range(n):
            photo = photos[k % len(photos)]
            h, w = photo.shape
            side = int(round(np.exp(rng.uniform(np.log(2 * SIZE), np.log(min(h, w))))))
            top, left = int(rng.integers(0, h - side + 1)), int(rng.integers(0, w - side + 1))
            crop = torch.from_numpy(photo[top:top + side, left:left + side].copy())[None, None]
            out[k] = F.interpolate(crop, size=(SIZE, SIZE), mode="bilinear", antialias=True, align_corners=False)[0]
        lo = out.flatten(1).quantile(0.01, dim=1).view(-1, 1, 1, 1)
        hi = out.flatten(1).quantile(0.99, dim=1).view(-1, 1, 1, 1)
        x = (out - lo) / (hi - lo).clamp_min(1e-3)
        return {"x": _u8(x), "y": torch.full((n,), -1, dtype=torch.int64)}

    return _set("photos", {"n": n, "seed": seed}, compute, [],
                "crops of sklearn's and matplotlib's sample photographs, semantic OOD (OpenImages-O analogue)")


register_family("fmnist-r-train", lambda *parts: rendition_train(), names=lambda: ["fmnist-r-train"],
                description="renditions of 10,000 Fashion-MNIST training images (SED's unlabeled OOD set)")
register_family("letters", lambda *parts: letters(), names=lambda: ["letters"],
                description="letters from matplotlib's fonts at 28x28 (2,000): semantic OOD, label -1")
register_family("photos", lambda *parts: photo_crops(), names=lambda: ["photos"],
                description="crops of sklearn/matplotlib sample photographs at 28x28 (2,000): semantic OOD, label -1")
