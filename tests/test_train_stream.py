"""Full models trained from ImageNet-layout folders through ``ed.train_recipe`` (issue #33 item 1).

A fake ``imagenet/train`` (3 wnids x 4 JPEGs of different sizes) in ``$ENSDIV_DATA`` and timm's tiny
``test_convnext2`` (160 px in its own data config). Checked: the recipe trains for a few steps and is cached,
keyed by the folder's files; a folder set and the same images held in memory train to the same weights
through ``fit`` (one training path, two batch sources); an interrupted run resumes from its epoch
checkpoint to the weights of an uninterrupted one; the transform is the model's own; the bad inputs.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from fake_images import write_jpegs
from PIL import Image
from torch.utils.data import Subset

import ensdiv as ed
from ensdiv.data.paper import eval_transform
from ensdiv.data.paper import stream as data_stream
from ensdiv.data.paper.common import declare_class_subset
from ensdiv.data.paper.imagenet import _timm_list, imagenet_train
from ensdiv.data.registry import TensorSet
from ensdiv.store import Store
from ensdiv.train import Optim, fit
from ensdiv.train import build as train_build
from ensdiv.train.batches import LoaderBatches, training_transform
from ensdiv.train.keys import model_cache_config
from ensdiv.train.stream import STREAM_SHAPE

WNIDS = _timm_list("imagenet_synsets.txt")[:3]


@pytest.fixture
def fake(tmp_path, monkeypatch):
    root = tmp_path / "data"
    for k, w in enumerate(WNIDS):
        write_jpegs(root / "imagenet" / "train" / w, 4, k)
    declare_class_subset(root / "imagenet" / "train", WNIDS)  # 3 of the 1000 classes, on purpose
    monkeypatch.setenv("ENSDIV_DATA", str(root))
    monkeypatch.setenv("ENSDIV_CACHE", str(tmp_path / "cache"))
    memos = (data_stream._OPENED, data_stream._FILE_KEYS)
    saved = [dict(m) for m in memos]
    for m in memos:
        m.clear()
    yield {"root": root, "store": Store(tmp_path / "cache")}
    for m, old in zip(memos, saved, strict=True):
        m.clear()
        m.update(old)


def _recipe(**kw):
    opts = {"model": "test_convnext2", "dataset": "imagenet/train", "epochs": 2, "batch_size": 4, "lr": 0.05,
            "schedule": "constant", **kw}
    return ed.Recipe.make(**opts)


def _weights(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_a_full_model_trains_from_a_folder_and_is_cached_by_its_files(fake, monkeypatch):
    recipe = _recipe()
    init = train_build.build_model(recipe, **STREAM_SHAPE)
    model = ed.train_recipe(recipe, store=fake["store"], progress=False)
    meta = model.ensdiv_meta
    assert meta["train_size"] == 12 and meta["fit"]["status"] == "finished" and meta["fit"]["epochs_done"] == 2
    assert len(meta["fit"]["history"]) == 2 and all(np.isfinite(meta["fit"]["history"]))
    assert not torch.equal(_weights(model), _weights(init))  # it trained (3 steps per epoch)
    assert model(torch.rand(2, 3, 160, 160)).shape == (2, 1000)
    # cached: a second call trains nothing and gives the same weights
    monkeypatch.setattr(train_build, "fit", lambda *a, **k: pytest.fail("trained again"))
    again = ed.train_recipe(recipe, store=fake["store"], progress=False)
    assert torch.equal(_weights(again), _weights(model))
    # keyed by the folder's files and labels, not by where it lies
    key = model_cache_config(recipe)
    assert key["data"]["imagenet/train"] == data_stream.stream_files_fingerprint("imagenet/train")
    folder = fake["root"] / "imagenet" / "train" / WNIDS[0]
    (folder / "img0.JPEG").rename(folder / "renamed.JPEG")
    data_stream._OPENED.clear()
    data_stream._FILE_KEYS.clear()
    assert model_cache_config(recipe)["data"]["imagenet/train"] != key["data"]["imagenet/train"]


def test_a_folder_and_the_same_images_in_memory_train_to_the_same_weights(fake):
    """One training loop: only the batch source differs (a deterministic transform makes them comparable)."""
    model = ed.create_model("test_convnext2", **STREAM_SHAPE)
    tf = eval_transform(model)
    files = imagenet_train(fake["root"] / "imagenet", transform=tf)
    memory = TensorSet(torch.stack([files[i][0] for i in range(len(files))]), torch.tensor(files.targets),
                       "imagenet/train", classes=[str(c) for c in range(1000)])
    optim = Optim(epochs=2, batch_size=4, lr=0.05, schedule="constant")
    trained = []
    for data in (memory, LoaderBatches(files, name="imagenet/train", num_classes=1000, num_workers=0)):
        torch.manual_seed(0)
        m = ed.create_model("test_convnext2", **STREAM_SHAPE)
        fit(m, data, optim, seed=5, accelerator="cpu", progress=False)
        trained.append(_weights(m))
    torch.testing.assert_close(trained[0], trained[1])
    # and two workers read the same batches as the main process
    torch.manual_seed(0)
    m = ed.create_model("test_convnext2", **STREAM_SHAPE)
    fit(m, LoaderBatches(files, name="imagenet/train", num_classes=1000, num_workers=2), optim, seed=5,
        accelerator="cpu", progress=False)
    torch.testing.assert_close(_weights(m), trained[0])


def test_an_interrupted_folder_run_resumes_to_the_uninterrupted_weights(fake, tmp_path):
    recipe = _recipe(epochs=3)
    whole = ed.train_recipe(recipe, store=Store(tmp_path / "whole"), progress=False)
    store = Store(tmp_path / "parts")
    ed.train_recipe(recipe, store=store, progress=False, stop_after=1)
    assert len(store.entries("checkpoint")) == 1 and not store.entries("model")
    resumed = ed.train_recipe(recipe, store=store, progress=False)
    torch.testing.assert_close(_weights(resumed), _weights(whole))
    assert len(resumed.ensdiv_meta["fit"]["history"]) == 3


def test_the_images_go_through_the_models_own_training_transform():
    model = ed.create_model("test_convnext2", **STREAM_SHAPE)
    img = Image.fromarray(np.zeros((90, 70, 3), dtype=np.uint8))
    assert training_transform(model)(img).shape == (3, 160, 160)  # test_convnext2's data config: 160 px
    assert training_transform(model, overrides={"input_size": (3, 96, 96)})(img).shape == (3, 96, 96)
    # timm's mean/std of this model (0.5, 0.5): a black image becomes -1 everywhere
    assert torch.allclose(training_transform(model)(img), torch.full((3, 160, 160), -1.0))


def test_bad_inputs_of_folder_training(fake, tmp_path):
    store = Store(tmp_path / "bad")
    with pytest.raises(ed.InvalidInputError, match="already crops and flips"):
        ed.train_recipe(_recipe(augment="flipcrop"), store=store, progress=False)
    with pytest.raises(ed.InvalidInputError, match="pre-training and probing"):
        ed.train_recipe(_recipe().replace(method=ed.Pretrain(dataset="fmnist/train")), store=store,
                        progress=False)
    with pytest.raises(ed.EnsdivError, match="TensorSet or a LoaderBatches"):
        fit(ed.create_model("test_cnn"), [1, 2], Optim(epochs=1), progress=False)
    for m in (data_stream._OPENED, data_stream._FILE_KEYS):
        m.clear()
    labels = [int(t) for t in imagenet_train(fake["root"] / "imagenet").targets]
    assert sorted(set(labels)) == [0, 1, 2]
    empty = Subset(imagenet_train(fake["root"] / "imagenet"), [])
    with pytest.raises(ed.EnsdivError, match="empty dataset"):
        fit(ed.create_model("test_cnn"), LoaderBatches(empty, name="none", num_classes=1000), Optim(epochs=1),
            progress=False)
