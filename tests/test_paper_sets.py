"""Tests of the paper-scale loaders on tiny fake folders laid out like the published datasets."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from PIL import Image

from ensdiv.data.paper import sets as ps
from ensdiv.data.paper.common import declare_class_subset
from ensdiv.errors import DataNotFoundError, EnsdivError, UnknownNameError

WNIDS = ps.imagenet_wnids()
SMALL = {
    "input_size": (3, 40, 40),
    "mean": (0.5, 0.5, 0.5),
    "std": (0.5, 0.5, 0.5),
    "crop_pct": 1.0,
    "interpolation": "bilinear",
}


def _jpg(path, value=128, size=(48, 36)):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((size[1], size[0], 3), value, dtype=np.uint8)).save(path)


def test_imagenet_wnid_order_is_the_sorted_standard_list():
    assert len(WNIDS) == 1000 and WNIDS == sorted(WNIDS) and WNIDS[0] == "n01440764"


def test_eval_transform_from_a_timm_config():
    img = Image.fromarray(np.full((50, 70, 3), 255, dtype=np.uint8))
    x = ps.eval_transform(SMALL)(img)
    assert x.shape == (3, 40, 40) and torch.allclose(x, torch.ones_like(x))  # (1 - 0.5) / 0.5
    x = ps.eval_transform(None)(img)
    assert x.shape == (3, 224, 224)
    import timm

    model = timm.create_model("resnet18", pretrained=False, num_classes=10)
    model.pretrained_cfg = {**model.pretrained_cfg, "input_size": (3, 64, 64), "crop_pct": 1.0}
    assert ps.eval_transform(model)(img).shape == (3, 64, 64)
    assert torch.allclose(
        x[:, 0, 0], (1 - torch.tensor(ps.IMAGENET_MEAN)) / torch.tensor(ps.IMAGENET_STD), atol=1e-4
    )


def _write_cifar(folder, name, n, labels_key):
    folder.mkdir(parents=True, exist_ok=True)
    data = np.arange(n)[:, None].repeat(3072, 1).astype(np.uint8)  # image i is filled with value i
    with open(folder / name, "wb") as fh:
        pickle.dump({b"data": data, labels_key: list(range(n))}, fh)


def test_cifar10_and_cifar100_pickles(tmp_path):
    _write_cifar(tmp_path / "cifar-10-batches-py", "test_batch", 4, b"labels")
    ds = ps.cifar(tmp_path, name="cifar10")
    x, y = ds[3]
    assert len(ds) == 4 and y == 3 and x.shape == (3, 32, 32)
    expect = (3 / 255 - torch.tensor(ps.CIFAR_MEAN)) / torch.tensor(ps.CIFAR_STD)
    assert torch.allclose(x[:, 5, 5], expect, atol=1e-5)
    _write_cifar(tmp_path / "cifar-100-python", "test", 5, b"fine_labels")
    ds = ps.load_paper_set("cifar100", tmp_path, data_config=SMALL)
    assert len(ds) == 5 and ds[4][1] == 4 and ds[0][0].shape == (3, 40, 40)


def test_cifar_c_picks_the_severity_rows(tmp_path):
    folder = tmp_path / "CIFAR-10-C"
    folder.mkdir()
    images = np.arange(15, dtype=np.uint8)[:, None, None, None].repeat(32, 1).repeat(32, 2).repeat(3, 3)
    np.save(folder / "fog.npy", images)
    np.save(folder / "labels.npy", np.tile([7, 8, 9], 5))
    ds = ps.cifar_c(tmp_path, "fog", 4, transform=lambda im: np.asarray(im))
    assert len(ds) == 3 and [ds[i][1] for i in range(3)] == [7, 8, 9]
    assert ds[0][0][0, 0, 0] == 9  # rows 9..11 hold severity 4
    with pytest.raises(DataNotFoundError, match="snow.npy"):
        ps.cifar_c(tmp_path, "snow", 1)
    with pytest.raises(UnknownNameError, match="fog"):
        ps.cifar_c(tmp_path, "fogg", 1)
    with pytest.raises(EnsdivError, match="1-5"):
        ps.cifar_c(tmp_path, "fog", 6)


def test_svhn_mat(tmp_path):
    from scipy.io import savemat

    savemat(
        tmp_path / "test_32x32.mat",
        {"X": np.zeros((32, 32, 3, 3), np.uint8), "y": np.array([[10], [1], [5]])},
    )
    assert [ps.svhn(tmp_path)[i][1] for i in range(3)] == [-1, -1, -1]
    assert [ps.svhn(tmp_path, ood=False)[i][1] for i in range(3)] == [0, 1, 5]


def test_imagenet_val_and_v2(tmp_path):
    _jpg(tmp_path / "val" / WNIDS[0] / "a.JPEG")
    _jpg(tmp_path / "val" / WNIDS[999] / "b.JPEG", 200)
    declare_class_subset(tmp_path / "val", [WNIDS[0], WNIDS[999]])
    ds = ps.imagenet_val(tmp_path, data_config=SMALL)
    assert ds.targets == [0, 999] and ds[1][0].shape == (3, 40, 40)
    v2 = tmp_path / "v2" / "imagenetv2-matched-frequency-format-val"
    for k in (0, 10, 999):
        _jpg(v2 / str(k) / "x.jpeg")
    declare_class_subset(v2, ["0", "10", "999"])
    ds = ps.imagenet_v2(tmp_path / "v2", data_config=SMALL)
    assert sorted(ds.targets) == [0, 10, 999]


def test_imagenet_c_and_cbar_layouts(tmp_path):
    _jpg(tmp_path / "imagenet-c" / "blur" / "zoom_blur" / "3" / WNIDS[5] / "a.JPEG")
    declare_class_subset(tmp_path / "imagenet-c" / "blur" / "zoom_blur" / "3", [WNIDS[5]])
    ds = ps.imagenet_c(tmp_path / "imagenet-c", "zoom_blur", 3, data_config=SMALL)
    assert ds.targets == [5]
    with pytest.raises(DataNotFoundError, match="found 3"):
        ps.imagenet_c(tmp_path / "imagenet-c", "zoom_blur", 5)
    _jpg(tmp_path / "cbar" / "lines" / "1.6" / WNIDS[2] / "a.JPEG")
    _jpg(tmp_path / "cbar" / "plasma_noise" / "4" / WNIDS[3] / "a.JPEG")
    declare_class_subset(tmp_path / "cbar" / "lines" / "1.6", [WNIDS[2]])
    declare_class_subset(tmp_path / "cbar" / "plasma_noise" / "4", [WNIDS[3]])
    assert ps.imagenet_cbar(tmp_path / "cbar", "lines", 1.6).targets == [2]
    assert ps.imagenet_cbar(tmp_path / "cbar", "plasma", 4.0).targets == [3]  # alias and "4" == 4.0


@pytest.mark.parametrize(
    "loader,sub,synsets",
    [
        (ps.imagenet_r, "imagenet-r", "imagenet_r_synsets.txt"),
        (ps.imagenet_a, "imagenet-a", "imagenet_a_synsets.txt"),
    ],
)
def test_200_class_subsets_have_the_1000_class_mask(tmp_path, loader, sub, synsets):
    subset = ps._timm_list(synsets)
    assert len(subset) == 200
    picked = [subset[10], subset[0], subset[199]]
    for w in picked:
        _jpg(tmp_path / sub / w / "x.jpg")
    declare_class_subset(tmp_path / sub, picked)
    ds = loader(tmp_path, data_config=SMALL)
    order = sorted(picked)
    assert ds.classes == order
    assert ds.class_mask.tolist() == [WNIDS.index(w) for w in order]
    assert ds.targets == [WNIDS.index(w) for w in order]
    assert ds.masked_targets.tolist() == [0, 1, 2]
    logits = torch.randn(3, 1000)
    assert logits[:, ds.class_mask].shape == (3, 3)
    # with the val folder given, the order comes from its (sorted) class folders
    for w in WNIDS[:3] + order:
        (tmp_path / "inet" / "val" / w).mkdir(parents=True, exist_ok=True)
    declare_class_subset(tmp_path / "inet" / "val", WNIDS[:3] + order)
    ds2 = loader(tmp_path, imagenet_root=tmp_path / "inet")
    val_order = sorted(set(WNIDS[:3] + order))
    assert ds2.class_mask.tolist() == [val_order.index(w) for w in order]


def test_ood_sets_are_labelled_minus_one(tmp_path):
    _jpg(tmp_path / "imagenet-o" / WNIDS[1] / "a.jpg")
    _jpg(tmp_path / "dtd" / "images" / "banded" / "banded_0001.jpg")
    _jpg(tmp_path / "dtd" / "images" / "zigzagged" / "z.jpg")
    declare_class_subset(tmp_path / "dtd" / "images", ["banded", "zigzagged"])
    _jpg(tmp_path / "iNaturalist" / "images" / "a.jpg")
    _jpg(tmp_path / "openimage_o" / "images" / "b.jpg")
    _jpg(tmp_path / "openimage_o" / "images" / "c.png")
    for ds, n in [
        (ps.imagenet_o(tmp_path), 1),
        (ps.textures(tmp_path), 2),
        (ps.inaturalist_ood(tmp_path), 1),
        (ps.openimages_o(tmp_path, data_config=SMALL), 2),
    ]:
        assert len(ds) == n and all(t == -1 for t in ds.targets)
        x, y = ds[0]
        assert y == -1 and x.ndim == 3


def test_missing_root_says_what_was_expected_and_where_to_get_it(tmp_path):
    with pytest.raises(DataNotFoundError, match="does not exist.*get it from"):
        ps.load_paper_set("imagenet-r", tmp_path / "nowhere")
    with pytest.raises(DataNotFoundError, match="cifar-10-batches-py/ with test_batch.*toronto"):
        ps.cifar(tmp_path)
    with pytest.raises(DataNotFoundError, match="val/<wnid>"):
        ps.imagenet_val(tmp_path)
    with pytest.raises(DataNotFoundError, match="test_32x32.mat"):
        ps.svhn(tmp_path)
    with pytest.raises(DataNotFoundError, match="imagenet-r/<wnid>"):
        ps.imagenet_r(tmp_path)
    with pytest.raises(DataNotFoundError, match="iNaturalist"):
        ps.inaturalist_ood(tmp_path)


def test_wrong_layouts_are_named(tmp_path):
    _jpg(tmp_path / "val" / WNIDS[0] / "a.JPEG")
    (tmp_path / "val" / "cats").mkdir()
    with pytest.raises(EnsdivError, match="not ImageNet val wnids \\(cats\\)"):
        ps.imagenet_val(tmp_path)
    _jpg(tmp_path / "imagenet-r" / "n01440764" / "x.jpg")  # tench is not one of the 200 R classes
    with pytest.raises(EnsdivError, match="not ImageNet-R wnids"):
        ps.imagenet_r(tmp_path)
    _jpg(tmp_path / "dtd" / "images" / "banded" / "x.jpg")
    _jpg(tmp_path / "dtd" / "images" / "foo" / "x.jpg")
    with pytest.raises(EnsdivError, match="foo"):
        ps.textures(tmp_path)
    (tmp_path / "v2" / "imagenetv2-matched-frequency-format-val" / "1200").mkdir(parents=True)
    with pytest.raises(EnsdivError, match="class index 0-999"):
        ps.imagenet_v2(tmp_path / "v2")
    with pytest.raises(UnknownNameError, match="imagenet-c"):
        ps.load_paper_set("imagenet-x", tmp_path)
