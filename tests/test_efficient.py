"""BatchEnsemble, MIMO, Masksembles: values against per-member loops, shapes, bad input."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ensdiv.errors import EnsdivError
from ensdiv.models.efficient import (
    BatchEnsembleConv2d,
    BatchEnsembleLinear,
    BatchEnsembleResNet,
    MIMOResNet,
    masksembles_masks,
    member_index,
)


def test_member_index_hand_case():
    assert member_index(8, 4).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert member_index(3, 1).tolist() == [0, 0, 0]


def test_batchensemble_conv_matches_per_member_loop():
    torch.manual_seed(0)
    shared = nn.Conv2d(3, 5, 3, padding=1)
    layer = BatchEnsembleConv2d(shared, 2, seed=1)
    with torch.no_grad():
        layer.bias.normal_()
    x = torch.randn(4, 3, 6, 6)  # member-major: rows 0-1 member 0, rows 2-3 member 1
    out = layer(x)
    for i in range(4):
        m = i // 2
        ref = F.conv2d(x[i:i + 1] * layer.r[m].view(1, 3, 1, 1), shared.weight, padding=1)
        ref = ref * layer.s[m].view(1, 5, 1, 1) + layer.bias[m].view(1, 5, 1, 1)
        torch.testing.assert_close(out[i:i + 1], ref, atol=1e-5, rtol=1e-5)
    assert set(layer.r.unique().tolist()) <= {-1.0, 1.0}


@pytest.mark.parametrize("n", [6, 7])  # 7 rows do not split evenly over 3 members: the gather path
def test_batchensemble_conv_values_and_grads_match_a_row_loop(n):
    torch.manual_seed(0)
    layer = BatchEnsembleConv2d(nn.Conv2d(2, 3, 3, padding=1), 3, seed=2)
    with torch.no_grad():
        layer.bias.normal_()
    x = torch.randn(n, 2, 5, 5)
    layer(x).square().sum().backward()
    got = layer.r.grad.clone()
    layer.zero_grad()
    members = (torch.arange(n) * 3) // n
    total = 0.0
    for i in range(n):
        k = int(members[i])
        y = F.conv2d(x[i:i + 1] * layer.r[k].view(1, 2, 1, 1), layer.conv.weight, padding=1)
        total = total + (y * layer.s[k].view(1, 3, 1, 1) + layer.bias[k].view(1, 3, 1, 1)).square().sum()
    total.backward()
    torch.testing.assert_close(got, layer.r.grad, atol=1e-4, rtol=1e-4)


def test_batchensemble_linear_matches_numpy():
    torch.manual_seed(0)
    layer = BatchEnsembleLinear(4, 3, 2, seed=0)
    x = torch.randn(4, 4)
    out = layer(x).detach().numpy()
    w, r, s, b = (t.detach().numpy() for t in (layer.linear.weight, layer.r, layer.s, layer.bias))
    for i in range(4):
        m = i // 2
        expected = ((x[i].numpy() * r[m]) @ w.T) * s[m] + b[m]
        assert abs(out[i] - expected).max() < 1e-5


def test_batchensemble_resnet_shares_weights_and_returns_members():
    net = BatchEnsembleResNet("test", num_estimators=3, in_chans=1, img_size=28).eval()
    out = net(torch.randn(2, 1, 28, 28))
    assert out.shape == (3, 2, 10)
    assert not torch.allclose(out[0], out[1])  # different fast weights
    single_params = sum(p.numel() for p in BatchEnsembleResNet("test", num_estimators=1, in_chans=1,
                                                               img_size=28).parameters())
    extra = sum(p.numel() for p in net.parameters()) - single_params
    fast = sum(m.r.numel() + m.s.numel() + m.bias.numel() for m in net.modules() if hasattr(m, "r"))
    assert extra == fast * 2 // 3  # M=3 vs M=1: two more members' rank-1 vectors and biases


def test_mimo_rho_one_equals_member_mean_cross_entropy():
    torch.manual_seed(0)
    net = MIMOResNet("test", num_estimators=2, rho=1.0, in_chans=1, img_size=28)
    x, y = torch.randn(6, 1, 28, 28), torch.randint(0, 10, (6,))
    # rho=1: every member sees the same shuffle; the batch mean (and BN statistics) do not depend on order.
    loss = net.training_loss(x, y)
    logits = net(x)
    expected = (F.cross_entropy(logits[0], y) + F.cross_entropy(logits[1], y)) / 2
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-5)
    assert logits.shape == (2, 6, 10)


def test_mimo_independent_shuffles_differ():
    net = MIMOResNet("test", num_estimators=2, rho=0.0, in_chans=1, img_size=28)
    x, y = torch.randn(16, 1, 28, 28), torch.randint(0, 10, (16,))
    loss = net.training_loss(x, y)
    assert torch.isfinite(loss)
    loss.backward()
    assert net.backbone.conv1.weight.grad is not None


def test_masksembles_masks_hand_properties():
    masks = masksembles_masks(10, 4, scale=2.0, seed=0)
    assert masks.shape == (4, 10)
    assert (masks.sum(1) >= 5).all()  # round(10 / 2) kept per mask
    assert (masks.sum(0) >= 1).all()  # every channel used by some member
    assert torch.equal(masksembles_masks(6, 3, scale=1.0), torch.ones(3, 6))


# Masksembles' mask placement and training batch: tests/test_efficient_fidelity.py


def test_bad_inputs():
    with pytest.raises(EnsdivError, match="num_estimators"):
        BatchEnsembleResNet("test", num_estimators=0)
    with pytest.raises(EnsdivError, match="rho"):
        MIMOResNet("test", rho=1.5)
    with pytest.raises(EnsdivError, match="scale must be >= 1"):
        masksembles_masks(8, 2, scale=0.5)


def test_mimo_stem_equals_full_conv_on_stacked_input():
    from ensdiv.models.efficient import _MIMOStem

    torch.manual_seed(0)
    conv = nn.Conv2d(3 * 2, 4, 3, padding=1, bias=False)
    stem = _MIMOStem(conv, 2)
    x = torch.randn(2, 6, 5, 5)
    torch.testing.assert_close(stem(x), conv(x), atol=1e-5, rtol=1e-5)
    assert stem.weight.shape[1] == 3


# --- the chapter pipeline (ensdiv.chapters.packed_ensembles) ------------------------------------------


def test_ood_scores_match_numpy():
    import numpy as np

    from ensdiv.chapters.packed_ensembles import ood_scores

    logits = torch.tensor([[[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [[0.0, 2.0, 0.0], [1.0, 0.0, 0.0]]])
    p = np.exp(logits.numpy()) / np.exp(logits.numpy()).sum(-1, keepdims=True)
    mean = p.mean(0)
    ent = -(mean * np.log(mean)).sum(-1)
    exp_ent = -(p * np.log(p)).sum(-1).mean(0)
    np.testing.assert_allclose(ood_scores(logits, "msp").numpy(), -mean.max(-1), rtol=1e-5)
    max_logit = -logits.numpy().mean(0).max(-1)
    np.testing.assert_allclose(ood_scores(logits, "max_logit").numpy(), max_logit, rtol=1e-5)
    np.testing.assert_allclose(ood_scores(logits, "entropy").numpy(), ent, rtol=1e-5)
    np.testing.assert_allclose(ood_scores(logits, "mi").numpy(), ent - exp_ent, rtol=1e-4, atol=1e-6)
    assert torch.equal(ood_scores(logits[:1], "mi"), torch.zeros(2))
    from ensdiv.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="OOD criterion"):
        ood_scores(logits, "energy")


def test_evaluate_hand_case():
    import math

    from ensdiv.chapters.packed_ensembles import evaluate

    # one member, two samples: probabilities (0.5, 0.5) and (~1, ~0) for labels 0 and 0
    logits = torch.tensor([[[0.0, 0.0], [20.0, 0.0]]])
    out = evaluate(logits, torch.tensor([0, 0]))
    assert out["acc"] == 100.0  # argmax ties resolve to class 0
    assert abs(out["nll"] - (math.log(2) + 0.0) / 2) < 1e-6


def test_method_recipes_share_member_zero_with_single():
    from ensdiv.chapters.packed_ensembles import method_recipes
    from ensdiv.train import Recipe

    base = Recipe.make(model="test_single", epochs=1)
    single = method_recipes("single", base, arch="test", seed=1, num_estimators=3)
    de = method_recipes("deep_ensemble", base, arch="test", seed=1, num_estimators=3)
    assert [(r.seeds.init, r.seeds.order) for r in de] == [(3, 3), (4, 4), (5, 5)]
    assert single[0].key() == de[0].key()
    pe = method_recipes("packed", base, arch="small", seed=0, alpha=3, gamma=1)
    assert pe[0].model.name == "packed_small" and pe[0].model.kwargs["alpha"] == 3
    from ensdiv.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="method"):
        method_recipes("dropout", base, arch="test")


def test_eval_sets_of_the_chapter_are_registered(tmp_path, monkeypatch):
    from ensdiv.chapters.packed_ensembles import eval_set, preset
    from ensdiv.errors import DataNotFoundError, UnknownNameError

    cfg = preset("tab01_efficient_ensembles", "smoke", verbose=False)
    assert len(eval_set(cfg)) == cfg["test_subset"]  # "test": the preset's test set and subset
    digits = eval_set(cfg, "digits", n=50)
    assert digits.x.shape == (50, 1, 28, 28) and bool((digits.y == -1).all())
    tex = eval_set(cfg, "textures/frost", n=10)
    assert tex.x.shape == (10, 1, 28, 28) and float(tex.x.min()) >= 0 and float(tex.x.max()) <= 1
    with pytest.raises(UnknownNameError, match="textures/frost"):  # a misspelt name suggests the real one
        eval_set(cfg, "texture/frost")
    # the bare name is Table 2's paper-scale Textures (DTD), read from its folder: missing here, one sentence
    monkeypatch.setenv("ENSDIV_DATA", str(tmp_path))
    with pytest.raises(DataNotFoundError, match=r"Textures \(DTD\) was not found"):
        eval_set(cfg, "textures")


@pytest.mark.parametrize(
    "stem",
    ["tab01_efficient_ensembles", "tab02_imagenet_ood_shift", "fig06_07_alpha_gamma", "appE_ood_criteria",
     "appF_sources_of_diversity"],
)
def test_paper_presets_build_the_papers_recipes(stem):
    from ensdiv.chapters import packed_ensembles as ch

    cfg = ch.preset(stem, "paper", verbose=False)
    for method in ch.METHODS:
        recipes = ch.recipes_for(method, cfg, cfg.seeds[0])
        assert len(recipes) == (cfg.num_estimators if method == "deep_ensemble" else 1)
        assert recipes[0].model.name.endswith(cfg.arch) and recipes[0].data.dataset == cfg.dataset
    pe = ch.recipes_for("packed", cfg, 0)[0]
    assert (pe.model.kwargs["alpha"], pe.model.kwargs["gamma"]) == (cfg.alpha, cfg.gamma)


def test_build_for_reads_the_shape_of_the_data():
    import ensdiv as ed
    from ensdiv.chapters import packed_ensembles as ch

    cfg = ch.preset("tab01_efficient_ensembles", "smoke", verbose=False)
    data = ed.TensorSet(torch.rand(4, 3, 32, 32), torch.tensor([0, 1, 2, 4]), "fake", classes=list("abcde"))
    for method in ("single", "packed", "deep_ensemble"):
        out = ch.build_for(method, cfg, data).eval()(data.x)
        assert out.shape[-1] == 5 and out.shape[-2] == 4, method
