"""Issue #26, item 6: hostile image folders. Every unreadable image file is one sentence naming it, an
image over the pixel limit is refused before it is decoded, and a set whose class folders are wrong or
incomplete is refused when it is opened, unless the folder declares a class subset."""

from __future__ import annotations

import os
import struct
import zlib

import numpy as np
import pytest
import torch
from PIL import Image, ImageFile

from ensdiv.data.paper import common
from ensdiv.data.paper import sets as ps
from ensdiv.data.paper import tensors as pt
from ensdiv.data.paper.common import SUBSET_FILE, declare_class_subset
from ensdiv.errors import CorruptDataError, DataNotFoundError, EnsdivError

WNIDS = ps.imagenet_wnids()
R_WNIDS = ps._timm_list("imagenet_r_synsets.txt")


def _jpg(path, seed=0, size=(64, 48)):
    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path, quality=95)
    return path


def _full_val(root, skip=()):
    """root/val/<wnid>/img.JPEG for all 1000 wnids but ``skip``, one small JPEG hard-linked into each."""
    one = _jpg(root / "one.JPEG")
    for w in WNIDS:
        if w not in skip:
            (root / "val" / w).mkdir(parents=True)
            os.link(one, root / "val" / w / "img.JPEG")
    return root / "val"


def _png_header(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height (8-bit greyscale) followed by a few bytes of data."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


@pytest.fixture
def val_with(tmp_path):
    """A two-class val folder (a declared subset) whose second class holds the file ``bad`` returns."""
    def make(write_bad):
        _jpg(tmp_path / "val" / WNIDS[0] / "good.JPEG")
        bad = tmp_path / "val" / WNIDS[1] / "bad.JPEG"
        bad.parent.mkdir(parents=True)
        write_bad(bad)
        declare_class_subset(tmp_path / "val", WNIDS[:2])
        ds = ps.imagenet_val(tmp_path, transform=lambda im: torch.as_tensor(np.array(im)))
        assert ds.files[1] == bad and ds[0][0].shape == (48, 64, 3)
        return ds, bad
    return make


def _truncated(path):
    _jpg(path, seed=1, size=(300, 200))
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize("write_bad,why", [
    pytest.param(_truncated, "is truncated or corrupt", id="truncated-jpeg"),
    pytest.param(lambda p: p.write_bytes(b""), r"is empty \(0 bytes\)", id="zero-bytes"),
    pytest.param(lambda p: p.write_text("this is a text file, not a JPEG\n"), "is not an image file", id="text"),
])
def test_unreadable_image_is_one_sentence_naming_the_file(val_with, write_bad, why):
    assert not ImageFile.LOAD_TRUNCATED_IMAGES  # PIL's default, which the loaders leave alone
    ds, bad = val_with(write_bad)
    with pytest.raises(CorruptDataError, match=f"^The ImageNet val file {bad} {why}.*; delete it and get a good copy "
                                               r"from https://image-net\.org") as err:
        ds[1]
    assert "\n" not in str(err.value) and isinstance(err.value, DataNotFoundError)


def test_oversized_image_is_refused_before_decoding(val_with, monkeypatch):
    assert common.MAX_IMAGE_PIXELS == 50_000_000
    ds, bad = val_with(lambda p: p.write_bytes(_png_header(8000, 7500)))  # 60 MP, below PIL's own warning
    assert bad.stat().st_size < 200  # a header claiming 60 MP

    def no_decoding(self, *args, **kwargs):
        raise AssertionError("the image was decoded")

    monkeypatch.setattr(ImageFile.ImageFile, "load", no_decoding)
    with pytest.raises(CorruptDataError, match=f"^The ImageNet val file {bad} is 8000x7500 = 60,000,000 pixels, "
                                               "over the limit of 50,000,000 pixels.*MAX_IMAGE_PIXELS"):
        ds[1]
    bad.write_bytes(_png_header(11000, 11000))  # 121 MP: PIL only warns
    with pytest.warns(Image.DecompressionBombWarning), pytest.raises(CorruptDataError, match="121,000,000 pixels"):
        ds[1]
    bad.write_bytes(_png_header(20000, 20000))  # 400 MP: PIL refuses to open it, in its own words
    with pytest.raises(CorruptDataError, match=f"{bad} has more pixels than PIL opens.*50,000,000"):
        ds[1]
    assert Image.MAX_IMAGE_PIXELS == 89_478_485  # PIL's setting is not changed


def test_pixel_limit_is_read_when_an_image_is_opened(val_with, monkeypatch):
    ds, bad = val_with(lambda p: _jpg(p, size=(40, 30)))
    monkeypatch.setattr(common, "MAX_IMAGE_PIXELS", 1200)
    assert ds[1][0].shape == (30, 40, 3)  # exactly at the limit
    monkeypatch.setattr(common, "MAX_IMAGE_PIXELS", 1199)
    with pytest.raises(CorruptDataError, match="40x30 = 1,200 pixels, over the limit of 1,199"):
        ds[1]


def test_full_imagenet_val_layout_loads(tmp_path):
    _full_val(tmp_path)
    ds = ps.imagenet_val(tmp_path, transform=lambda im: im.size)
    assert len(ds) == 1000 and ds.targets == list(range(1000)) and ds.classes == WNIDS
    assert ds[999] == ((64, 48), 999)
    assert ps.imagenet_wnids(tmp_path) == WNIDS


def test_class_folder_that_is_a_file_is_refused(tmp_path):
    val = _full_val(tmp_path, skip=[WNIDS[7]])
    (val / WNIDS[7]).write_bytes(b"\xff\xd8\xff")
    with pytest.raises(DataNotFoundError, match=f"ImageNet val at {val} has files where class folders belong "
                                                rf"\({WNIDS[7]}\); expected val/<wnid>"):
        ps.imagenet_val(tmp_path)


def test_class_folder_linked_out_of_the_set_is_refused_but_a_linked_set_folder_loads(tmp_path):
    """A class folder that is a symlink to another tree (``val/n01531178 -> /usr``) would be read as images of
    that class: one sentence naming it. Linking the whole set folder (the usual way to keep data on another disk)
    is fine."""
    val = _full_val(tmp_path / "real", skip=[WNIDS[3]])
    elsewhere = tmp_path / "elsewhere"
    _jpg(elsewhere / "x.jpg")
    (val / WNIDS[3]).symlink_to(elsewhere, target_is_directory=True)
    links = f"has class folders that are links out of it \\({WNIDS[3]}, to {elsewhere}\\)"
    with pytest.raises(EnsdivError, match=links):
        ps.imagenet_val(tmp_path / "real")
    (val / WNIDS[3]).unlink()
    _jpg(val / WNIDS[3] / "y.jpg")
    (tmp_path / "linked").symlink_to(tmp_path / "real", target_is_directory=True)
    assert len(ps.imagenet_val(tmp_path / "linked", transform=lambda im: im.size)) == 1000


def test_missing_classes_are_refused(tmp_path):
    val = _full_val(tmp_path, skip=WNIDS[2:])  # 998 of the 1000 classes missing
    how = f"or declare a deliberate class subset by listing its classes in {val / SUBSET_FILE}"
    with pytest.raises(DataNotFoundError, match=f"ImageNet val at {val} lacks 998 of the 1000 class folders "
                                                rf"\({WNIDS[2]}, .*\(998 in all\)\).*image-net\.org .*, {how}"):
        ps.imagenet_val(tmp_path)
    with pytest.raises(DataNotFoundError, match="lacks 998 of the 1000"):
        ps.imagenet_wnids(tmp_path)  # the class order of a val folder is checked too
    (val / WNIDS[0]).rename(val.parent / "elsewhere")  # one class left: still refused
    with pytest.raises(DataNotFoundError, match="lacks 999 of the 1000"):
        ps.imagenet_val(tmp_path)


def test_missing_classes_of_other_sets_are_refused(tmp_path):
    for w in R_WNIDS[:3]:
        _jpg(tmp_path / "imagenet-r" / w / "x.jpg")
    with pytest.raises(DataNotFoundError, match="ImageNet-R at .* lacks 197 of the 200 class folders"):
        ps.imagenet_r(tmp_path)
    v2 = tmp_path / "imagenetv2-matched-frequency-format-val"
    for k in range(999):
        (v2 / str(k)).mkdir(parents=True)
    with pytest.raises(DataNotFoundError, match=r"ImageNetV2 at .* lacks 1 of the 1000 class folders \(999\)"):
        ps.imagenet_v2(tmp_path)
    _jpg(tmp_path / "dtd" / "images" / "banded" / "x.jpg")
    with pytest.raises(DataNotFoundError, match=r"Textures \(DTD\) at .* lacks 46 of the 47 class folders \(blotchy"):
        ps.textures(tmp_path)
    c = tmp_path / "imagenet-c" / "fog" / "2"
    _jpg(c / WNIDS[0] / "x.JPEG")
    with pytest.raises(DataNotFoundError, match="ImageNet-C at .* lacks 999 of the 1000"):
        ps.imagenet_c(tmp_path / "imagenet-c", "fog", 2)


def test_class_folder_without_images_is_refused(tmp_path):
    val = _full_val(tmp_path)
    for f in (val / WNIDS[500]).iterdir():
        f.unlink()
    (val / WNIDS[500] / "notes.txt").write_text("no images here")
    with pytest.raises(DataNotFoundError, match=rf"ImageNet val was not found at {val}: .*class folders without "
                                                rf"images: {WNIDS[500]}\)"):
        ps.imagenet_val(tmp_path)


def test_unknown_and_undeclared_folders_are_refused(tmp_path):
    val = _full_val(tmp_path)
    (val / "n99999999").mkdir()
    with pytest.raises(EnsdivError, match=r"not ImageNet val wnids \(n99999999\)"):
        ps.imagenet_val(tmp_path)
    (val / "n99999999").rmdir()
    declare_class_subset(val, WNIDS[:10])  # a declared subset holds exactly its classes
    with pytest.raises(EnsdivError, match=rf"not listed in its class subset file {val / SUBSET_FILE} "
                                          rf"\({WNIDS[10]}, .*\(990 in all\)\)"):
        ps.imagenet_val(tmp_path)
    declare_class_subset(val, ["cats", WNIDS[0]])
    with pytest.raises(EnsdivError, match=r"lists cats, which are not ImageNet val wnids"):
        ps.imagenet_val(tmp_path)


def test_declared_subset_is_accepted_and_checked(tmp_path, monkeypatch):
    val = _full_val(tmp_path, skip=WNIDS[3:])
    declare_class_subset(val, WNIDS[:4])  # declares one class that is not there
    with pytest.raises(DataNotFoundError, match=rf"lacks 1 of the 4 class folders listed in its class subset file "
                                                rf"{val / SUBSET_FILE} \({WNIDS[3]}\)"):
        ps.imagenet_val(tmp_path)
    assert declare_class_subset(val, WNIDS[:3]).read_text() == "".join(f"{w}\n" for w in WNIDS[:3])
    ds = ps.imagenet_val(tmp_path)
    assert ds.targets == [0, 1, 2] and ds.classes == WNIDS[:3]
    monkeypatch.setenv("ENSDIV_DATA", str(tmp_path))
    pt._imagenet_val_subset.cache_clear()
    try:
        five = pt.load_imagenet_val_subset()
        assert five.y.tolist() == [0, 1, 2] and five.description.endswith("from a declared subset of 3 classes")
    finally:
        pt._imagenet_val_subset.cache_clear()


def test_imagenet_o_checks_wnid_folders_and_files(tmp_path):
    _jpg(tmp_path / "imagenet-o" / WNIDS[4] / "x.jpg")
    assert ps.imagenet_o(tmp_path).targets == [-1]  # its 200 classes are not listed anywhere: any wnids
    (tmp_path / "imagenet-o" / WNIDS[5]).write_text("")
    with pytest.raises(DataNotFoundError, match=rf"has files where class folders belong \({WNIDS[5]}\)"):
        ps.imagenet_o(tmp_path)
