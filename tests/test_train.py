"""Training engine: determinism, resume after interruption, training_loss hook, optimizers, schedules."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn

from ensdiv.data.registry import TensorSet
from ensdiv.errors import EnsdivError
from ensdiv.models import create_model
from ensdiv.recipes import Recipe
from ensdiv.store import Store
from ensdiv.train import fit, lr_factor, train_recipe


def _toy(n: int = 96, seed: int = 0) -> TensorSet:
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 3
    x = torch.rand(n, 1, 8, 8, generator=g) * 0.2
    for c in range(3):  # class c lights up row block c: learnable in a few steps
        x[y == c, :, c * 2 : c * 2 + 2, :] += 0.8
    return TensorSet(x, y, "toy", ["a", "b", "c"])


def _weights(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.state_dict().values() if p.is_floating_point()])


def _train(seed: int, **kw) -> nn.Module:
    torch.manual_seed(123)
    model = create_model("test_cnn", num_classes=3, img_size=8)
    return fit(model, _toy(), epochs=2, lr=0.1, seed=seed, batch_size=16, progress=False, **kw)


def test_same_seed_same_weights_and_different_seed_differs():
    a, b, c = _train(0), _train(0), _train(1)
    assert torch.equal(_weights(a), _weights(b))
    assert not torch.equal(_weights(a), _weights(c))


@pytest.mark.parametrize("augment", ["flipcrop", "mixup", "cutmix+erasing"])
def test_augmentations_are_seeded(augment):
    assert torch.equal(_weights(_train(0, augment=augment)), _weights(_train(0, augment=augment)))


@pytest.mark.parametrize("opt", ["sgd", "adamw", "rmsprop", "adabelief"])
def test_every_optimizer_learns_the_toy_task(opt):
    torch.manual_seed(0)
    model = create_model("test_mlp", num_classes=3, img_size=8)
    lr = 0.1 if opt == "sgd" else 0.01
    fit(model, _toy(), epochs=15, lr=lr, seed=0, batch_size=16, optimizer=opt, progress=False)
    acc = (model(_toy().x).argmax(1) == _toy().y).float().mean()
    assert acc > 0.9


def test_lr_factor_matches_hand_values():
    assert lr_factor(0.0, schedule="cosine") == pytest.approx(1.0)
    assert lr_factor(0.5, schedule="cosine") == pytest.approx(0.5)
    assert lr_factor(1.0, schedule="cosine") == pytest.approx(0.0)
    assert lr_factor(0.25, schedule="cosine", warmup=0.5) == pytest.approx(0.5)
    assert lr_factor(0.75, schedule="cosine", warmup=0.5) == pytest.approx(0.5 * (1 + math.cos(math.pi / 2)))
    assert [lr_factor(t, schedule="step") for t in (0.1, 0.6, 0.8)] == pytest.approx([1, 0.1, 0.01])
    assert lr_factor(0.9, schedule="constant") == 1.0


class _CountingLoss(nn.Module):
    """A model with its own training loss (like Packed-Ensembles / BatchEnsemble)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, 3))
        self.calls = 0

    def forward(self, x):
        return self.net(x)

    def training_loss(self, x, y):
        self.calls += 1
        return nn.functional.cross_entropy(self.net(x), y) * 0.5


def test_training_loss_hook_is_called():
    m = _CountingLoss()
    fit(m, _toy(), epochs=1, lr=0.1, batch_size=16, progress=False)
    assert m.calls == len(_toy()) // 16


def _recipe(**kw) -> Recipe:
    base = dict(model="test_cnn", dataset="fmnist/train", epochs=3, batch_size=64, lr=0.05, train_subset=256)
    return Recipe(**{**base, **kw})


def test_train_recipe_caches(tmp_path):
    st = Store(tmp_path)
    r = _recipe(epochs=1)
    m1 = train_recipe(r, store=st, progress=False)
    assert len(st.entries("model")) == 1 and not st.entries("checkpoint")
    m2 = train_recipe(r, store=st, progress=False)
    assert torch.equal(_weights(m1), _weights(m2))
    assert m2.ensdiv_meta["num_params"] == sum(p.numel() for p in m1.parameters())


