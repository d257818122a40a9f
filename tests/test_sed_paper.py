"""The SED chapter's paper-scale path on fake ImageNet-layout folders with a tiny pretrained timm ViT: streamed
cut features against the same images stacked in memory, the feature cache, Heads recipes trained on streamed
sets (against the in-memory head training), IN-R scored on its class subset, and the bad inputs."""

from __future__ import annotations

import re
import shutil

import pytest
import timm
import torch
from fake_images import write_jpegs
from safetensors.torch import save_file

import ensdiv as ed
import ensdiv.models.paper as paper_models
from ensdiv.chapters import sed as ch
from ensdiv.data.paper import eval_transform
from ensdiv.data.paper import stream as data_stream
from ensdiv.data.paper.common import declare_class_subset
from ensdiv.data.paper.imagenet import _timm_list, imagenet_train, imagenet_val, imagenet_wnids
from ensdiv.data.registry import TensorSet
from ensdiv.models.stack import cut_features
from ensdiv.store import Store
from ensdiv.train import frameworks, stream

TINY = {"embed_dim": 16, "depth": 2, "num_heads": 2}  # vit_tiny_patch16_224 shrunk: 224 px, 1000 classes
WNIDS = [w for w in _timm_list("imagenet_r_synsets.txt")][:3]  # three IN-R classes (also ImageNet-1k classes)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """ImageNet train/val, an IN-R subset of 3 wnids and a flat iNaturalist folder in $ENSDIV_DATA, a tiny
    ViT's "pretrained" weights in place of timm's cache, and a fresh cache."""
    root = tmp_path / "data"
    for k, w in enumerate(WNIDS):
        write_jpegs(root / "imagenet" / "train" / w, 4, k)
        write_jpegs(root / "imagenet" / "val" / w, 2, 10 + k)
        write_jpegs(root / "imagenet-r" / w, 2, 20 + k)
    for sub in ("imagenet/train", "imagenet/val", "imagenet-r"):  # 3 of the classes: a declared subset
        declare_class_subset(root / sub, WNIDS)
    write_jpegs(root / "iNaturalist" / "images", 5, 30)
    weights = {}
    for name, kw in (("vit_tiny_patch16_224", TINY), ("full", {})):
        torch.manual_seed(0)
        weights[name] = tmp_path / f"{name}.safetensors"
        save_file(timm.create_model("vit_tiny_patch16_224", num_classes=1000, **kw).state_dict(), weights[name])
    which = {"file": weights["vit_tiny_patch16_224"]}
    monkeypatch.setattr(paper_models, "_local_weights", lambda name: str(which["file"]))
    monkeypatch.setenv("ENSDIV_ALLOW_PATCHED", "1")  # the stand-in's weights are in the keys (file name, size)
    monkeypatch.setenv("ENSDIV_DATA", str(root))
    monkeypatch.setenv("ENSDIV_CACHE", str(tmp_path / "cache"))
    memos = (stream._BACKBONES, stream._FINGERPRINTS, data_stream._OPENED, ch._PAPER, ch._HEADS)  # per process
    saved = [dict(m) for m in memos]
    for m in memos:
        m.clear()
    yield {"root": root, "weights": weights, "which": which, "store": Store(tmp_path / "cache")}
    for m, old in zip(memos, saved, strict=True):
        m.clear()
        m.update(old)


def _backbone_recipe(**kw):
    return ed.Recipe.make(model="vit_tiny_patch16_224", model_kwargs=dict(TINY), pretrained=True,
                          dataset="imagenet/train", epochs=1, name="tiny", **kw)


def _in_memory(root, backbone):
    """The val images read one by one with the backbone's eval transform and stacked: (x, y)."""
    ds = imagenet_val(root / "imagenet", transform=eval_transform(stream.backbone_data_config(backbone)))
    return torch.stack([ds[i][0] for i in range(len(ds))]), torch.tensor(ds.targets)


