"""attack-similarity's ``paper`` path on tiny fakes: the ``imagenet/val-5k`` set built from a fake
ImageNet val folder, pretrained paper models that carry their input pipeline, and the chapter's SAT
run on pretrained models (one source at a time) checked against :func:`ensdiv.transfer.sat_matrix`."""

from __future__ import annotations

import numpy as np
import pytest
import timm
import torch
import torch.nn.functional as F
from PIL import Image

import ensdiv.transfer as transfer
from ensdiv.chapters import attack_similarity as ch
from ensdiv.chapters import preset
from ensdiv.chapters.zoo import EVAL_SET
from ensdiv.data.paper import tensors as pt
from ensdiv.data.paper.common import declare_class_subset
from ensdiv.data.paper.imagenet import imagenet_wnids
from ensdiv.data.registry import get_dataset, list_datasets
from ensdiv.errors import DataNotFoundError, EnsdivError
from ensdiv.models import InputSpec, forward_pixels, input_spec
from ensdiv.models import paper as mp
from ensdiv.predict import predict
from ensdiv.train import Recipe

WNIDS = imagenet_wnids()  # timm's 1000-class order
# class index -> number of images in the fake val folder (1, 5 and 7: fewer, exactly, more than 5)
COUNTS = {3: 7, 10: 1, 999: 5}
GREY = 10  # this class holds uniform grey (128) images


@pytest.fixture(autouse=True)
def _fresh_cache_one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: threads only add overhead (20x on a busy 2-core machine)
    pt._imagenet_val_subset.cache_clear()
    yield
    pt._imagenet_val_subset.cache_clear()
    torch.set_num_threads(threads)


def _fake_val(root) -> dict[int, list]:
    """root/imagenet/val/<wnid>/*.JPEG; returns class index -> the PIL images written."""
    rng = np.random.default_rng(0)
    written = {}
    for label, n in COUNTS.items():
        folder = root / "imagenet" / "val" / WNIDS[label]
        folder.mkdir(parents=True)
        written[label] = []
        for i in range(n):
            size = (40 + 3 * i, 30)  # landscape, various widths: the shorter side is resized to 256
            if label == GREY:
                im = Image.new("RGB", size, (128, 128, 128))
            else:
                im = Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))
            im.save(folder / f"ILSVRC2012_val_{label:04d}{i:04d}.JPEG", quality=95)
            with Image.open(folder / f"ILSVRC2012_val_{label:04d}{i:04d}.JPEG") as saved:
                written[label].append(saved.convert("RGB"))
    declare_class_subset(root / "imagenet" / "val", [WNIDS[c] for c in COUNTS])  # 3 of the 1000 classes
    return written


def _by_hand(im: Image.Image) -> torch.Tensor:
    """Shorter side to 256 (bilinear), centre crop 224, /255: the expected un-normalised tensor."""
    w, h = im.size
    nw, nh = (int(256 * w / h), 256) if w >= h else (256, int(256 * h / w))
    big = np.asarray(im.resize((nw, nh), Image.BILINEAR), dtype=np.float32) / 255
    top, left = int(round((nh - 224) / 2)), int(round((nw - 224) / 2))
    return torch.from_numpy(big[top : top + 224, left : left + 224]).permute(2, 0, 1)


@pytest.fixture
def fake_imagenet(tmp_path, monkeypatch):
    written = _fake_val(tmp_path)
    monkeypatch.setenv("ENSDIV_DATA", str(tmp_path))
    return written


def test_val5k_takes_min_5_per_class_unnormalised_with_1000_class_labels(fake_imagenet):
    ds = get_dataset("imagenet/val-5k")
    n = sum(min(5, c) for c in COUNTS.values())
    assert ds.x.shape == (n, 3, 224, 224) and ds.x.dtype == torch.float32
    assert ds.name == "imagenet/val-5k" and ds.classes == WNIDS and ds.num_classes == 1000
    assert {int(c): int((ds.y == c).sum()) for c in ds.y.unique()} == {k: min(5, v) for k, v in COUNTS.items()}
    assert float(ds.x.min()) >= 0 and float(ds.x.max()) <= 1
    grey = ds.x[ds.y == GREY]
    assert torch.allclose(grey, torch.full_like(grey, 128 / 255), atol=1.5 / 255)  # not mean/std-normalised
    for label, images in fake_imagenet.items():  # every image is one of its class's files, transformed
        expected = torch.stack([_by_hand(im) for im in images])
        got = ds.x[ds.y == label]
        dist = (got[:, None] - expected[None]).abs().flatten(2).amax(-1)  # (chosen, files)
        match = dist.argmin(1)
        assert bool((dist.min(1).values < 2.5 / 255).all()) and len(set(match.tolist())) == len(got)