def test_resume_after_interruption_gives_same_weights(tmp_path):
    r = _recipe()
    full = train_recipe(r, store=Store(tmp_path / "a"), progress=False)
    st = Store(tmp_path / "b")
    train_recipe(r, store=st, progress=False, stop_after=1)  # "interrupted" after epoch 1
    assert len(st.entries("checkpoint")) == 1 and not st.entries("model")
    resumed = train_recipe(r, store=st, progress=False)
    assert torch.equal(_weights(full), _weights(resumed))
    assert not st.entries("checkpoint")


def test_train_recipe_rejects_non_recipe():
    with pytest.raises(EnsdivError, match="needs an ed.Recipe"):
        train_recipe({"model": "test_cnn"})


def test_model_data_mismatch_is_one_sentence():
    with pytest.raises(EnsdivError, match="outputs 10 classes.*num_classes=12"):
        data = _toy()
        data.y[0] = 11
        fit(create_model("test_cnn", img_size=8), data, epochs=1, lr=0.1, progress=False)
    with pytest.raises(EnsdivError, match="3-channel images.*in_chans=1"):
        fit(
            create_model("test_cnn", in_chans=3, num_classes=3, img_size=8),
            _toy(),
            epochs=1,
            lr=0.1,
            progress=False,
        )
    with pytest.raises(EnsdivError, match="cannot take"):
        fit(create_model("test_mlp", num_classes=3, img_size=28), _toy(), epochs=1, lr=0.1, progress=False)


def test_paper_scale_recipe_trains_a_timm_model(tmp_path):
    # timm's own tiny `test_resnet` stands in for resnet50: the paper path end to end, in seconds
    r = _recipe(model="test_resnet", scale="paper", epochs=1, train_subset=64, batch_size=32)
    m = train_recipe(r, store=Store(tmp_path), progress=False)
    assert type(m).__name__ == "ResNet" and m.ensdiv_meta["train_size"] == 64


def test_nt_xent_matches_a_loop():
    from ensdiv.frameworks import nt_xent

    g = torch.Generator().manual_seed(0)
    z1, z2 = torch.randn(5, 4, generator=g), torch.randn(5, 4, generator=g)
    z = torch.nn.functional.normalize(torch.cat([z1, z2]), dim=1)
    total = 0.0
    for i in range(10):
        j = (i + 5) % 10
        denom = sum(math.exp(float(z[i] @ z[k]) / 0.5) for k in range(10) if k != i)
        total += -math.log(math.exp(float(z[i] @ z[j]) / 0.5) / denom)
    assert nt_xent(z1, z2, 0.5).item() == pytest.approx(total / 10, rel=1e-5)


def test_probe_standardisation_is_folded_into_the_classifier():
    from ensdiv.frameworks import set_classifier

    torch.manual_seed(0)
    m = create_model("test_cnn", num_classes=3, img_size=8).eval()
    x = _toy().x
    f = m.forward_head(m.forward_features(x), pre_logits=True)
    mean, std = f.mean(0), f.std(0) + 1e-6
    lin = nn.Linear(f.shape[1], 4)
    expected = lin((f - mean) / std)
    w = lin.weight.detach() / std
    set_classifier(m, w, lin.bias.detach() - w @ mean)
    assert torch.allclose(m(x), expected, atol=1e-5)


def test_distillation_loss_by_hand():
    from ensdiv.frameworks import distillation_loss

    teacher = nn.Linear(4, 3)
    student = nn.Linear(4, 3)
    x, y = torch.randn(6, 4), torch.tensor([0, 1, 2, 0, 1, 2])
    t, s = teacher(x).detach(), student(x)
    r = Recipe(framework="distill", teacher=Recipe(), distill_alpha=0.7, distill_temperature=2.0)
    p_t = torch.softmax(t / 2, -1)
    kl = (p_t * (p_t.log() - torch.log_softmax(s / 2, -1))).sum(-1).mean() * 4
    soft = 0.3 * nn.functional.cross_entropy(s, y) + 0.7 * kl
    assert distillation_loss(teacher, r)(student, x, y).item() == pytest.approx(soft.item(), rel=1e-5)
    hard = 0.3 * nn.functional.cross_entropy(s, y) + 0.7 * nn.functional.cross_entropy(s, t.argmax(-1))
    got = distillation_loss(teacher, r.replace(distill="hard"))(student, x, y)
    assert got.item() == pytest.approx(hard.item(), rel=1e-5)
