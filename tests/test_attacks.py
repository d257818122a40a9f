"""Tests of ensdiv.attacks: hand-computed steps on linear models, success on a trained model, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from ensdiv.attacks import mi_fgsm, pgd, run_attack
from ensdiv.errors import EnsdivError, UnknownNameError
from ensdiv.models import InputSpec, forward_pixels, input_spec


def _linear(seed: int = 0, c: int = 3, side: int = 4) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(side * side, c))


def _naive_grad(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """d CE / dx of a linear model by hand: W^T (softmax(Wx + b) - onehot(y))."""
    w = model[1].weight.detach().numpy().astype(np.float64)
    b = model[1].bias.detach().numpy().astype(np.float64)
    flat = x.flatten(1).numpy().astype(np.float64)
    z = flat @ w.T + b
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[np.arange(len(y)), y.numpy()] -= 1
    return (p @ w).reshape(x.shape)


def test_one_pgd_step_matches_hand_computation():
    model = _linear()
    x = torch.rand(5, 1, 4, 4) * 0.8 + 0.1
    y = torch.tensor([0, 1, 2, 0, 1])
    adv = pgd(model, x, y, eps=0.05, alpha=0.02, steps=1, random_start=False)
    expected = np.clip(x.numpy() + 0.02 * np.sign(_naive_grad(model, x, y)), 0, 1)
    assert np.allclose(adv.numpy(), expected, atol=1e-6)
    # two steps: the second one is projected onto the eps ball
    adv2 = pgd(model, x, y, eps=0.03, alpha=0.02, steps=2, random_start=False)
    step1 = np.clip(x.numpy() + 0.02 * np.sign(_naive_grad(model, x, y)), 0, 1)
    step2 = step1 + 0.02 * np.sign(_naive_grad(model, torch.tensor(step1, dtype=torch.float32), y))
    step2 = np.clip(np.clip(step2 - x.numpy(), -0.03, 0.03) + x.numpy(), 0, 1)
    assert np.allclose(adv2.numpy(), step2, atol=1e-6)


def test_fgsm_and_l2_steps_match_hand_computation():
    model = _linear(1)
    x = torch.rand(4, 1, 4, 4) * 0.5 + 0.25
    y = torch.tensor([2, 1, 0, 2])
    g = _naive_grad(model, x, y)
    fgsm = mi_fgsm(model, x, y, eps=0.04, steps=1)
    assert np.allclose(fgsm.numpy(), np.clip(x.numpy() + 0.04 * np.sign(g), 0, 1), atol=1e-6)
    l2 = pgd(model, x, y, eps=0.1, alpha=0.05, steps=1, norm="l2", random_start=False)
    unit = g / np.linalg.norm(g.reshape(4, -1), axis=1).reshape(4, 1, 1, 1)
    assert np.allclose(l2.numpy(), x.numpy() + 0.05 * unit, atol=1e-6)


def test_perturbation_stays_in_ball_and_pixel_range():
    model = _linear(2)
    x = torch.rand(16, 1, 4, 4)
    y = torch.randint(0, 3, (16,))
    for norm, eps in [("linf", 0.1), ("l2", 0.5)]:
        adv = pgd(model, x, y, eps=eps, alpha=eps / 3, steps=7, norm=norm, seed=3)
        d = (adv - x).flatten(1)
        size = d.abs().max(1).values if norm == "linf" else d.norm(dim=1)
        assert float(size.max()) <= eps + 1e-5
        assert float(adv.min()) >= 0 and float(adv.max()) <= 1
    assert torch.equal(pgd(model, x, y, eps=0.0, steps=5), x)
    # seeded: same seed, same images
    assert torch.equal(pgd(model, x, y, eps=0.1, steps=3, seed=5), pgd(model, x, y, eps=0.1, steps=3, seed=5))


@pytest.fixture(scope="module")
def trained():
    from ensdiv.data import load_fashion_mnist

    data = load_fashion_mnist("test")
    g = torch.Generator().manual_seed(0)
    idx = torch.randperm(len(data), generator=g)
    xtr, ytr = data.x[idx[:3000]], data.y[idx[:3000]]
    xte, yte = data.x[idx[3000:3200]], data.y[idx[3000:3200]]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(4):
        for i in range(0, 3000, 100):
            opt.zero_grad()
            F.cross_entropy(model(xtr[i : i + 100]), ytr[i : i + 100]).backward()
            opt.step()
    return model.eval(), xte, yte


def test_pgd_drives_own_accuracy_to_zero(trained):
    model, x, y = trained
    with torch.no_grad():
        ok = model(x).argmax(1) == y
    assert ok.float().mean() > 0.6
    adv = pgd(model, x[ok], y[ok], eps=0.2, alpha=0.04, steps=20, seed=0)  # MLPs on FMNIST need ~0.2
    with torch.no_grad():
        acc = (model(adv).argmax(1) == y[ok]).float().mean()
    assert acc < 0.05


def test_larger_eps_never_lowers_success(trained):
    model, x, y = trained
    rates = []
    for eps in [0.0, 0.01, 0.02, 0.05, 0.1]:
        adv = pgd(model, x, y, eps=eps, alpha=max(eps / 4, 1e-4), steps=10, random_start=False)
        with torch.no_grad():
            rates.append(float((model(adv).argmax(1) != y).float().mean()))
    assert all(b >= a for a, b in zip(rates[:-1], rates[1:], strict=True)), rates
    assert rates[-1] > rates[0] + 0.5


def test_input_spec_resize_and_normalisation():
    model = _linear(side=8)
    model.ensdiv_input = {"size": 8, "mean": (0.5,), "std": (0.25,)}
    spec = input_spec(model)
    assert spec == InputSpec(8, (0.5,), (0.25,))
    x = torch.rand(3, 1, 4, 4)
    manual = model((F.interpolate(x, size=(8, 8), mode="bilinear", align_corners=False) - 0.5) / 0.25)
    assert torch.allclose(forward_pixels(model, x), manual, atol=1e-6)
    adv = pgd(model, x, torch.tensor([0, 1, 2]), eps=0.05, steps=2)
    assert adv.shape == (3, 1, 8, 8)  # attacked at the source model's own resolution
    assert input_spec(_linear()) == InputSpec()


def test_bad_input_one_sentence():
    model = _linear()
    x, y = torch.rand(2, 1, 4, 4), torch.tensor([0, 1])
    with pytest.raises(EnsdivError, match=r"\[0, 1\] pixel space"):
        pgd(model, x * 3, y)
    with pytest.raises(EnsdivError, match="one label per image"):
        pgd(model, x, torch.tensor([0]))
    with pytest.raises(EnsdivError, match="shaped"):
        pgd(model, x[0], y)
    with pytest.raises(UnknownNameError, match="norm"):
        pgd(model, x, y, norm="l7")
    with pytest.raises(UnknownNameError, match="attack"):
        run_attack("cw", model, x, y)


def test_pretrained_timm_model_uses_its_own_input_pipeline():
    import timm

    model = timm.create_model("resnet18", pretrained=False, num_classes=3)
    assert input_spec(model) == InputSpec()  # trained by ensdiv on raw pixels: identity
    model.ensdiv_pretrained = True  # weights trained on normalised ImageNet inputs
    spec = input_spec(model)
    cfg = model.pretrained_cfg
    assert spec.size == cfg["input_size"][-1]
    assert spec.mean == tuple(cfg["mean"]) and spec.std == tuple(cfg["std"])


# ---- APGD-CE ---------------------------------------------------------------------------------------
def test_apgd_checkpoints_match_the_papers_schedule():
    from ensdiv.attacks import apgd_checkpoints

    # p = 0.22, 0.41, 0.57, 0.70, 0.80, 0.87, 0.93, 0.99 (then 1.05 > 1), times 100 steps
    assert apgd_checkpoints(100) == [22, 41, 57, 70, 80, 87, 93, 99]
    assert apgd_checkpoints(10) == [3, 5, 6, 7, 8, 9, 10]  # ⌈2.2⌉, ⌈4.1⌉, ...; 9.3 and 9.9 both give 10


def test_apgd_stays_in_ball_and_never_ends_below_its_start(trained):
    from ensdiv.attacks import apgd

    model, x, y = trained
    eps = 0.05
    adv = apgd(model, x, y, eps=eps, steps=12, seed=1)
    assert float((adv - x).abs().max()) <= eps + 1e-6
    assert float(adv.min()) >= 0 and float(adv.max()) <= 1
    # the returned point is the best of the path, so its loss is >= the loss at the (seeded) start
    start = (x + (torch.rand(x.shape, generator=torch.Generator().manual_seed(1)) * 2 - 1) * eps).clamp(0, 1)
    with torch.no_grad():
        l_start = F.cross_entropy(model(start), y, reduction="none")
        l_adv = F.cross_entropy(model(adv), y, reduction="none")
    assert bool((l_adv >= l_start - 1e-5).all())
    assert torch.equal(apgd(model, x, y, eps=0.0, steps=3), x)


def test_apgd_drives_own_accuracy_to_zero_without_a_step_size(trained):
    from ensdiv.attacks import apgd

    model, x, y = trained
    with torch.no_grad():
        ok = model(x).argmax(1) == y
    adv = run_attack("apgd", model, x[ok], y[ok], eps=0.2, steps=20, seed=0)
    with torch.no_grad():
        assert float((model(adv).argmax(1) == y[ok]).float().mean()) < 0.05
    with pytest.raises(EnsdivError, match="non-negative"):
        apgd(model, x, y, eps=-0.1)


# ---- against torchattacks (a maintained library we did not write) ------------------------------------
def _tiny_cnn(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, 5)).eval()


def test_pgd_matches_torchattacks_pgd_without_random_start():
    torchattacks = pytest.importorskip("torchattacks")
    model = _tiny_cnn()
    x = torch.rand(12, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    y = torch.randint(0, 5, (12,), generator=torch.Generator().manual_seed(1))
    for eps, alpha, steps in [(8 / 255, 2 / 255, 10), (0.1, 0.03, 5)]:
        ours = pgd(model, x, y, eps=eps, alpha=alpha, steps=steps, random_start=False)
        theirs = torchattacks.PGD(model, eps=eps, alpha=alpha, steps=steps, random_start=False)(x, y)
        assert torch.allclose(ours, theirs, atol=1e-6), float((ours - theirs).abs().max())


def test_pgd_with_an_input_pipeline_matches_torchattacks_on_the_wrapped_model():
    torchattacks = pytest.importorskip("torchattacks")
    model = _tiny_cnn(1)
    model.ensdiv_input = {"size": 8, "mean": (0.4,), "std": (0.2,)}
    x = torch.rand(6, 1, 8, 8, generator=torch.Generator().manual_seed(2))
    y = torch.arange(6) % 5

    class Normalised(nn.Module):  # the normalisation written by hand, as part of the model torchattacks sees
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, z):
            return self.inner((z - 0.4) / 0.2)

    wrapped = Normalised().eval()
    ours = pgd(model, x, y, eps=0.05, alpha=0.01, steps=6, random_start=False)
    theirs = torchattacks.PGD(wrapped, eps=0.05, alpha=0.01, steps=6, random_start=False)(x, y)
    assert torch.allclose(ours, theirs, atol=1e-6)


@pytest.mark.slow
def test_torchattacks_apgd_ce_and_autoattack_through_run_attack(trained):
    pytest.importorskip("torchattacks")
    model, x, y = trained
    with torch.no_grad():
        ok = model(x).argmax(1) == y
    xs, ys = x[ok][:60], y[ok][:60]
    for name, kw in [("apgd_ce", {"steps": 20}), ("autoattack", {"version": "standard"})]:
        adv = run_attack(name, model, xs, ys, eps=0.2, seed=0, **kw)
        assert adv.shape == xs.shape
        assert float((adv - xs).abs().max()) <= 0.2 + 1e-5 and float(adv.min()) >= 0 and float(adv.max()) <= 1
        with torch.no_grad():
            assert float((model(adv).argmax(1) == ys).float().mean()) < 0.05, name
    with pytest.raises(UnknownNameError, match="AutoAttack version"):
        run_attack("autoattack", model, xs, ys, version="fast")
