"""Training engine: determinism, resume after interruption, training_loss hook, optimizers, schedules."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn

import ensdiv as ed
from ensdiv import losses
from ensdiv.data import TensorSet
from ensdiv.errors import EnsdivError
from ensdiv.models import create_model
from ensdiv.store import Store
from ensdiv.train import Distill, Heads, Joint, Optim, Recipe, fit, lr_factor, set_classifier, train_recipe
from ensdiv.train.frameworks import distillation_loss


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
    return fit(model, _toy(), Optim(epochs=2, lr=0.1, batch_size=16), seed=seed, progress=False, **kw)


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
    fit(model, _toy(), Optim(epochs=15, lr=lr, batch_size=16, optimizer=opt), seed=0, progress=False)
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
    fit(m, _toy(), Optim(epochs=1, lr=0.1, batch_size=16), progress=False)
    assert m.calls == len(_toy()) // 16


def _recipe(**kw) -> Recipe:
    base = dict(model="test_cnn", dataset="fmnist/train", epochs=3, batch_size=64, lr=0.05, train_subset=256)
    return Recipe.make(**{**base, **kw})


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
        fit(create_model("test_cnn", img_size=8), data, Optim(epochs=1, lr=0.1), progress=False)
    with pytest.raises(EnsdivError, match="3-channel images.*in_chans=1"):
        fit(create_model("test_cnn", in_chans=3, num_classes=3, img_size=8), _toy(), Optim(epochs=1, lr=0.1),
            progress=False)
    with pytest.raises(EnsdivError, match="cannot take"):
        fit(create_model("test_mlp", num_classes=3, img_size=28), _toy(), Optim(epochs=1, lr=0.1), progress=False)


def test_a_timm_name_trains_a_timm_model(tmp_path):
    # timm's small `resnet10t` stands in for resnet50: a timm name is the paper path, end to end, in seconds
    r = _recipe(model="resnet10t", epochs=1, train_subset=64, batch_size=32)
    m = train_recipe(r, store=Store(tmp_path), progress=False)
    assert type(m).__name__ == "ResNet" and m.ensdiv_meta["train_size"] == 64


def test_probe_standardisation_is_folded_into_the_classifier():
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
    teacher = nn.Linear(4, 3)
    student = nn.Linear(4, 3)
    x, y = torch.randn(6, 4), torch.tensor([0, 1, 2, 0, 1, 2])
    t, s = teacher(x).detach(), student(x)
    r = Recipe.make().replace(method=Distill(teacher=Recipe.make(), alpha=0.7, temperature=2.0))
    p_t = torch.softmax(t / 2, -1)
    kl = (p_t * (p_t.log() - torch.log_softmax(s / 2, -1))).sum(-1).mean() * 4
    soft = 0.3 * nn.functional.cross_entropy(s, y) + 0.7 * kl
    assert distillation_loss(teacher, r)(student, x, y).item() == pytest.approx(soft.item(), rel=1e-5)
    hard = 0.3 * nn.functional.cross_entropy(s, y) + 0.7 * nn.functional.cross_entropy(s, t.argmax(-1))
    got = distillation_loss(teacher, r.replace(method=r.method.replace(mode="hard")))(student, x, y)
    assert got.item() == pytest.approx(hard.item(), rel=1e-5)


def test_jointly_trained_ensemble_returns_members_and_is_cached(tmp_path):
    st = Store(tmp_path)
    r = _recipe(epochs=1).replace(method=Joint(members=3, loss="independent"))
    model = train_recipe(r, store=st, progress=False)
    assert isinstance(model, ed.MemberStack) and model.num_estimators == 3
    x = ed.get_dataset("fmnist/test").x[:5]
    out = model(x)
    assert out.shape == (3, 5, 10)
    assert not torch.equal(out[0], out[1])  # members initialised with different seeds
    again = train_recipe(r, store=st, progress=False)
    assert torch.equal(again(x), out)


def test_joint_members_start_from_init_seeds_init_plus_m(tmp_path):
    r = _recipe(epochs=1, seed=4).replace(method=Joint(members=2))
    from ensdiv.train import build_model

    shape = {"num_classes": 10, "in_chans": 1, "img_size": 28}
    stack = ed.train.frameworks.build_joint(r, build_model, **shape)
    single = build_model(r.replace(init_seed=5), **shape)
    assert torch.equal(_weights(stack.members[1]), _weights(single))


def test_heads_start_from_the_backbone_head_and_only_heads_train(tmp_path):
    st = Store(tmp_path)
    backbone = _recipe(epochs=1, model="test_resnet")
    r = backbone.replace(method=Heads(backbone=backbone, members=2), epochs=1)
    model = train_recipe(r, store=st, progress=False)
    bb = train_recipe(backbone, store=st, progress=False)
    assert torch.equal(_weights(model.backbone), _weights(bb))  # the backbone is frozen
    x = ed.get_dataset("fmnist/test").x[:4]
    assert model(x).shape == (2, 4, 10)
    assert len(st.entries("features")) == 1  # features of the training set computed once
    assert torch.equal(train_recipe(r, store=st, progress=False)(x), model(x))


def test_heads_init_copy_or_seeded_reinitialisation():
    """#30: ``Heads(init="seed")`` re-initialises each head from the recipe's seed (two seeds differ, one seed
    repeats, no head equals the backbone's), ``copy`` (the default, in the recipe key like every default) copies it; an
    unknown init is one sentence."""
    from ensdiv.train.frameworks import make_heads

    backbone = ed.create_model("test_resnet", num_classes=10)
    clf = backbone.get_classifier()
    base = _recipe(epochs=1, model="test_resnet")
    copy_m, seed_m = Heads(backbone=base, members=2), Heads(backbone=base, members=2, init="seed")
    assert all(torch.equal(h.weight, clf.weight) for h in make_heads(copy_m, backbone, seed=3))
    a, b = make_heads(seed_m, backbone, seed=0), make_heads(seed_m, backbone, seed=1)
    assert not torch.equal(a[0].weight, a[1].weight) and not torch.equal(a[0].weight, b[0].weight)
    assert torch.equal(a[0].weight, make_heads(seed_m, backbone, seed=0)[0].weight)
    assert not torch.equal(a[0].weight, clf.weight)
    assert copy_m.to_dict()["init"] == "copy" and seed_m.to_dict()["init"] == "seed"
    with pytest.raises(ed.UnknownNameError, match="Heads init"):
        Heads(backbone=base, init="zeros")


def test_independent_loss_is_the_mean_member_cross_entropy():
    g = torch.Generator().manual_seed(0)
    logits, y = torch.randn(3, 5, 4, generator=g), torch.tensor([0, 1, 2, 3, 0])
    naive = sum(nn.functional.cross_entropy(logits[m], y) for m in range(3)) / 3
    assert losses.independent(logits, y).item() == pytest.approx(naive.item(), rel=1e-6)
    with pytest.raises(ValueError, match="shaped \\(M, B, C\\)"):
        losses.independent(logits[0], y)
    with pytest.raises(ValueError, match="target has 4 samples"):
        losses.independent(logits, y[:4])


def test_nt_xent_matches_a_loop():
    g = torch.Generator().manual_seed(0)
    z1, z2 = torch.randn(5, 4, generator=g), torch.randn(5, 4, generator=g)
    z = torch.nn.functional.normalize(torch.cat([z1, z2]), dim=1)
    total = 0.0
    for i in range(10):
        j = (i + 5) % 10
        denom = sum(math.exp(float(z[i] @ z[k]) / 0.5) for k in range(10) if k != i)
        total += -math.log(math.exp(float(z[i] @ z[j]) / 0.5) / denom)
    assert losses.nt_xent(z1, z2, temperature=0.5).item() == pytest.approx(total / 10, rel=1e-5)
    with pytest.raises(ValueError, match="two \\(N, D\\) embeddings"):
        losses.nt_xent(z1, z2[:3])


def test_unknown_ensemble_loss_is_one_sentence():
    with pytest.raises(EnsdivError, match="Unknown ensemble loss 'independant'.*Did you mean 'independent'"):
        losses.ensemble_loss("independant")


def test_multistep_schedule_and_its_bad_milestones():
    # the Packed-Ensembles reference: x0.1 at epochs 25 and 50 of 75
    fr = (25 / 75, 50 / 75)
    assert [lr_factor(t, schedule="multistep", milestones=fr) for t in (0.0, 0.34, 0.67, 0.99)] == pytest.approx(
        [1, 0.1, 0.01, 0.01])
    assert Optim(epochs=75, schedule="multistep", milestones=[25, 50]).milestones == [25, 50]
    with pytest.raises(ValueError, match="needs milestones"):
        Optim(schedule="multistep")
    with pytest.raises(ValueError, match="between 1 and 74"):
        Optim(epochs=75, schedule="multistep", milestones=[0, 80])


def test_weight_decay_on_every_parameter_only_when_asked():
    from ensdiv.train import make_optimizer

    model = create_model("test_cnn", num_classes=3, img_size=8)
    timm_style = make_optimizer(model, Optim(weight_decay=0.1))
    decay_all = make_optimizer(model, Optim(weight_decay=0.1, decay_all=True))
    assert sorted(g["weight_decay"] for g in timm_style.param_groups) == [0.0, 0.1]
    assert [g["weight_decay"] for g in decay_all.param_groups] == [0.1]


def test_crop_padding_reaches_the_augmentation(monkeypatch):
    from ensdiv.train import loop

    seen = []
    real = loop.BatchAugment

    def spy(*args, **kw):
        seen.append(kw.get("pad"))
        return real(*args, **kw)

    monkeypatch.setattr(loop, "BatchAugment", spy)
    fit(create_model("test_cnn", num_classes=3, img_size=8), _toy(), Optim(epochs=1, batch_size=16), augment="crop",
        crop_pad=4, progress=False)
    assert seen == [4]
    assert Recipe.make(crop_pad=4).data.crop_pad == 4


def test_channels_last_is_opt_in_and_hands_back_the_default_format():
    torch.manual_seed(0)
    a = fit(create_model("test_cnn", num_classes=3, img_size=8), _toy(), Optim(epochs=1, batch_size=16),
            progress=False, channels_last=True)
    conv = next(m for m in a.modules() if isinstance(m, nn.Conv2d))
    assert conv.weight.is_contiguous()  # handed back in the default format
    torch.manual_seed(0)
    b = fit(create_model("test_cnn", num_classes=3, img_size=8), _toy(), Optim(epochs=1, batch_size=16),
            progress=False)
    assert torch.allclose(_weights(a), _weights(b), atol=1e-4)  # rounding only


# ---- divergence: on_diverge="raise" | "stop" ----------------------------------------------------------------
def _nan_at(call: int, *, weights: bool = False):
    """A cross-entropy loss_fn whose ``call``-th call (1-based) is NaN; with ``weights`` it stays finite but
    its gradient is NaN (sqrt at 0 times a zero slope), so the step leaves NaN weights."""
    count = {"n": 0}

    def loss_fn(model, x, y):
        count["n"] += 1
        loss = nn.functional.cross_entropy(model(x), y)
        if count["n"] == call:
            if not weights:
                return loss * float("nan")
            w = next(model.parameters())
            return loss + torch.sqrt(((w - w.detach()) ** 2).sum())  # value + 0, gradient NaN
        return loss

    return loss_fn


def _run(loss_fn, *, epochs: int = 3, on_epoch_end=None, on_diverge: str = "stop") -> nn.Module:
    torch.manual_seed(123)
    model = create_model("test_cnn", num_classes=3, img_size=8)
    return fit(model, _toy(), Optim(epochs=epochs, lr=0.1, batch_size=16), seed=0, progress=False,
               loss_fn=loss_fn, on_epoch_end=on_epoch_end, on_diverge=on_diverge)


def test_divergence_stops_at_the_step_and_keeps_the_last_finished_epoch():
    states: dict[int, dict] = {}
    reference = _run(_nan_at(-1), on_epoch_end=lambda e, s: states.setdefault(e, s["model"]))  # never NaN
    assert reference.ensdiv_fit.status == "finished" and reference.ensdiv_fit.epochs_done == 3
    # 96 images / 16 = 6 steps per epoch: call 10 is epoch 2's 4th step
    model = _run(_nan_at(10))
    rep = model.ensdiv_fit
    assert (rep.status, rep.diverged_epoch, rep.diverged_step, rep.epochs_done, rep.cause) == (
        "diverged", 2, 10, 1, "loss")
    assert len(rep.history) == 1 and math.isfinite(rep.last_finite_loss)
    for k, v in model.state_dict().items():  # the weights (and BN statistics) of epoch 1 of the same run
        assert torch.equal(v, states[1][k]), k
    assert torch.isfinite(_weights(model)).all()
    d = rep.to_dict()
    assert d["diverged_step"] == 10 and isinstance(d["history"], list)


def test_divergence_in_the_first_epoch_gives_back_the_starting_weights():
    torch.manual_seed(123)
    init = create_model("test_cnn", num_classes=3, img_size=8).state_dict()
    model = _run(_nan_at(3))
    assert (model.ensdiv_fit.diverged_step, model.ensdiv_fit.epochs_done, model.ensdiv_fit.history) == (3, 0, ())
    for k, v in model.state_dict().items():
        assert torch.equal(v, init[k]), k


def test_finite_loss_leaving_nan_weights_is_caught_at_the_epoch_end():
    torch.manual_seed(123)
    init = create_model("test_cnn", num_classes=3, img_size=8).state_dict()
    ends = []
    model = _run(_nan_at(6, weights=True), on_epoch_end=lambda e, s: ends.append(e))  # epoch 1's last step
    rep = model.ensdiv_fit
    assert (rep.status, rep.cause, rep.diverged_epoch, rep.diverged_step, rep.epochs_done) == (
        "diverged", "weights", 1, 6, 0)
    assert ends == []  # no checkpoint of non-finite weights
    assert all(torch.equal(v, init[k]) for k, v in model.state_dict().items())


def test_divergence_raises_by_default_and_bad_option_is_one_sentence():
    with pytest.raises(EnsdivError, match=r"Training diverged \(loss nan\) at epoch 2"):
        _run(_nan_at(10), on_diverge="raise")
    with pytest.raises(ed.errors.InvalidInputError, match="on_diverge must be 'raise' or 'stop', got 'skip'"):
        _run(_nan_at(10), on_diverge="skip")
    with pytest.raises(ed.errors.InvalidInputError, match="on_diverge must be"):
        train_recipe(_recipe(), on_diverge="ignore")


def test_interrupted_fit_says_so():
    torch.manual_seed(0)
    model = fit(create_model("test_cnn", num_classes=3, img_size=8), _toy(), Optim(epochs=3, lr=0.1, batch_size=16),
                progress=False, stop_after=1)
    assert (model.ensdiv_fit.status, model.ensdiv_fit.epochs_done, model.ensdiv_fit.diverged_step) == (
        "interrupted", 1, None)


def test_a_diverged_recipe_is_cached_as_a_result(tmp_path, monkeypatch):
    calls = {"n": 0}

    def nan_at_7(logits, target, *, lam=0.0, label_smoothing=0.0):
        calls["n"] += 1
        loss = losses.independent(logits, target)
        return loss * float("nan") if calls["n"] == 7 else loss

    monkeypatch.setitem(losses.ENSEMBLE_LOSSES, "nan_at_7", nan_at_7)
    st = Store(tmp_path)
    r = _recipe(epochs=3, train_subset=192).replace(method=Joint(members=2, loss="nan_at_7"))  # 3 steps per epoch
    model = train_recipe(r, store=st, progress=False, on_diverge="stop")
    rep = model.ensdiv_meta["fit"]
    assert (rep["status"], rep["diverged_epoch"], rep["diverged_step"], rep["epochs_done"]) == ("diverged", 3, 7, 2)
    assert len(rep["history"]) == 2 and not st.entries("checkpoint") and len(st.entries("model")) == 1
    again = train_recipe(r, store=st, progress=False, on_diverge="stop")  # cached: not trained again
    assert calls["n"] == 7 and again.ensdiv_meta["fit"] == rep
    assert torch.equal(_weights(again), _weights(model)) and torch.isfinite(_weights(model)).all()
    with pytest.raises(EnsdivError, match="diverged \\(non-finite loss\\) at step 7, epoch 3"):
        train_recipe(r, store=st, progress=False)


def test_resumed_recipe_reports_the_whole_history(tmp_path):
    st = Store(tmp_path)
    r = _recipe()
    train_recipe(r, store=st, progress=False, stop_after=2)
    model = train_recipe(r, store=st, progress=False)
    assert model.ensdiv_meta["fit"]["status"] == "finished" and len(model.ensdiv_meta["fit"]["history"]) == 3


def test_a_models_own_training_loss_runs_under_the_mixed_precision_autocast():
    """Under ``bf16-mixed`` the convolutions of a model with ``training_loss`` (Packed-Ensembles) compute in
    bfloat16 as those of a plain model do; in one process Fabric does not route a marked method through its
    autocast, and such models trained in float32 (found by benchmarks/bench_gpu.py on an H100)."""
    seen: dict[str, list] = {}
    for name in ("test_packed", "test_cnn"):
        torch.manual_seed(0)
        model = create_model(name, num_classes=3, img_size=8)
        assert hasattr(model, "training_loss") == (name == "test_packed")
        conv = next(m for m in model.modules() if isinstance(m, nn.Conv2d))
        seen[name] = []
        conv.register_forward_hook(lambda mod, i, o, s=seen[name]: s.append(o.dtype) if mod.training else None)
        fit(model, _toy(), Optim(epochs=1, batch_size=16), accelerator="cpu", precision="bf16-mixed",
            progress=False)
        assert model.ensdiv_fit.status == "finished"
    assert set(seen["test_packed"]) == {torch.bfloat16} and set(seen["test_cnn"]) == {torch.bfloat16}
    # the float32 default stays float32
    seen32: list = []
    model = create_model("test_packed", num_classes=3, img_size=8)
    conv = next(m for m in model.modules() if isinstance(m, nn.Conv2d))
    conv.register_forward_hook(lambda mod, i, o: seen32.append(o.dtype) if mod.training else None)
    fit(model, _toy(), Optim(epochs=1, batch_size=16), accelerator="cpu", progress=False)
    assert set(seen32) == {torch.float32}
