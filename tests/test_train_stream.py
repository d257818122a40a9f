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
from PIL import Image
from torch.utils.data import Subset

import ensdiv as ed
from ensdiv.data.paper import eval_transform
from ensdiv.data.paper import stream as data_stream
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
def fake(fake_imagenet_train):
    return fake_imagenet_train


def _recipe(**kw):
    opts = {"model": "test_convnext2", "dataset": "imagenet/train", "epochs": 2, "batch_size": 4, "lr": 0.05,
            "schedule": "constant", **kw}
    return ed.Recipe.make(**opts)


def _weights(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


def test_flip_and_crop_on_a_folder_are_the_transforms_own(fake, tmp_path):
    # the timm training transform already crops and flips each image: "flipcrop" adds nothing per batch, so it
    # trains to the weights of "none" (same seeds, same transformed images); mixup is still applied per batch
    store = Store(tmp_path / "aug")
    plain = _weights(ed.train_recipe(_recipe(epochs=1, augment="none"), store=store, progress=False))
    flipcrop = _weights(ed.train_recipe(_recipe(epochs=1, augment="flipcrop"), store=store, progress=False))
    mixed = _weights(ed.train_recipe(_recipe(epochs=1, augment="flipcrop+mixup"), store=store, progress=False))
    assert torch.equal(plain, flipcrop)
    assert not torch.allclose(plain, mixed)


def test_a_model_trained_from_scratch_on_a_folder_sees_pixels_in_0_1(fake):
    # the evaluation sets and ed.predict feed [0, 1] pixels, so a from-scratch model trains on them too; a
    # pretrained model keeps its weights' normalisation (test_convnext2's mean/std 0.5: black becomes -1)
    from ensdiv.train.stream import stream_training_batches, stream_training_files

    for pretrained, low in ((False, 0.0), (True, -1.0)):
        recipe = _recipe().replace(model=_recipe().model.replace(pretrained=pretrained))
        model = ed.create_model("test_convnext2", **STREAM_SHAPE)
        batches = stream_training_batches(recipe, model, stream_training_files(recipe), num_workers=0)
        x, _ = batches.sample(12)
        assert x.shape == (12, 3, 160, 160)
        assert x.min() >= low - 1e-6 and x.max() <= 1.0 + 1e-6
        assert (x.min() < -0.5) == pretrained  # the fake JPEGs hold dark pixels


def test_bad_inputs_of_folder_training(fake, tmp_path):
    store = Store(tmp_path / "bad")
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