def test_val5k_choice_is_seeded_and_reproducible(fake_imagenet):
    a = pt.load_imagenet_val_subset()
    pt._imagenet_val_subset.cache_clear()
    b = pt.load_imagenet_val_subset()
    assert pt.load_imagenet_val_subset() is b  # kept in memory: one JPEG pass per session
    c = pt.load_imagenet_val_subset(seed=1)
    assert a is not b and torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
    assert not torch.equal(a.x, c.x) and torch.equal(a.y, c.y)  # another draw from the 7-image class


def test_val5k_missing_data_raises_loader_sentence(tmp_path, monkeypatch):
    monkeypatch.setenv("ENSDIV_DATA", str(tmp_path / "nothing"))
    with pytest.raises(DataNotFoundError, match=r"ImageNet val was not found at .*val/<wnid>/\*\.JPEG.*image-net\.org"):
        get_dataset("imagenet/val-5k")


def test_val5k_listing_reads_no_data(tmp_path, monkeypatch):
    monkeypatch.setenv("ENSDIV_DATA", str(tmp_path / "nothing"))
    monkeypatch.setattr(pt, "_imagenet_val_subset", lambda *a: pytest.fail("listing read the data"))
    assert "imagenet/val-5k" in dict(list_datasets())
    assert EVAL_SET["paper"] == "imagenet/val-5k"


# ---- pretrained models carry their input pipeline -------------------------------------------------
def _weights(tmp_path, name: str, seed: int = 0, favour: list[int] | None = None) -> tuple[str, dict]:
    """A random model's weights in a file; ``favour``: classes whose logits get +30, so that it predicts
    one of them (a random 1000-class model would never be right on the fake set)."""
    torch.manual_seed(seed)
    m = timm.create_model(name, num_classes=1000)
    if favour:
        with torch.no_grad():
            m.get_classifier().bias[favour] += 30.0
    state = m.state_dict()
    path = tmp_path / f"{name}-{seed}.pth"
    torch.save(state, path)
    return str(path), state


def test_pretrained_model_gets_timm_input_spec_and_forward_pixels_normalises(tmp_path):
    file, state = _weights(tmp_path, "resnet10t")
    m = mp.create_paper_model("resnet10t", num_classes=1000, in_chans=3, img_size=224, pretrained=file).eval()
    assert all(torch.equal(m.state_dict()[k], v) for k, v in state.items())  # the file's weights
    dc = timm.data.resolve_data_config(model=m)
    assert input_spec(m) == InputSpec(size=dc["input_size"][-1], mean=tuple(dc["mean"]), std=tuple(dc["std"]))
    assert input_spec(m).mean == pytest.approx((0.485, 0.456, 0.406)) and m.ensdiv_weights == file
    x = torch.rand(2, 3, 224, 224)
    size = dc["input_size"][-1]
    mean, std = torch.tensor(dc["mean"]).view(1, 3, 1, 1), torch.tensor(dc["std"]).view(1, 3, 1, 1)
    by_hand = (F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False) - mean) / std
    with torch.no_grad():
        assert torch.allclose(forward_pixels(m, x), m(by_hand), atol=1e-5)
        wrapped = mp.PixelModel(m, "r10")
        assert torch.allclose(wrapped(x), m(by_hand), atol=1e-5)  # predict-able: forward takes pixels
    assert input_spec(wrapped) == InputSpec(size=size)  # attacks still run at the model's resolution


