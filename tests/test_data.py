"""Fashion-MNIST loading: the search order, the splits, and the missing-data sentence."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import torch

import ensdiv as ed
from ensdiv.data import fashion
from ensdiv.errors import DataNotFoundError, UnknownNameError


def _write_idx(folder, n_train=20, n_test=8):
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for (img, lbl), n in zip(fashion._FILES.values(), (n_train, n_test), strict=True):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        header = bytes([0, 0, 8, 3]) + b"".join(d.to_bytes(4, "big") for d in images.shape)
        with gzip.open(folder / f"{img}.gz", "wb") as fh:
            fh.write(header + images.tobytes())
        header = bytes([0, 0, 8, 1]) + n.to_bytes(4, "big")
        (folder / lbl).write_bytes(header + labels.tobytes())  # not gzipped: both forms are read
    return images, labels


@pytest.fixture
def fake_home(tmp_path, monkeypatch):
    monkeypatch.setenv("ENSDIV_DATA", str(tmp_path / "data"))
    monkeypatch.setattr(fashion, "DEBIAN_DIR", tmp_path / "no-debian")
    monkeypatch.setattr(fashion, "VAL_SIZE", 5)
    fashion._load_raw.cache_clear()
    yield tmp_path / "data"
    fashion._load_raw.cache_clear()


def test_env_folder_is_used_first(fake_home):
    test_images, test_labels = _write_idx(fake_home / "fashion-mnist")
    assert fashion.find_fashion_mnist(download=False) == fake_home / "fashion-mnist"
    test = ed.load_fashion_mnist("test")
    assert test.x.shape == (8, 1, 28, 28) and test.x.dtype == torch.float32
    assert torch.allclose(test.x[3, 0], torch.from_numpy(test_images[3]).float() / 255)
    assert test.y.tolist() == test_labels.tolist()


def test_val_is_carved_from_train_disjointly(fake_home):
    _write_idx(fake_home)
    train, val, full = (ed.load_fashion_mnist(s) for s in ("train", "val", "train-full"))
    assert len(train) == 15 and len(val) == 5 and len(full) == 20
    rows = {tuple(r.flatten()[:20].tolist()) for r in full.x}
    seen_train = {tuple(r.flatten()[:20].tolist()) for r in train.x}
    seen_val = {tuple(r.flatten()[:20].tolist()) for r in val.x}
    assert seen_train | seen_val == rows and not seen_train & seen_val
    assert torch.equal(ed.load_fashion_mnist("val").x, val.x)  # fixed seed


def test_missing_data_names_the_three_ways(fake_home, monkeypatch):
    import torchvision

    def no_internet(*args, **kwargs):
        raise RuntimeError("no network")

    monkeypatch.setattr(torchvision.datasets, "FashionMNIST", no_internet)
    with pytest.raises(DataNotFoundError) as info:
        ed.load_fashion_mnist("test")
    msg = str(info.value)
    assert "$ENSDIV_DATA" in msg and "dataset-fashion-mnist" in msg and "torchvision" in msg


def test_unknown_split(fake_home):
    with pytest.raises(UnknownNameError, match="Unknown Fashion-MNIST split 'valid'"):
        ed.load_fashion_mnist("valid")


def test_registry_get_and_unknown_name(fake_home):
    _write_idx(fake_home)
    assert ed.get_dataset("fmnist/test").name == "fmnist/test"
    assert ("fmnist/val" in dict(ed.list_datasets()))
    with pytest.raises(UnknownNameError, match="Unknown dataset 'fmnist/tset'.*fmnist/test"):
        ed.get_dataset("fmnist/tset")


def test_subset_is_seeded(fake_home):
    _write_idx(fake_home)
    s = ed.load_fashion_mnist("train-full")
    a, b = s.subset(6, seed=1), s.subset(6, seed=1)
    assert len(a) == 6 and torch.equal(a.x, b.x)
    assert s.subset(0) is s and s.subset(100) is s


@pytest.mark.skipif(not fashion.DEBIAN_DIR.exists(), reason="Debian's dataset-fashion-mnist is not installed")
def test_real_fashion_mnist_sizes():
    fashion._load_raw.cache_clear()
    test = ed.load_fashion_mnist("test")
    assert len(test) == 10_000 and test.num_classes == 10
    assert torch.bincount(test.y).tolist() == [1000] * 10
    assert 0.0 <= test.x.min() and test.x.max() <= 1.0
