"""design-diversity's paper path on tiny fake ImageNet folders: the page functions load ImageNet val,
-V2 and -C̄ from ``$ENSDIV_DATA``, take a seeded subset, and cache a pretrained model's logits on it.
No download: the "pretrained" model is a small module standing in for a timm model."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
from PIL import Image

from ensdiv.chapters import design_diversity as ch
from ensdiv.data.paper import sets as ps
from ensdiv.data.paper.common import declare_class_subset

WNIDS = ps.imagenet_wnids()


def _jpg(path, value):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((40, 60, 3), value, dtype=np.uint8)).save(path)


@pytest.fixture()
def fake_imagenet(tmp_path, monkeypatch):
    data = tmp_path / "data"
    for k, cls in enumerate((0, 7, 999)):  # 3 images, one per class, distinct grey levels
        _jpg(data / "imagenet" / "val" / WNIDS[cls] / f"v{k}.JPEG", 40 + 80 * k)
        _jpg(data / "imagenet-v2" / "imagenetv2-matched-frequency-format-val" / str(cls) / f"x{k}.jpeg", 30 + 80 * k)
        for folder, strength in (("lines", "1.6"), ("plasma_noise", "4.0"), ("checkerboard_cutout", "4.0"),
                                 ("water_drop", "7.0")):
            _jpg(data / "imagenet-cbar" / folder / strength / WNIDS[cls] / f"c{k}.JPEG", 20 + 80 * k)
    for folder in data.glob("imagenet-cbar/*/*"):  # every fake folder holds 3 of the 1000 classes
        declare_class_subset(folder, [WNIDS[c] for c in (0, 7, 999)])
    declare_class_subset(data / "imagenet" / "val", [WNIDS[c] for c in (0, 7, 999)])
    declare_class_subset(data / "imagenet-v2" / "imagenetv2-matched-frequency-format-val", ["0", "7", "999"])
    monkeypatch.setenv("ENSDIV_DATA", str(data))
    monkeypatch.setenv("ENSDIV_CACHE", str(tmp_path / "cache"))
    return data  # the stream sets are memoised per $ENSDIV_DATA: a fresh folder is read afresh


class _MeanColour(nn.Module):
    """A stand-in "pretrained" ImageNet model: logit k = mean intensity * k (1000 classes)."""

    ensdiv_name = "fake_timm_model"
    ensdiv_cache_id = {"module": "fake_timm_model", "weights": "test"}

    def forward(self, x):
        return x.mean(dim=(1, 2, 3))[:, None] * torch.arange(1000, dtype=x.dtype)


def test_paper_eval_sets_load_from_local_folders(fake_imagenet):
    cfg = ch.preset("fig05_06_ensemble_diversity", "paper", verbose=False, eval_images=2)
    for key, expect_name in (("v2", "imagenet-v2"), ("lines", "imagenet-cbar/lines/1.6"),
                             ("plasma", "imagenet-cbar/plasma_noise/4.0")):
        data, name, idx = ch.eval_rows(cfg, key)
        assert idx is None and name.startswith(expect_name)
        assert data.x.shape == (2, 3, 224, 224) and 0.0 <= float(data.x.min()) <= float(data.x.max()) <= 1.0
        assert set(data.y.tolist()) <= {0, 7, 999} and len(set(data.y.tolist())) == 2
    # the same seed draws the same subset; all images when eval_images is 0
    again = ch.eval_set(ch.preset("fig05_06_ensemble_diversity", "paper", verbose=False, eval_images=2), "v2")
    assert torch.equal(again.y, ch.eval_set(cfg, "v2").y)
    assert len(ch.eval_set(cfg, "v2", n=0)) == 3


def test_paper_logits_of_a_pretrained_model_are_cached(fake_imagenet):
    cfg = ch.preset("fig05_06_ensemble_diversity", "paper", verbose=False, eval_images=0)
    model = _MeanColour()
    logits = ch.chapter_logits(cfg, [model], "lines")
    data = ch.eval_set(cfg, "lines")
    assert logits.shape == (1, 3, 1000)
    expected = data.x.mean(dim=(1, 2, 3))[:, None] * torch.arange(1000.0)  # what the model computes
    assert torch.allclose(logits[0].float(), expected, rtol=1e-3, atol=1e-3)
    cached = list((fake_imagenet.parent / "cache").rglob("*"))
    assert any(p.is_file() for p in cached)  # the logits went to the cache, not only to memory


def test_paper_set_missing_folder_is_one_sentence(tmp_path, monkeypatch):
    monkeypatch.setenv("ENSDIV_DATA", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    cfg = ch.preset("fig05_06_ensemble_diversity", "paper", verbose=False, eval_images=2)
    with pytest.raises(Exception, match="ImageNetV2"):
        ch.eval_set(cfg, "v2")