def test_without_pretrained_weights_no_input_spec_is_set():
    m = mp.create_paper_model("test_vit", num_classes=10, in_chans=3, img_size=160)
    assert not hasattr(m, "ensdiv_input") and input_spec(m) == InputSpec()


def test_missing_weights_file_raises_one_sentence(tmp_path):
    with pytest.raises(EnsdivError, match=r"Pretrained weights for 'test_vit' are not on this machine"):
        mp.create_paper_model("test_vit", num_classes=1000, in_chans=3, img_size=224,
                              pretrained=str(tmp_path / "missing.pth"))  # fmt: skip


def test_missing_weights_in_timm_cache_reach_chapter_recipes(monkeypatch):
    monkeypatch.setattr(mp, "_local_weights", lambda name: None)  # nothing in timm's cache
    cfg = preset("attack-similarity/fig02_similarity_vs_err", "paper", zoo=["resnet50"])
    with pytest.raises(EnsdivError, match=r"Pretrained weights for 'resnet50(\.\w+)?' are not on this machine; put"):
        ch.chapter_recipes(cfg)


# ---- the chapter's paper path end to end on two tiny pretrained-from-file models -------------------
def test_chapter_sat_paper_scale_on_pretrained_models_matches_sat_matrix(fake_imagenet, tmp_path, tmp_store,
                                                                         monkeypatch):
    files = {n: _weights(tmp_path, n, seed=k, favour=list(COUNTS))[0]
             for k, n in enumerate(["test_vit", "test_resnet"])}  # fmt: skip
    monkeypatch.setattr(mp, "_local_weights", files.get)  # stands in for timm's Hugging Face cache
    monkeypatch.setenv("ENSDIV_ALLOW_PATCHED", "1")  # its weights are in the keys (file name and size)
    cfg = preset("attack-similarity/fig02_similarity_vs_err", "paper", zoo=["test_vit", "test_resnet"],
                 subsample=8, steps=2)  # fmt: skip
    assert cfg.zoo and preset("attack-similarity/fig02_similarity_vs_err", "paper").zoo == ["sat69"]
    models = ch.chapter_recipes(cfg)
    assert [m.ensdiv_name for m in models] == ["test_vit", "test_resnet"]
    assert all(isinstance(m, mp.PixelModel) and not m.training for m in models)
    (base,) = ch.chapter_recipes(cfg, ["arch/resnet"])  # zoo keys stay (trainable) recipes
    assert isinstance(base, Recipe) and base.name == "resnet" and base.model.name == "resnet50"

    sat = ch.chapter_sat(cfg, models)
    ref = transfer.sat_matrix(models, ch.sat_eval_set(cfg), subsample=8, seed=0, names=["test_vit", "test_resnet"],
                          attack_kwargs={"eps": cfg.eps, "alpha": cfg.alpha, "steps": 2})  # fmt: skip
    assert sat.names == ref.names == ["test_vit", "test_resnet"]
    assert sat.fooled.shape == (2, 2, 8) and torch.equal(sat.fooled, ref.fooled)
    assert torch.equal(sat.correct, ref.correct)
    assert 0 < int(sat.correct.sum()) < sat.correct.numel() and 0 < int(sat.fooled.sum()) < sat.fooled.numel()
    assert torch.allclose(sat.scores, ref.scores, equal_nan=True)
    assert len(list((tmp_store.root / "sat-row").rglob("*.pt"))) == 2  # one cached row per source

    monkeypatch.setattr(transfer, "run_attack", lambda *a, **k: pytest.fail("re-attacked a cached source"))
    again = ch.chapter_sat(cfg, models)
    assert torch.equal(again.fooled, sat.fooled)

    ev = ch.chapter_eval_set(cfg)
    data = get_dataset(ev)
    with torch.no_grad():
        dev = next(models[0].parameters()).device  # CUDA when there is one
        by_hand = forward_pixels(models[0].model, data.x.to(dev)).cpu()
        assert torch.allclose(predict(models[0], ev), by_hand, atol=1e-4)


