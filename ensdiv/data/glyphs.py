"""``pretrain/glyphs``: 62-class character glyphs rendered from the TrueType fonts installed with matplotlib.

training-methods' "Dataset" category holds models pre-trained on data collected independently of, and
much differently from, the base model's (JFT, WIT, the ALIGN data). The two procedural / 8x8 sources of
:mod:`ensdiv.data.sources` are weak stand-ins: ten synthetic shapes, or 1,797 tiny digits. This source
is larger, real and differently collected: the characters ``0-9``, ``A-Z``, ``a-z`` (62 classes) drawn
from real typefaces (the DejaVu Sans / Serif / Mono families and STIX that ship inside matplotlib's
``mpl-data/fonts/ttf``, plus Debian's extra DejaVu faces in ``/usr/share/fonts/truetype/dejavu`` where
present) with a random affine transform (rotation, shear, anisotropic scale, shift), a random stroke
weight (thinner by erosion or bolder by dilation), a random blur and mild sensor noise, as bright
strokes on a dark 28x28 background like Fashion-MNIST. It shares no class, object or image statistics
with clothing photographs: what transfers is generic (edges, strokes, curvature), which is the point.

``pretrain/letters`` draws the 52 letters alone, 52,000 of them: a source larger than the zoo's 30,000
Fashion-MNIST training images (as JFT is larger than ImageNet) that shares no class with a digits task,
so a model pre-trained on it cannot carry a downstream digit class into training-methods' Fig. 7.
``pretrain/shapes-large`` is :mod:`ensdiv.data.sources`' procedural shapes, 60,000 of them (seed 1).

Determinism: the images are a pure function of ``(n, seed, size, fonts)``; every random draw comes
from one ``numpy`` generator seeded by ``seed`` and the font list is sorted. The cache key holds the
font file names, so a machine with other fonts builds (and caches) its own set instead of reading a
set rendered from fonts it does not have. The set is built once and stored as uint8 through the
content-addressed store (:func:`ensdiv.store.cached`), like the shift sets.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from ensdiv.data import sources
from ensdiv.data.registry import TensorSet, register_family
from ensdiv.errors import EnsdivError
from ensdiv.store import cached

__all__ = ["GLYPH_CLASSES", "GLYPH_SIZE", "LETTER_CLASSES", "LETTERS_SIZE", "LETTERS_SMALL_SIZE", "SHAPES_LARGE_SIZE",
           "glyph_fonts", "render_glyphs", "load_glyphs"]

#: class i is the character GLYPH_CLASSES[i]: digits, upper case, lower case
GLYPH_CLASSES = list(string.digits + string.ascii_uppercase + string.ascii_lowercase)
#: images in the registered set (62 classes x 200): two epochs of it cost what the zoo's 4-epoch budget costs
GLYPH_SIZE = 12400
#: the letters alone (no digit): ``pretrain/letters``, 52 classes x 1,000, larger than the zoo's 30,000-image base set
LETTER_CLASSES = list(string.ascii_uppercase + string.ascii_lowercase)
LETTERS_SIZE = 52000
#: ``pretrain/letters-small``: 5,200 letters (100 per class), the smoke scale's digit-free source
LETTERS_SMALL_SIZE = 5200
#: ``pretrain/shapes-large``: the procedural shapes of :mod:`ensdiv.data.sources`, twice the base set's size
SHAPES_LARGE_SIZE = 60000
_DEBIAN_DEJAVU = Path("/usr/share/fonts/truetype/dejavu")
# text faces only: symbol, math-extension and fallback fonts lack (or misdraw) letters and digits
_SKIP = ("STIXNonUni", "STIXSiz", "cmex", "cmsy", "cmmi", "LastResort", "MathTeX", "Display")


def _has_all_glyphs(path: Path) -> bool:
    from matplotlib.ft2font import FT2Font

    try:
        font = FT2Font(str(path))
    except (RuntimeError, OSError):
        return False
    return all(font.get_char_index(ord(c)) != 0 for c in GLYPH_CLASSES)


@lru_cache(maxsize=1)
def glyph_fonts() -> tuple[Path, ...]:
    """The TrueType text fonts that draw all 62 characters, sorted by file name (duplicates by name dropped).

    matplotlib's bundled ``mpl-data/fonts/ttf`` first (on every machine with matplotlib), then Debian's
    ``/usr/share/fonts/truetype/dejavu`` faces matplotlib does not bundle (condensed, extra-light).
    """
    import matplotlib

    folders = [Path(matplotlib.get_data_path()) / "fonts" / "ttf", _DEBIAN_DEJAVU]
    found: dict[str, Path] = {}
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.ttf")):
            if path.name in found or any(s in path.name for s in _SKIP):
                continue
            if _has_all_glyphs(path):
                found[path.name] = path
    if not found:
        raise EnsdivError(
            "No TrueType font with the 62 characters 0-9, A-Z, a-z was found in matplotlib's mpl-data/fonts/ttf "
            f"or {_DEBIAN_DEJAVU}; reinstall matplotlib (pip install --force-reinstall matplotlib)."
        )
    return tuple(found[k] for k in sorted(found))


def _render_one(font, ch: str, rng: np.random.Generator, size: int) -> np.ndarray:
    from PIL import Image, ImageDraw, ImageFilter

    big = 4 * size  # draw at 4x, transform, then downsample with antialiasing
    img = Image.new("L", (big, big), 0)
    draw = ImageDraw.Draw(img)
    draw.text((big / 2, big / 2), ch, fill=255, font=font, anchor="mm")
    stroke = int(rng.integers(-1, 3))  # -1: thinner, 0: as drawn, 1-2: bolder
    if stroke > 0:
        img = img.filter(ImageFilter.MaxFilter(2 * stroke + 1))
    elif stroke < 0:
        img = img.filter(ImageFilter.MinFilter(3))
    # random affine: rotation +-15 deg, shear +-0.3, scale 0.75-1.15 per axis, shift +-8 % of the canvas
    rot = np.deg2rad(rng.uniform(-15, 15))
    shear = rng.uniform(-0.3, 0.3)
    sx, sy = rng.uniform(0.75, 1.15, size=2)
    tx, ty = rng.uniform(-0.08, 0.08, size=2) * big
    fwd = np.array([[np.cos(rot), -np.sin(rot)], [np.sin(rot), np.cos(rot)]]) @ np.array([[1, shear], [0, 1]])
    fwd = fwd @ np.diag([sx, sy])
    inv = np.linalg.inv(fwd)  # PIL maps output pixels to input pixels
    c = np.array([big / 2, big / 2])
    offset = c - inv @ (c + np.array([tx, ty]))
    img = img.transform((big, big), Image.AFFINE, (*inv[0], offset[0], *inv[1], offset[1]), resample=Image.BILINEAR)
    img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.0, 1.0) * 4))
    small = np.asarray(img.resize((size, size), Image.LANCZOS), dtype=np.float32) / 255.0
    peak = small.max()
    if peak > 0:
        small = small / peak * rng.uniform(0.6, 1.0)  # contrast
    small = small + rng.normal(0.0, 0.03, small.shape)
    return np.clip(small, 0.0, 1.0)


def render_glyphs(n: int, *, seed: int = 0, size: int = 28, fonts: tuple[Path, ...] | None = None,
                  classes: Sequence[str] = tuple(GLYPH_CLASSES)) -> tuple[torch.Tensor, torch.Tensor]:
    """Render ``n`` glyph images, classes balanced (``n // len(classes)`` or one more each) and shuffled.

    Args:
        n: number of images (at least one per class).
        seed: seed of every random choice (class order, font, affine, stroke, blur, noise).
        size: side of the square images.
        fonts: font files (default :func:`glyph_fonts`).
        classes: the characters to draw (default :data:`GLYPH_CLASSES`); label i is ``classes[i]``.

    Returns:
        ``(x, y)``: uint8 images shaped (n, 1, size, size), int64 labels shaped (n,) indexing ``classes``.
    """
    from PIL import ImageFont

    classes = list(classes)
    unknown = sorted(set(classes) - set(GLYPH_CLASSES))
    if unknown or not classes:
        raise EnsdivError(f"render_glyphs draws characters of GLYPH_CLASSES (0-9, A-Z, a-z); got {unknown or 'none'}.")
    if n < len(classes):
        raise EnsdivError(f"render_glyphs needs at least one image per class (n >= {len(classes)}), got n = {n}.")
    fonts = tuple(fonts or glyph_fonts())
    rng = np.random.default_rng(seed)
    y = rng.permutation(np.arange(n) % len(classes))
    faces = [ImageFont.truetype(str(f), size=int(size * 4 * 0.62)) for f in fonts]
    which = rng.integers(0, len(faces), size=n)
    x = np.empty((n, 1, size, size), dtype=np.uint8)
    for i in range(n):
        x[i, 0] = np.round(_render_one(faces[which[i]], classes[y[i]], rng, size) * 255).astype(np.uint8)
    return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))


def load_glyphs(n: int = GLYPH_SIZE, *, seed: int = 0, size: int = 28, letters_only: bool = False) -> TensorSet:
    """The glyph set as a :class:`TensorSet` of floats in [0, 1], built once and cached as uint8.

    ``letters_only`` draws the 52 letters (:data:`LETTER_CLASSES`) and no digit: ``pretrain/letters``, a source
    that shares no class with a digits task downstream (training-methods Fig. 7)."""
    fonts = glyph_fonts()
    classes = LETTER_CLASSES if letters_only else GLYPH_CLASSES
    name = "pretrain/letters" if letters_only else "pretrain/glyphs"
    config = {"name": name, "n": n, "seed": seed, "size": size, "fonts": [f.name for f in fonts]}

    def compute() -> dict[str, torch.Tensor]:
        x, y = render_glyphs(n, seed=seed, size=size, fonts=fonts, classes=classes)
        return {"x": x, "y": y}

    payload = cached("datasets", config, compute)
    what = "A-Z, a-z: 52 classes" if letters_only else "0-9, A-Z, a-z: 62 classes"
    return TensorSet(payload["x"].float().div_(255.0), payload["y"], name, list(classes),
                     f"{n:,} character glyphs ({what}) from {len(fonts)} TrueType fonts, "
                     "random affine, stroke and blur, 28x28 grey")


@lru_cache(maxsize=1)
def _glyphs() -> TensorSet:
    return load_glyphs()


@lru_cache(maxsize=1)
def _letters() -> TensorSet:
    return load_glyphs(LETTERS_SIZE, seed=1, letters_only=True)


@lru_cache(maxsize=1)
def _letters_small() -> TensorSet:
    return load_glyphs(LETTERS_SMALL_SIZE, seed=1, letters_only=True)


@lru_cache(maxsize=1)
def _shapes_large() -> TensorSet:
    s = sources.make_shapes(SHAPES_LARGE_SIZE, seed=1)
    return TensorSet(s.x, s.y, "pretrain/shapes-large", s.classes,
                     f"procedural shapes ({SHAPES_LARGE_SIZE:,}; 10 classes, seed 1)")


_SOURCE_NAMES = ["pretrain/shapes", "pretrain/digits"]
_BUILDERS = {"glyphs": _glyphs, "letters": _letters, "letters-small": _letters_small, "shapes-large": _shapes_large}


def _pretrain_source(name: str) -> TensorSet:
    return _BUILDERS[name]() if name in _BUILDERS else sources._pretrain_source(name)


# The "pretrain" family is registered by ensdiv.data.sources; registering it again here (after sources,
# which this module imports) adds the glyphs to its names and builder without editing that module.
register_family(
    "pretrain",
    _pretrain_source,
    names=lambda: [*_SOURCE_NAMES, *(f"pretrain/{k}" for k in _BUILDERS)],
    description="labelled pre-training sources other than Fashion-MNIST: procedural shapes (12,000; "
    f"shapes-large {SHAPES_LARGE_SIZE:,}), scikit-learn digits (1,797; 10 classes each), rendered character glyphs "
    f"({GLYPH_SIZE:,}; 62 classes) and letters ({LETTERS_SIZE:,}, letters-small {LETTERS_SMALL_SIZE:,}; 52 classes, "
    "no digit), 28x28 grey",
)
