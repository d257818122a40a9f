"""SED chapter evaluation and training sets at CPU scale: a rendition set of *training* images, rendered
letters and photo crops.

===================  ======  ==========================================================================
name                 size    analogue of
===================  ======  ==========================================================================
``fmnist-r-train``   10,000  ImageNet-R used as the *unlabeled training* OOD set of naive A2D / DivDis:
                             renditions (``ed.data.shift_images("fmnist-r", ...)``) of 10,000
                             Fashion-MNIST **training** images outside the 30,000 the models train on
                             (held out), never of the test images that ``fmnist-r`` is evaluated on;
                             labels kept (unused in training)
``letters``          2,000   iNaturalist (semantic OOD, a different kind of object): letters A-Z / a-z
                             rendered from the fonts matplotlib ships (DejaVu, STIX, Computer Modern),
                             random size, rotation and position, bright on black as Fashion-MNIST; label -1
``photos``           2,000   OpenImages-O (semantic OOD natural photographs): grey 28x28 crops of 217
                             photographs the installed packages ship, half from the 17 large ones of
                             scikit-learn, matplotlib and scikit-image (:data:`PHOTOGRAPHS`), half from
                             the 200 small ones of scikit-image's LFW subset (:data:`SMALL_PHOTOGRAPHS`:
                             100 faces, 100 natural-image patches); random scale and position,
                             contrast-stretched; label -1
===================  ======  ==========================================================================
"""

from __future__ import annotations

import zlib

import numpy as np
import torch
import torch.nn.functional as F

from ensdiv.data.fashion import FASHION_CLASSES
from ensdiv.data.registry import TensorSet, get_dataset, register_family, subset_indices
from ensdiv.data.shifts import shift_images
from ensdiv.store import cached

__all__ = ["rendition_train", "letters", "photo_crops", "LETTER_FONTS", "PHOTOGRAPHS", "SMALL_PHOTOGRAPHS",
           "PHOTOS_DESCRIPTION"]

N_OOD, SIZE = 2000, 28
LETTER_FONTS = ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSerif.ttf", "DejaVuSerif-Italic.ttf",
               "DejaVuSansMono.ttf", "STIXGeneral.ttf", "cmr10.ttf", "cmss10.ttf")
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _seed(text: str) -> int:
    return zlib.crc32(text.encode())


def _set(name: str, config: dict, compute, classes: list[str], description: str) -> TensorSet:
    out = cached("dataset", {"family": "sed-ood", "name": name, **config}, compute)
    return TensorSet(out["x"].float() / 255.0, out["y"], name, classes, description=description)


def _u8(x: torch.Tensor) -> torch.Tensor:
    return (x.clamp(0, 1) * 255).round().to(torch.uint8)


#: the training subset of every cpu-scale zoo model (``train_subset`` 30,000, subset seed 0): the images SED's
#: frozen backbone and heads learn from, which the naive methods' unlabeled set must not contain
TRAINED_SUBSET = 30000


def held_out_train_indices(size: int, trained: int = TRAINED_SUBSET, *, seed: int = 0) -> torch.Tensor:
    """Indices of ``fmnist/train`` outside the seeded subset of ``trained`` images the models learn from
    (:func:`ensdiv.data.registry.subset_indices` with ``seed``), in increasing order."""
    used = torch.zeros(size, dtype=torch.bool)
    used[subset_indices(size, trained, seed=seed)] = True
    return torch.nonzero(~used).flatten()


def rendition_train(n: int = 10000) -> TensorSet:
    """``fmnist-r-train``: renditions of ``n`` Fashion-MNIST training images that no cpu-scale model trains on
    (drawn, seed 1, from the images outside the zoo's 30,000-image subset: :func:`held_out_train_indices`), as
    SED's naive methods need an unlabeled OOD set the heads have not learnt from."""

    def compute():
        train = get_dataset("fmnist/train")
        held = held_out_train_indices(len(train))
        pick = held[subset_indices(len(held), n, seed=1)]
        return {"x": _u8(shift_images("fmnist-r", train.x[pick])), "y": train.y[pick]}

    return _set("fmnist-r-train", {"n": n, "held_out_from": TRAINED_SUBSET}, compute, list(FASHION_CLASSES),
                "renditions of 10,000 Fashion-MNIST training images outside the models' 30,000-image training "
                "subset (unlabeled OOD set of naive A2D/DivDis)")


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


#: The photographs ``photos`` crops (every one a package ships, offline): scikit-learn's two sample images,
#: matplotlib's portrait, and the scikit-image ``data`` photographs of objects, scenes, animals, the sky and the
#: microscope — not its textures (brick, grass, gravel: ``textures/frost`` plays Textures), its photographs of
#: text (page, text: ``letters`` plays another OOD set), its synthetic images, or the second motorcycle of a
#: stereo pair (the same scene).
PHOTOGRAPHS = (
    "sklearn:china.jpg", "sklearn:flower.jpg", "matplotlib:grace_hopper.jpg",
    *(f"skimage:{f}" for f in ("astronaut.png", "camera.png", "cell.png", "chelsea.png", "clock_motion.png",
                               "coffee.png", "coins.png", "hubble_deep_field.jpg", "ihc.png", "microaneurysms.png",
                               "moon.png", "motorcycle_left.png", "retina.jpg", "rocket.jpg")),
)