# ---- Fig. D.2 at paper scale: the measured matrix against the released one ---------------------------------
def test_figD2_paper_preset_measures_what_fig02_measures():
    d2 = preset("attack-similarity/figD2_similarity_matrix", "paper")
    fig02 = preset("attack-similarity/fig02_similarity_vs_err", "paper")
    keys = ("zoo", "attack", "eps", "alpha", "steps", "subsample", "eval_subset", "seed")
    assert d2.measured and {k: d2[k] for k in keys} == {k: fig02[k] for k in keys}  # same cached SAT rows
    assert not preset("attack-similarity/figD2_similarity_matrix", "cpu").measured


def test_measured_paper_matrix_compares_with_the_release(fake_imagenet, tmp_path, tmp_store, monkeypatch):
    arches = ["test_vit", "test_resnet", "test_convnext"]
    files = {n: _weights(tmp_path, n, seed=k, favour=list(COUNTS))[0] for k, n in enumerate(arches)}
    monkeypatch.setattr(mp, "_local_weights", files.get)
    cfg = preset("attack-similarity/figD2_similarity_matrix", "paper", zoo=arches, subsample=8, steps=2)
    as_released = ["resnet50", "vit_small_patch16_224", "convnext_tiny"]  # three of the release's names
    sat = ch.chapter_sat(cfg, ch.chapter_recipes(cfg), names=as_released)
    release, _ = ch.release.load_sat_release()
    out = ch.release.compare_with_release(sat.frame(), release=release)
    finite = int(np.isfinite(sat.scores.numpy()[np.triu_indices(3, 1)]).sum())
    assert (out["models"], out["models_not_measured"], out["pairs"], out["pairs_undefined"]) == (3, 66, finite,
                                                                                                 3 - finite)
    assert out["diagonal_released"] == pytest.approx(np.diag(release.loc[as_released, as_released]).mean())
    assert out["asymmetry_measured"] == pytest.approx(0.0, abs=1e-6)  # Eq. 1 is symmetric


def test_paper_logits_use_each_models_own_framing(fake_imagenet, tmp_path, tmp_store, monkeypatch):
    """Fig. 2 / Fig. 3's ensemble logits at paper scale: each model on the images framed its own way (the
    framing its SAT score was measured on), not the shared 224-px crop."""
    files = {n: _weights(tmp_path, n, seed=k, favour=list(COUNTS))[0]
             for k, n in enumerate(["test_vit", "test_resnet"])}  # fmt: skip
    monkeypatch.setattr(mp, "_local_weights", files.get)
    cfg = preset("attack-similarity/fig02_similarity_vs_err", "paper", zoo=["test_vit", "test_resnet"],
                 subsample=8, steps=2)  # fmt: skip
    models = ch.chapter_recipes(cfg)
    logits = ch.chapter_logits(cfg, models)
    sets = ch.sat_eval_set(cfg)
    with torch.no_grad():
        for k, m in enumerate(models):
            framed = sets.for_pipeline(m.ensdiv_pipeline)
            if cfg.eval_subset:
                framed = framed.subset(cfg.eval_subset, seed=cfg.seed)
            by_hand = forward_pixels(m.model, framed.x.to(next(m.parameters()).device)).cpu()
            assert torch.allclose(logits[k], by_hand, atol=1e-4)
    assert torch.equal(ch.chapter_labels(cfg), framed.y)


def test_fig05_cpu_teachers_give_each_family_a_computable_correlation():
    """Fig. 5's two halves are correlations over Transformer and over other teachers; the page computes one on 4
    teachers or more (#31 item 8: the cpu zoo's two Transformers left that half not testable)."""
    import ensdiv as ed

    cfg = ch.preset("fig05_distillation", "cpu", verbose=False)
    recipes = ch.chapter_recipes(cfg)
    student = ch.chapter_recipes(cfg, [cfg["student"]])[0]
    teachers = [r for r in recipes if r.model != student.model]
    families = [ed.model_info(t.model.name).family for t in teachers]
    transformers = sum(f in ("ViT", "Swin") for f in families)  # the page's split (MLP-Mixer is not one)
    assert transformers >= 4 and len(teachers) - transformers >= 4
    assert len({repr(t.key()) for t in teachers}) == len(teachers)  # no teacher twice
