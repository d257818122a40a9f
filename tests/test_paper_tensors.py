"""CIFAR-10/100 and SVHN registry sets on tiny fake files in the published layouts, and the
Packed-Ensembles chapter's ``paper`` path run end to end on them."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import torch

from ensdiv.data.paper import tensors as pt
from ensdiv.data.registry import get_dataset, list_datasets
from ensdiv.errors import DataNotFoundError, UnknownNameError

PER_BATCH = 20
CIFAR_URL = "https://www.cs.toronto.edu/~kriz/cifar.html (python version)"


@pytest.fixture(autouse=True)
def _fresh_read_cache():
    pt._read.cache_clear()
    yield
    pt._read.cache_clear()


def _rows(seed: int, n: int = PER_BATCH) -> np.ndarray:
    """n random CIFAR rows (3072 bytes: 1024 red, 1024 green, 1024 blue, each row-major 32x32)."""
    return np.random.default_rng(seed).integers(0, 256, size=(n, 3072), dtype=np.uint8)


def _dump(path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        pickle.dump(obj, fh)


def _fake_cifar10(root, batches=("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4",
                                 "data_batch_5", "test_batch")) -> dict:
    out = {}
    for k, b in enumerate(batches):
        data = _rows(k)
        labels = [(i * 3 + k) % 10 for i in range(PER_BATCH)]
        _dump(root / "cifar-10-batches-py" / b, {b"batch_label": b.encode(), b"labels": labels, b"data": data})
        out[b] = (data, labels)
    return out


def _fake_cifar100(root, *, meta: bool = True) -> dict:
    out = {}
    for k, split in enumerate(("train", "test")):
        data = _rows(10 + k)
        fine = [(i * 7 + k) % 100 for i in range(PER_BATCH)]
        _dump(root / "cifar-100-python" / split,
              {b"filenames": [], b"fine_labels": fine, b"coarse_labels": [f // 5 for f in fine], b"data": data})
        out[split] = (data, fine)
    if meta:
        _dump(root / "cifar-100-python" / "meta",
              {b"fine_label_names": [f"name{i}".encode() for i in range(100)],
               b"coarse_label_names": [f"coarse{i}".encode() for i in range(20)]})
    return out


def _fake_svhn(root, n: int = PER_BATCH) -> np.ndarray:
    from scipy.io import savemat

    x = np.random.default_rng(5).integers(0, 256, size=(32, 32, 3, n), dtype=np.uint8)
    y = (np.arange(n) % 10 + 1).reshape(n, 1).astype(np.uint8)  # SVHN labels are 1..10 (10 = digit 0)
    (root / "svhn").mkdir(parents=True, exist_ok=True)
    savemat(root / "svhn" / "test_32x32.mat", {"X": x, "y": y})
    return x


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    root = tmp_path / "data"
    root.mkdir()
    monkeypatch.setenv("ENSDIV_DATA", str(root))
    return root


def _pixel(row: np.ndarray, c: int, h: int, w: int) -> int:
    return int(row[c * 1024 + h * 32 + w])  # CIFAR rows are channel-planar (CHW)


def test_cifar10_test_shapes_values_labels_and_planar_layout(data_root):
    fake = _fake_cifar10(data_root)
    data, labels = fake["test_batch"]
    data[3, 0 * 1024 + 5 * 32 + 7] = 11  # image 3, pixel (row 5, column 7): R, G, B placed by hand
    data[3, 1 * 1024 + 5 * 32 + 7] = 200
    data[3, 2 * 1024 + 5 * 32 + 7] = 77
    _dump(data_root / "cifar-10-batches-py" / "test_batch", {b"labels": labels, b"data": data})
    ts = get_dataset("cifar10/test")
    assert ts.name == "cifar10/test" and ts.x.shape == (PER_BATCH, 3, 32, 32)
    assert ts.x.dtype == torch.float32 and ts.y.dtype == torch.int64 and ts.x.is_contiguous()
    assert 0.0 <= float(ts.x.min()) and float(ts.x.max()) <= 1.0
    f32 = np.float32
    assert ts.x[3, :, 5, 7].tolist() == [f32(11) / f32(255), f32(200) / f32(255), f32(77) / f32(255)]
    # every value of one image against a plain loop over the planar row (no normalisation)
    x3 = ts.x[3].numpy()
    for c in range(3):
        for h in range(32):
            for w in range(32):
                assert x3[c, h, w] == f32(_pixel(data[3], c, h, w)) / f32(255)
    assert ts.y.tolist() == labels
    assert ts.classes[:3] == ["airplane", "automobile", "bird"] and ts.num_classes == 10


def test_cifar10_train_concatenates_the_five_batches_in_order(data_root):
    fake = _fake_cifar10(data_root)
    ts = get_dataset("cifar10/train")
    assert ts.x.shape == (5 * PER_BATCH, 3, 32, 32)
    assert ts.y.tolist() == [lab for b in range(1, 6) for lab in fake[f"data_batch_{b}"][1]]
    row = fake["data_batch_3"][0][4]  # batch 3, image 4 = global image 2 * PER_BATCH + 4
    assert ts.x[2 * PER_BATCH + 4, 2, 31, 0].item() == np.float32(_pixel(row, 2, 31, 0)) / np.float32(255)


def test_cifar100_fine_labels_and_class_names_from_meta(data_root):
    fake = _fake_cifar100(data_root)
    for split in ("train", "test"):
        ts = get_dataset(f"cifar100/{split}")
        data, fine = fake[split]
        assert ts.x.shape == (PER_BATCH, 3, 32, 32) and ts.y.tolist() == fine
        assert ts.x[7, 1, 0, 31].item() == np.float32(_pixel(data[7], 1, 0, 31)) / np.float32(255)
        assert len(ts.classes) == 100 and ts.classes[42] == "name42"


def test_cifar100_without_meta_file_uses_index_class_names(data_root):
    _fake_cifar100(data_root, meta=False)
    ts = get_dataset("cifar100/test")
    assert ts.classes == [str(i) for i in range(100)]


def test_svhn_is_ood_with_every_label_minus_one(data_root):
    x = _fake_svhn(data_root)
    ts = get_dataset("svhn/test")
    assert ts.x.shape == (PER_BATCH, 3, 32, 32) and ts.y.tolist() == [-1] * PER_BATCH
    assert ts.classes == [] and "OOD" in ts.description
    # .mat layout X[h, w, c, n] -> x[n, c, h, w]
    assert ts.x[9, 2, 4, 30].item() == np.float32(x[4, 30, 2, 9]) / np.float32(255)
    assert 0.0 <= float(ts.x.min()) and float(ts.x.max()) <= 1.0


def test_listing_names_reads_no_data(tmp_path, monkeypatch):
    monkeypatch.setenv("ENSDIV_DATA", str(tmp_path / "nowhere"))

    def boom(*args):
        raise AssertionError("list_datasets read data")

    monkeypatch.setattr(pt, "_read", boom)
    rows = dict(list_datasets())
    for name in ("cifar10/train", "cifar10/test", "cifar100/train", "cifar100/test", "svhn/train", "svhn/test"):
        assert name in rows
    assert "OOD" in rows["svhn/test"] and "label is -1" in rows["svhn/test"]


def test_missing_cifar10_folder_gives_the_loader_sentence(data_root):
    with pytest.raises(DataNotFoundError) as err:
        get_dataset("cifar10/test")
    assert str(err.value) == (
        f"CIFAR-10 was not found at {data_root}: expected cifar-10-batches-py/ with test_batch; "
        f"get it from {CIFAR_URL}."
    )


def test_missing_one_cifar10_train_batch_gives_the_loader_sentence(data_root):
    _fake_cifar10(data_root, batches=("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4"))
    with pytest.raises(DataNotFoundError, match=r"^CIFAR-10 was not found at .*data_batch_5; get it from"):
        get_dataset("cifar10/train")


def test_missing_cifar100_gives_the_loader_sentence(data_root):
    with pytest.raises(DataNotFoundError) as err:
        get_dataset("cifar100/train")
    assert str(err.value) == (
        f"CIFAR-100 was not found at {data_root}: expected cifar-100-python/ with train; get it from {CIFAR_URL}."
    )


def test_missing_svhn_gives_the_loader_sentence(data_root):
    with pytest.raises(DataNotFoundError) as err:
        get_dataset("svhn/test")
    assert str(err.value) == (
        f"SVHN was not found at {data_root}: expected test_32x32.mat; "
        "get it from http://ufldl.stanford.edu/housenumbers/ (format 2, test_32x32.mat)."
    )


def test_nonexistent_data_folder_gives_the_loader_sentence(tmp_path, monkeypatch):
    monkeypatch.setenv("ENSDIV_DATA", str(tmp_path / "absent"))
    with pytest.raises(DataNotFoundError, match=r"^CIFAR-10 was not found at .*absent: expected"):
        get_dataset("cifar10/test")


def test_unknown_split_name_is_rejected_by_the_registry(data_root):
    with pytest.raises(UnknownNameError, match="cifar10/val"):
        get_dataset("cifar10/val")


# ---- the Packed-Ensembles chapter's paper path on the fake files ---------------------------------
@pytest.mark.slow
def test_packed_ensembles_paper_path_runs_on_fake_cifar(data_root, tmp_store, capsys):
    import ensdiv as ed
    from ensdiv.chapters import packed_ensembles as ps

    _fake_cifar10(data_root)
    _fake_svhn(data_root)
    cfg = ps.preset("tab01_efficient_ensembles", "paper", train_subset=16, epochs=1, batch_size=16, seeds=[0],
                    test_subset=20, ood_subset=20)
    assert cfg["dataset"] == "cifar10/train" and cfg["test_set"] == "cifar10/test"
    assert cfg["ood_set"] == "svhn/test" and cfg["arch"] == "resnet18"
    df = ps.compare_methods(cfg, methods=["single", "packed"])
    assert df["method"].tolist() == ["single", "packed"] and df["ood_set"].tolist() == ["svhn/test"] * 2
    for col in ("acc", "nll", "ece", "aupr", "auroc", "fpr95"):
        assert all(math.isfinite(v) for v in df[col]), col
    assert df["acc"].between(0, 100).all()
    # the recipes' models were built for CIFAR: 3-channel 32x32 input, 10 classes (one SGD step each
    # on 16 images; a full ResNet-18 so that a model built with Fashion-MNIST's in_chans=1 would fail)
    for method in ("single", "packed"):
        (recipe,) = ps.recipes_for(method, cfg, 0)
        model = ed.train_recipe(recipe, progress=False)  # read from the cache filled above
        first = next(m for m in model.modules() if isinstance(m, torch.nn.Conv2d))
        assert first.in_channels == 3
        out = model.eval()(torch.rand(2, 3, 32, 32))
        assert out.shape[-1] == 10


@pytest.mark.slow
def test_appF_paper_path_builds_cifar100_models_and_a_packed_condition(data_root, tmp_store):
    """App. F at paper scale (CIFAR-100, as the appendix): every member is built from the data's shape
    (3 channels, 32 px, 100 classes), and one condition is the members of one PE model."""
    import ensdiv as ed
    from ensdiv.chapters import packed_ensembles as ps

    _fake_cifar100(data_root)
    cfg = ps.preset("appF_sources_of_diversity", "paper", train_subset=16, epochs=1, batch_size=16,
                    num_estimators=2, test_subset=8, verbose=False)
    assert (cfg["dataset"], cfg["test_set"], cfg["arch"]) == ("cifar100/train", "cifar100/test", "resnet18")
    assert cfg["deterministic"] is True  # a no-op without CUDA
    test = ps.eval_set(cfg)
    conditions, identical = ps.sources_of_diversity(cfg, test, deterministic=cfg["deterministic"])
    assert list(conditions) == ["nothing varies (one model, M times)", "non-determinism only",
                                "initialisation only", "batch order only", "initialisation + order",
                                "Packed-Ensembles members (one model)"]
    for name, logits in conditions.items():
        assert logits.shape == (2, 8, 100), name
    if not torch.cuda.is_available():
        assert identical  # CPU kernels: a retrain is bit-identical
    assert torch.equal(conditions["nothing varies (one model, M times)"][0],
                       conditions["initialisation only"][0])
    assert not torch.equal(conditions["initialisation only"][0], conditions["initialisation only"][1])
    (recipe,) = ps.recipes_for("single", cfg, 0)
    model = ed.train_recipe(recipe, progress=False)  # from the cache filled above
    first = next(m for m in model.modules() if isinstance(m, torch.nn.Conv2d))
    assert first.in_channels == 3 and model.eval()(torch.rand(2, 3, 32, 32)).shape == (2, 100)