def test_streamed_features_equal_stacked_in_memory_features_and_are_cached(fake):
    backbone, key = stream.stream_backbone(_backbone_recipe())
    x, y = _in_memory(fake["root"], backbone)
    with torch.no_grad():
        expected = cut_features(backbone, x, "block")
    calls = []
    backbone.patch_embed.register_forward_hook(lambda *a: calls.append(1))
    out = stream.stream_features(backbone, key, "imagenet/val", cut="block", store=fake["store"], batch_size=4,
                                 shard_size=4)  # 6 images: two batches in two cached shards
    torch.testing.assert_close(out["features"], expected)
    assert out["labels"].tolist() == y.tolist() == sorted(imagenet_wnids().index(w) for w in WNIDS for _ in "ab")
    assert len(calls) == 2 and len(out["class_mask"]) == 0
    assert len(fake["store"].entries("features")) == 1  # the shards were folded into one entry
    again = stream.stream_features(backbone, key, "imagenet/val", cut="block", store=fake["store"], batch_size=4,
                                   shard_size=4)
    assert len(calls) == 2  # a cache hit: the backbone did not run again
    torch.testing.assert_close(again["features"], expected)
    sub = stream.stream_features(backbone, key, "imagenet/val", cut="head", store=fake["store"], subset=4,
                                 subset_seed=3)
    pick = TensorSet(x, y, "val").subset(4, seed=3)  # the registry sets' subset draw
    with torch.no_grad():
        torch.testing.assert_close(sub["features"], cut_features(backbone, pick.x, "head"))
    assert sub["labels"].tolist() == pick.y.tolist()


def test_the_fingerprint_ignores_where_the_folder_lies_but_not_its_files(fake, tmp_path):
    dc = {"input_size": (3, 224, 224)}
    a = imagenet_val(fake["root"] / "imagenet")
    shutil.copytree(fake["root"] / "imagenet", tmp_path / "moved")
    b = imagenet_val(tmp_path / "moved")
    fp = data_stream.stream_fingerprint
    assert fp("imagenet/val", a, dc) == fp("imagenet/val", b, dc)
    (tmp_path / "moved" / "val" / WNIDS[0] / "img0.JPEG").rename(tmp_path / "moved" / "val" / WNIDS[0] / "x.JPEG")
    assert fp("imagenet/val", imagenet_val(tmp_path / "moved"), dc) != fp("imagenet/val", a, dc)
    assert fp("imagenet/val", a, {"input_size": (3, 160, 160)}) != fp("imagenet/val", a, dc)


def test_heads_recipe_trains_on_streamed_sets_like_in_memory_heads_and_reloads(fake, monkeypatch):
    bb = _backbone_recipe()
    method = ed.Heads(backbone=bb.to_dict(), members=2, loss="naive_a2d", lam=1.0, cut="block", ood_set="inaturalist")
    recipe = bb.replace(method=method, epochs=2, batch_size=4, optimizer="adamw", lr=1e-2, name="heads")
    assert stream.is_stream_recipe(recipe)
    model = stream.train_stream_heads(recipe, store=fake["store"], progress=False)
    # the same training on features computed in memory: the train images, the iNaturalist images
    backbone, _ = stream.stream_backbone(bb)
    tf = eval_transform(stream.backbone_data_config(backbone))
    train = imagenet_train(fake["root"] / "imagenet", transform=tf)
    ood = data_stream.sets.inaturalist_ood(fake["root"] / "iNaturalist", transform=tf)
    with torch.no_grad():
        f_train = cut_features(backbone, torch.stack([train[i][0] for i in range(len(train))]), "block")
        f_ood = cut_features(backbone, torch.stack([ood[i][0] for i in range(len(ood))]), "block")
    heads = frameworks.fit_heads(recipe, backbone, f_train, torch.tensor(train.targets), ood=f_ood, name="t",
                                 classes=[], progress=False)
    for a, b in zip(model.heads.state_dict().values(), heads.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b)
    assert model.ensdiv_meta["train_size"] == 12
    x, _ = _in_memory(fake["root"], backbone)
    logits = model(x)
    assert logits.shape == (2, 6, 1000)
    monkeypatch.setattr(stream, "fit_heads", lambda *a, **k: pytest.fail("a cached model was trained again"))
    torch.testing.assert_close(stream.train_stream_heads(recipe, store=fake["store"], progress=False)(x), logits)
    # ed.train_recipe hands a stream recipe to the stream path (and finds the cached heads)
    torch.testing.assert_close(ed.train_recipe(recipe, store=fake["store"], progress=False)(x), logits)