#: The small photographs: scikit-image's ``lfw_subset.npy``, 200 grey 25x25 photographs — 100 faces of different
#: people from Labeled Faces in the Wild and 100 patches of natural images without a face. They add 200 distinct
#: pictures to the 17 large ones; being small, each gives crops of nearly its whole frame.
SMALL_PHOTOGRAPHS = "skimage:lfw_subset.npy"

#: What ``photos`` holds, in one sentence (the set's and the registry's description)
PHOTOS_DESCRIPTION = (f"2,000 crops at 28x28 of {len(PHOTOGRAPHS) + 200} photographs the installed packages ship, "
                      f"half from the {len(PHOTOGRAPHS)} large ones of scikit-learn, matplotlib and scikit-image, half "
                      "from the 200 small ones of scikit-image's LFW subset (100 faces, 100 natural-image patches): "
                      "semantic OOD (OpenImages-O analogue), label -1")


def _photographs() -> list[np.ndarray]:
    """:data:`PHOTOGRAPHS` in grey, values in [0, 1]."""
    import os

    import matplotlib
    import skimage
    from PIL import Image
    from sklearn.datasets import load_sample_images

    sk = dict(zip(("china.jpg", "flower.jpg"), load_sample_images().images, strict=True))
    out = []
    for ref in PHOTOGRAPHS:
        source, name = ref.split(":")
        if source == "sklearn":
            img = Image.fromarray(sk[name])
        elif source == "matplotlib":
            img = Image.open(f"{matplotlib.get_data_path()}/sample_data/{name}")
        else:
            img = Image.open(os.path.join(os.path.dirname(skimage.__file__), "data", name))
        out.append(np.asarray(img.convert("L"), dtype=np.float32) / 255.0)
    return out


def _small_photographs() -> list[np.ndarray]:
    """:data:`SMALL_PHOTOGRAPHS`: 200 grey 25x25 arrays, values in [0, 1] (the file's own scale)."""
    import os

    import skimage

    faces = np.load(os.path.join(os.path.dirname(skimage.__file__), "data", SMALL_PHOTOGRAPHS.split(":")[1]))
    return [np.asarray(face, dtype=np.float32) for face in faces]


def photo_crops(n: int = N_OOD, *, seed: int = 0) -> TensorSet:
    """``photos``: ``n`` grey 28x28 crops (label -1); even ``k`` from large photograph ``k // 2 mod 17`` of
    :data:`PHOTOGRAPHS`, odd ``k`` from small photograph ``k // 2 mod 200`` of :data:`SMALL_PHOTOGRAPHS`.

    Each crop is a random square at a random position, its side log-uniform between
    ``min(56, round(0.8 * shorter side))`` pixels (56 on a large photograph, 20 on a 25x25 one) and the
    photograph's shorter side, resized to 28x28 (bilinear, antialiased), and contrast-stretched between its 1st and
    99th percentiles."""

    def compute():
        sources = (_photographs(), _small_photographs())
        rng = np.random.default_rng(seed)
        out = torch.empty(n, 1, SIZE, SIZE)
        for k in range(n):
            photos = sources[k % 2]
            photo = photos[(k // 2) % len(photos)]
            h, w = photo.shape
            low = min(2 * SIZE, round(0.8 * min(h, w)))
            side = int(round(np.exp(rng.uniform(np.log(low), np.log(min(h, w))))))
            top, left = int(rng.integers(0, h - side + 1)), int(rng.integers(0, w - side + 1))
            crop = torch.from_numpy(photo[top:top + side, left:left + side].copy())[None, None]
            out[k] = F.interpolate(crop, size=(SIZE, SIZE), mode="bilinear", antialias=True, align_corners=False)[0]
        lo = out.flatten(1).quantile(0.01, dim=1).view(-1, 1, 1, 1)
        hi = out.flatten(1).quantile(0.99, dim=1).view(-1, 1, 1, 1)
        x = (out - lo) / (hi - lo).clamp_min(1e-3)
        return {"x": _u8(x), "y": torch.full((n,), -1, dtype=torch.int64)}

    return _set("photos", {"n": n, "seed": seed, "photographs": [*PHOTOGRAPHS, SMALL_PHOTOGRAPHS]}, compute, [],
                PHOTOS_DESCRIPTION)


register_family("fmnist-r-train", lambda *parts: rendition_train(), names=lambda: ["fmnist-r-train"],
                description="renditions of 10,000 Fashion-MNIST training images (SED's unlabeled OOD set)")
register_family("letters", lambda *parts: letters(), names=lambda: ["letters"],
                description="letters from matplotlib's fonts at 28x28 (2,000): semantic OOD, label -1")
register_family("photos", lambda *parts: photo_crops(), names=lambda: ["photos"], description=PHOTOS_DESCRIPTION)
