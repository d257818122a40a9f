"""SAT at paper scale evaluates and attacks each model on images framed its own way (issue #33 item 2).

Two tiny timm models with data configs that differ in size, crop fraction and interpolation, wrapped as the
paper models are (:class:`~ensdiv.models.paper.PixelModel`), on a fake ImageNet val folder of 3 declared
classes. Checked: each model's pipeline is read from its config; each framing of the set is the hand-made
resize-and-centre-crop of the same files, with the same labels; ``sat_by_source`` and ``sat_matrix`` score
and attack every model on its own framing and hand each target the source's adversarial images; the bad
inputs.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import timm
import torch
import torchvision.transforms.functional as TF
from fake_images import write_jpegs
from PIL import Image
from torchvision.transforms import InterpolationMode

import ensdiv as ed
from ensdiv.data.paper import tensors
from ensdiv.data.paper.common import declare_class_subset
from ensdiv.data.paper.imagenet import _timm_list, imagenet_val
from ensdiv.data.registry import TensorSet
from ensdiv.models.input_spec import InputSpec
from ensdiv.models.paper import PixelModel

WNIDS = sorted(_timm_list("imagenet_synsets.txt")[:3])
# (timm test model, its data config overlay): 160 px / 95 % crop / bicubic against 128 px / 80 % / bilinear
CONFIGS = {
    "a": ("test_convnext2", {"input_size": (3, 160, 160), "crop_pct": 0.95, "interpolation": "bicubic"}),
    "b": ("test_byobnet", {"input_size": (3, 128, 128), "crop_pct": 0.8, "interpolation": "bilinear"}),
}


@pytest.fixture
def val(tmp_path, monkeypatch):
    root = tmp_path / "data"
    for k, w in enumerate(WNIDS):
        write_jpegs(root / "imagenet" / "val" / w, 2, k)
    declare_class_subset(root / "imagenet" / "val", WNIDS)
    monkeypatch.setenv("ENSDIV_DATA", str(root))
    monkeypatch.setenv("ENSDIV_CACHE", str(tmp_path / "cache"))
    tensors._imagenet_val_subset.cache_clear()
    yield root
    tensors._imagenet_val_subset.cache_clear()


def _pixel_model(key: str) -> PixelModel:
    arch, overlay = CONFIGS[key]
    torch.manual_seed(0)
    m = timm.create_model(arch, num_classes=1000, pretrained_cfg_overlay=overlay).eval()
    dc = timm.data.resolve_data_config(model=m)
    m.ensdiv_input = InputSpec(size=int(dc["input_size"][-1]), mean=tuple(dc["mean"]), std=tuple(dc["std"]))
    return PixelModel(m, key)


def _by_hand(root, size: int, crop_pct: float, mode: InterpolationMode) -> torch.Tensor:
    """Every val image, shorter side resized to floor(size / crop_pct), centre-cropped to size, in [0, 1]."""
    ds = imagenet_val(root / "imagenet")
    order = np.argsort(np.asarray(ds.targets), kind="stable")  # 2 per class: all of them, class by class
    out = []
    for i in order:
        img = Image.open(ds.files[i]).convert("RGB")
        img = TF.center_crop(TF.resize(img, math.floor(size / crop_pct), interpolation=mode), size)
        out.append(TF.pil_to_tensor(img).float() / 255)
    return torch.stack(out)


def test_each_model_has_its_pipeline_and_each_framing_is_the_hand_made_crop(val):
    a, b = _pixel_model("a"), _pixel_model("b")
    assert a.ensdiv_pipeline == (("crop_mode", "center"), ("crop_pct", 0.95), ("interpolation", "bicubic"),
                                 ("size", 160))
    assert b.ensdiv_pipeline == (("crop_mode", "center"), ("crop_pct", 0.8), ("interpolation", "bilinear"),
                                 ("size", 128))
    sets = ed.data.paper.imagenet_val_pipelines(per_class=2)
    xa, xb = sets.for_pipeline(a.ensdiv_pipeline), sets.for_pipeline(b.ensdiv_pipeline)
    assert xa.x.shape == (6, 3, 160, 160) and xb.x.shape == (6, 3, 128, 128)
    assert xa.y.tolist() == xb.y.tolist() == [0, 0, 1, 1, 2, 2]  # the first 3 wnids are classes 0-2
    torch.testing.assert_close(xa.x, _by_hand(val, 160, 0.95, InterpolationMode.BICUBIC), atol=1 / 255, rtol=0)
    torch.testing.assert_close(xb.x, _by_hand(val, 128, 0.8, InterpolationMode.BILINEAR), atol=1 / 255, rtol=0)
    assert xa.name.endswith("@160px-crop0.95-bicubic-center")
    # the default framing is the shared set imagenet/val-5k always had (256 bilinear, centre 224)
    assert tensors.pipeline_of({"input_size": (3, 224, 224), "crop_pct": 0.875, "interpolation": "bilinear"}) is None
    assert sets.for_pipeline(None).x.shape[-1] == 224


def _recording(models):
    seen: dict[str, list[torch.Tensor]] = {m.ensdiv_name: [] for m in models}
    for m in models:
        m.register_forward_hook(lambda mod, inp, out: seen[mod.ensdiv_name].append(inp[0].detach().clone()))
    return seen


@pytest.mark.parametrize("engine", ["sat_by_source", "sat_matrix"])
def test_sat_scores_and_attacks_each_model_on_its_own_framing(val, engine):
    a, b = _pixel_model("a"), _pixel_model("b")
    sets = ed.data.paper.imagenet_val_pipelines(per_class=2)
    own = {"a": sets.for_pipeline(a.ensdiv_pipeline).x, "b": sets.for_pipeline(b.ensdiv_pipeline).x}
    seen = _recording([a, b])
    kw = {"eps": 4 / 255, "alpha": 2 / 255, "steps": 1}
    with warnings.catch_warnings():  # random weights: few images right on both sides, SAT may be NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        res = getattr(ed, engine)([a, b], sets, subsample=None, attack="pgd", attack_kwargs=kw, batch_size=8)
    # the clean pass of each model is its own framing
    assert torch.equal(seen["a"][0], own["a"]) and torch.equal(seen["b"][0], own["b"])
    # each model is attacked on its own framing: an input within eps of it, not equal to it (PGD's steps);
    # and it evaluates the other's adversarial images, framed the other way: an input far from its framing
    eps = kw["eps"] + 1e-6
    for k in ("a", "b"):
        dist = [float((x - own[k]).abs().max()) for x in seen[k]]
        assert all(x.shape == own[k].shape for x in seen[k])  # a target gets its own resolution
        assert any(0 < d <= eps for d in dist), (k, dist)
        assert any(d > 10 * eps for d in dist), (k, dist)
    # correctness is each model's argmax on its own framing (a naive recomputation)
    with torch.no_grad():
        for i, (k, m) in enumerate((("a", a), ("b", b))):
            assert torch.equal(res.correct[i], m(own[k]).argmax(-1) == sets.for_pipeline(None).y)


def test_bad_pipeline_sets():
    x = torch.rand(4, 3, 8, 8)
    bad = ed.data.paper.PipelineSets("odd", lambda p: TensorSet(x, torch.tensor([0, 1, 0, 1]) if p is None
                                                                else torch.tensor([1, 1, 0, 0]), "odd"))
    m1 = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(192, 2))
    m1.ensdiv_pipeline = None
    m2 = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(192, 2))
    m2.ensdiv_pipeline = (("size", 8),)
    with pytest.raises(ed.EnsdivError, match="do not hold the same labelled images"):
        ed.sat_matrix([m1, m2], bad, subsample=None, attack_kwargs={"steps": 1})
    with pytest.raises(ed.EnsdivError, match="PipelineSets"):
        ed.sat_matrix([m1], 3.5)
    empty = ed.data.paper.PipelineSets("empty", lambda p: TensorSet(x[:0], torch.zeros(0, dtype=torch.long), "e"))
    with pytest.raises(ed.EnsdivError, match="empty"):
        ed.sat_by_source([m1], empty, subsample=None)