def test_chapter_scores_in_r_on_its_class_subset(fake):
    fake["which"]["file"] = fake["weights"]["full"]  # the chapter builds the preset's timm name as it is
    cfg = ch.preset("tab02_generalisation", "paper", verbose=False, backbone="vit_tiny_patch16_224", members=2,
                    epochs=1, batch_size=4)
    feats, labels = ch.set_features(cfg, "r")
    assert labels.tolist() == [0, 0, 1, 1, 2, 2]  # positions of each image's wnid among IN-R's folders
    single = ch.single_logits(cfg, "r")
    assert single.shape == (1, 6, 3)
    # by hand: the full backbone's 1000 logits on the stacked IN-R images, then the three wnids' columns
    backbone, _ = stream.stream_backbone(ch.backbone_recipe(cfg))
    ds = data_stream.sets.imagenet_r(fake["root"], transform=eval_transform(stream.backbone_data_config(backbone)))
    with torch.no_grad():
        full = backbone(torch.stack([ds[i][0] for i in range(len(ds))]))
    cols = [imagenet_wnids().index(w) for w in sorted(WNIDS)]
    hand = (full[:, cols].argmax(-1) == torch.tensor([0, 0, 1, 1, 2, 2])).float().mean() * 100
    assert ch.evaluate(single, labels)["member_acc"] == pytest.approx(float(hand), abs=1e-4)
    ens = ch.ensemble_logits(cfg, "sed_gen", "r")  # trains the heads on the streamed imagenet/train features
    assert ens.shape == (2, 6, 3)
    assert ch.ensemble_logits(cfg, "sed_gen", "val").shape == (2, 6, 1000)


def test_paper_path_bad_inputs(fake):
    bb = _backbone_recipe()
    with pytest.raises(ed.DataNotFoundError, match=re.escape(str(fake["root"] / "imagenet-a"))):
        data_stream.open_stream_set("imagenet-a")
    shutil.rmtree(fake["root"] / "imagenet" / "train")
    missing = re.escape(f"ImageNet train was not found at {fake['root'] / 'imagenet'}:")
    with pytest.raises(ed.DataNotFoundError, match=missing):
        data_stream.open_stream_set("imagenet/train")
    with pytest.raises(ed.UnknownNameError):
        data_stream.open_stream_set("imagenet-c/gaussian_noise")
    heads = ed.Heads(backbone=bb.to_dict(), members=2, cut="block")
    with pytest.raises(ed.InvalidInputError, match="feature passes"):
        stream.train_stream_heads(bb.replace(method=heads.replace(feature_passes=1)), store=fake["store"])
    with pytest.raises(ed.InvalidInputError, match="stream set as its unlabeled"):
        stream.train_stream_heads(bb.replace(method=heads.replace(loss="naive_a2d", ood_set="letters")),
                                  store=fake["store"])
    with pytest.raises(ed.InvalidInputError, match="ed.train_recipe"):
        stream.train_stream_heads(bb.replace(method=heads, dataset="fmnist/train"), store=fake["store"])
    with pytest.raises(ed.InvalidInputError, match="unlabelled"):
        stream.train_stream_heads(bb.replace(method=heads, dataset="inaturalist"), store=fake["store"])
    with pytest.raises(ed.InvalidInputError, match="without pretrained weights"):
        stream.stream_backbone(bb.replace(pretrained=False))


def test_fig2_shows_the_streamed_rendition_images(fake):
    """#30: Fig. 2's paper path reads ImageNet-R's own files: one image per logit row, labels equal to the
    features' (positions among the set's class folders), class names the set's wnids."""
    fake["which"]["file"] = fake["weights"]["full"]
    cfg = ch.preset("fig02_divergent_samples", "paper", verbose=False, backbone="vit_tiny_patch16_224", members=2,
                    epochs=1, batch_size=4)
    shown = ch.shown_set(cfg, "r")
    _, labels = ch.set_features(cfg, "r")
    assert shown.labels.tolist() == labels.tolist() == [0, 0, 1, 1, 2, 2]
    assert shown.classes == sorted(WNIDS)
    img = shown.image(3)
    assert img.ndim == 3 and img.shape[2] == 3 and img.dtype == "uint8"
    files = data_stream.stream_files("imagenet-r")
    assert files.files[3].parent.name == shown.classes[int(shown.labels[3])]
