"""design-diversity, second half: jointly trained NCL ensembles (divergence recorded, not raised), the recipe path
through ENSEMBLE_LOSSES and INPUT_LOSSES (Eq. 8), sub-network selection, Table 2's split equitability, and the
chapter's presets."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import ensdiv as ed
from ensdiv import losses
from ensdiv.chapters import design_diversity_training as ch
from ensdiv.errors import InvalidInputError, UnknownNameError
from ensdiv.losses.ncl import gncl
from ensdiv.models.supernet import SuperResNet, all_configs, subnet_params
from ensdiv.store import config_key
from ensdiv.train import Heads, build_model
from ensdiv.train.frameworks import InputLossStack, build_joint, joint_loss

TINY = {"member_model": "test_resnet", "member_kwargs": {}, "members": 2, "lam": 0.2, "train_set": "fmnist/train",
        "train_subset": 64, "epochs": 2, "batch_size": 16, "lr": 1e-3, "augment": "none", "seed": 0}


@pytest.mark.slow
def test_divergence_is_recorded_not_raised(tmp_store, monkeypatch):
    calls = {"n": 0}

    def nan_at_step_6(logits, target, *, lam=0.0):
        calls["n"] += 1
        loss = losses.independent(logits, target)
        return loss * float("nan") if calls["n"] == 6 else loss

    monkeypatch.setitem(losses.ENSEMBLE_LOSSES, "nan_at_step_6", nan_at_step_6)
    run = ch.train_joint(ch.joint_recipe(TINY, "nan_at_step_6", 0.0), "nan")
    assert run.status == "diverged"
    assert (run.diverged_epoch, run.diverged_step) == (2, 6)  # 4 steps per epoch of 64 images / 16
    assert run.epochs_done == 1 and len(run.history) == 1 and np.isfinite(run.last_finite_loss)
    assert run.cause == "loss"
    assert len(run.members) == 2  # the members of the last finished epoch
    assert all(torch.isfinite(p).all() for m in run.members for p in m.parameters())
    again = ch.train_joint(ch.joint_recipe(TINY, "nan_at_step_6", 0.0), "nan")  # cached: not trained again
    assert calls["n"] == 6 and again.diverged_step == 6
    calls["n"] = -100
    first = ch.train_joint(ch.joint_recipe(TINY, "nan_at_step_6", 0.0, seed=1), "early")
    assert first.status == "finished"  # calls never reach 6 again in 8 steps
    calls["n"] = 0
    early = ch.train_joint(ch.joint_recipe(TINY, "nan_at_step_6", 0.0, seed=2, epochs=3, train_subset=96), "x")
    assert early.status == "diverged" and early.diverged_epoch == 1 and early.members == []
    with pytest.raises(ed.EnsdivError, match="no finished epoch"):
        ch.joint_members(early)


def test_joint_recipe_through_the_engine_with_registered_losses(tmp_store):
    """ed.Joint(loss="gncl_mean") trains through train_recipe with the GNCL loss; train_joint is that model."""
    recipe = ch.joint_recipe(TINY, "gncl_mean", 0.2, epochs=1)
    stack = ed.train_recipe(recipe, progress=False)
    x, y = torch.rand(8, 1, 28, 28), torch.randint(0, 10, (8,))
    with torch.no_grad():
        assert float(stack.loss_fn(stack(x), y)) == pytest.approx(float(gncl(stack(x), y, lam=0.2)))
    run = ch.train_joint(recipe)
    torch.testing.assert_close(torch.stack([m(x) for m in run.members]), stack(x))


def _naive_saliency_variance(members, x, y) -> torch.Tensor:
    """Eq. 7 by hand: per member |d logit_y / dx| (one sample at a time), population variance over members, summed
    over channels and pixels, mean over samples."""
    per_sample = []
    for b in range(len(x)):
        maps = []
        for m in members:
            xb = x[b : b + 1].clone().requires_grad_(True)
            (g,) = torch.autograd.grad(m(xb)[0, y[b]], xb)
            maps.append(g.abs().flatten())
        per_sample.append(torch.stack(maps).var(0, unbiased=False).sum())
    return torch.stack(per_sample).mean()


@pytest.mark.slow
def test_attribution_penalty_through_the_recipe_path(tmp_store):
    """Eq. 8 as an ordinary Joint recipe: the stack's training loss is (1/M) Σ CE − λ A on the batch's inputs."""
    recipe = ch.joint_recipe(TINY, ch.ATTRIBUTION_LOSS, 0.1, epochs=1)
    shape = {"num_classes": 10, "in_chans": 1, "img_size": 28}
    stack = build_joint(recipe, build_model, **shape).eval()  # eval: BN statistics do not move between calls
    assert isinstance(stack, InputLossStack)
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(4, 1, 28, 28, generator=g), torch.randint(0, 10, (4,), generator=g)
    members = list(stack.members)
    direct = losses.independent(stack(x), y) - 0.1 * losses.attribution_variance(members, x, y)
    got = stack.training_loss(x, y)
    assert float(got.detach()) == pytest.approx(float(direct.detach()), rel=1e-5)
    a = (losses.independent(stack(x), y) - got).detach() / 0.1
    assert float(a) == pytest.approx(float(_naive_saliency_variance(members, x, y)), rel=1e-4)
    got.backward()  # differentiable into the members' weights
    assert all(p.grad is not None for p in stack.parameters() if p.requires_grad)
    # trained and cached through train_recipe; train_joint reads the same entry
    model = ed.train_recipe(recipe, progress=False)
    assert isinstance(model, InputLossStack) and model.ensdiv_meta["fit"]["status"] == "finished"
    assert len(tmp_store.entries("model")) == 1
    run = ch.train_joint(recipe)
    assert run.status == "finished" and run.epochs_done == 1
    torch.testing.assert_close(torch.stack([m(x) for m in run.members]), model(x))
    plain = ed.train_recipe(ch.joint_recipe(TINY, ch.ATTRIBUTION_LOSS, 0.0, epochs=1), progress=False)
    assert not torch.equal(plain(x), model(x))  # λ reaches the training


def test_input_losses_are_refused_where_no_inputs_reach_them():
    backbone = ed.Recipe.make(model="test_cnn", dataset="fmnist/train", epochs=1)
    heads = Heads(backbone=backbone, members=2, loss=ch.ATTRIBUTION_LOSS, lam=0.1)
    with pytest.raises(InvalidInputError, match="needs the members' inputs"):
        joint_loss(heads, backbone.optim)
    with pytest.raises(UnknownNameError, match="Unknown ensemble loss 'attribution_penalties'"):
        joint_loss(ed.Joint(loss="attribution_penalties"), backbone.optim)


def test_joint_recipe_settings_and_unknown_loss():
    r = ch.joint_recipe(TINY, "balanced", 0.2)
    assert (r.optim.optimizer, r.optim.eps, r.optim.lr, r.method.members, r.method.loss) == (
        "adabelief", 1e-8, 1e-3, 2, "balanced")
    with pytest.raises(UnknownNameError, match="ensemble loss"):
        ch.joint_recipe(TINY, "gncl_mode", 0.2)


def test_select_configs_are_the_closest_in_size():
    net = SuperResNet(10, 1, channels=(4, 8, 8))
    picked = ch.select_configs(net, 11)
    assert len(set(picked)) == 11
    sizes = np.array([subnet_params(net, c) for c in all_configs(net)])
    target = np.median(sizes)
    worst = max(abs(subnet_params(net, c) - target) for c in picked)
    assert (np.abs(sizes - target) < worst).sum() <= 10  # no unpicked config is strictly closer than the worst pick


def test_equitability_split_hand_case():
    # 3 members, 4 samples, 3 classes; ensemble (mean logits) right on samples 0, 1, wrong on 2, 3
    votes = torch.tensor([[0, 1, 2, 0], [0, 1, 1, 0], [0, 2, 1, 1]])
    logits = F.one_hot(votes, 3).double() * 5
    labels = torch.tensor([0, 1, 0, 2])
    h_corr, h_inco = ch.equitability_split(logits, labels)
    split21 = -(2 / 3 * np.log(2 / 3) + 1 / 3 * np.log(1 / 3)) / np.log(3)
    assert h_corr == pytest.approx((0 + split21) / 2)
    assert h_inco == pytest.approx((split21 + split21) / 2)
    assert np.isnan(ch.equitability_split(logits, torch.tensor([1, 0, 2, 2]))[0])  # no correct sample


def test_equitability_table_fills_table_2_per_ensemble_and_set(monkeypatch):
    """One ensemble that splits 2-1 on every image and gets all right, one that agrees and gets all wrong: H_corr and
    H_inco by hand on every set, in Table 2's column order, with the accuracies beside."""
    split = torch.tensor([[0, 1, 2, 0], [0, 1, 2, 0], [1, 2, 0, 1]])  # right on every image, 2-1 votes
    agree = torch.tensor([[1, 2, 0, 1]] * 3)  # all wrong, unanimous
    labels = torch.tensor([0, 1, 2, 0])
    monkeypatch.setattr(ch.diversity, "chapter_logits", lambda cfg, members, key: F.one_hot(members, 3).double())
    monkeypatch.setattr(ch.diversity, "chapter_labels", lambda cfg, key: labels)
    table, acc = ch.equitability_table(None, {"split": split, "agree": agree})
    split21 = -(2 / 3 * np.log(2 / 3) + 1 / 3 * np.log(1 / 3)) / np.log(3)
    assert list(table.columns) == list(ch.PAPER_TABLE2.columns) and list(table.index) == ["split", "agree"]
    assert table.loc["split", "H_corr"].tolist() == pytest.approx([split21] * len(ch.SET_KEYS))
    assert table.loc["split", "H_inco"].isna().all() and table.loc["agree", "H_corr"].isna().all()
    assert table.loc["agree", "H_inco"].tolist() == pytest.approx([0.0] * len(ch.SET_KEYS))
    assert acc.loc["split"].tolist() == [100.0] * len(ch.SET_KEYS) and acc.loc["agree"].eq(0).all()


def test_cka_of_retrained_members_is_keyed_by_their_recipes(monkeypatch):
    """Two seeds of one heterogeneous architecture train two models: their cached CKA must not share a key (a
    trained recipe's module carries no id of its own, so keying the loaded module gave both its class name)."""
    cfg = ch.preset("fig12_cka_layers", "smoke", verbose=False)
    seen = []
    monkeypatch.setattr(ch.dd, "member_module", lambda m: torch.nn.Sequential(torch.nn.Flatten()))
    monkeypatch.setattr(ch.diversity, "layer_names", lambda m: ["0"])
    monkeypatch.setattr(ed, "cached", lambda name, conf, compute: seen.append(config_key(conf)) or {
        "cka": torch.ones(1, 1)})
    for s in (0, 1):
        het = [m for k, m in ch.matched_recipes(cfg, s).items() if k.startswith("heterogeneous")]
        ch.cka_between(cfg, het[0], het[1])
    assert len(set(seen)) == 2


def test_layer_names_skip_identities_and_activations():
    m = ed.create_model("test_resnet", num_classes=10, in_chans=1, img_size=28)
    names = ch.layer_names(m)
    mods = dict(m.named_modules())
    assert names and all(n in mods for n in names)
    assert not any(isinstance(mods[n], torch.nn.Identity | torch.nn.ReLU) for n in names)
    assert len(ch.layer_names(m, max_layers=3)) == 3


def test_layer_names_open_a_paper_scale_wrapper_to_its_stages():
    # a paper-scale member is a PixelModel around a timm network: its layers are the network's, not ["model"]
    import timm

    from ensdiv.models.input_spec import InputSpec
    from ensdiv.models.paper import PixelModel

    torch.manual_seed(0)
    nets = [timm.create_model(a, num_classes=1000).eval() for a in ("test_resnet", "test_vit")]
    for n in nets:
        n.ensdiv_input = InputSpec(size=64, mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
    a, b = (PixelModel(n, f"m{i}") for i, n in enumerate(nets))
    la, lb = ch.layer_names(a), ch.layer_names(b)
    assert la == ["model." + n for n in ch.layer_names(nets[0])]
    assert lb == ["model." + n for n in ch.layer_names(nets[1])]
    assert "model.layer1" in la and any(n.startswith("model.blocks.") for n in lb)
    cka = ed.metrics.cka_map(a, b, [torch.rand(8, 3, 32, 32)], la, lb)
    assert cka.shape == (len(la), len(lb)) and len(la) > 1 and len(lb) > 1
    # the layers of a plain model are unchanged (a one-child Sequential is not a wrapper)
    seq = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3))
    assert ch.layer_names(seq) == ["0"]


def test_corresponding_layers_same_architecture_is_the_diagonal():
    names = ["stem", "layer1", "layer2", "head"]
    assert ch.corresponding_layers(names, names) == [(0, 0), (1, 1), (2, 2), (3, 3)]


def test_corresponding_layers_across_architectures_match_relative_depth():
    # 3 layers against 5: depths 0, 1/2, 1 -> 0, 2, 4 (first with first, last with last)
    assert ch.corresponding_layers(["a", "b", "c"], list("vwxyz")) == [(0, 0), (1, 2), (2, 4)]
    assert ch.corresponding_layers(list("vwxyz"), ["a", "b", "c"]) == [(0, 0), (2, 1), (4, 2)]
    # 4 against 6: i * 5 / 3 = 0, 1.67, 3.33, 5 -> 0, 2, 3, 5
    assert ch.corresponding_layers(list("abcd"), list("uvwxyz")) == [(0, 0), (1, 2), (2, 3), (3, 5)]
    # a model seen whole (a timm model at paper scale: one layer) corresponds to the other's last layer
    assert ch.corresponding_layers(["model"], list("abc")) == [(0, 2)]
    assert ch.corresponding_layers(list("abc"), ["model"]) == [(2, 0)]
    assert ch.corresponding_layers([], ["a"]) == []


def test_corresponding_mean_against_a_loop_and_skipping_constant_layers():
    rng = np.random.default_rng(0)
    maps = rng.random((4, 3, 5))  # 4 batches of 3 x 5 maps
    maps[1, 1, 2] = np.nan  # a constant layer in batch 1
    got = ch.corresponding_mean(maps, ["a", "b", "c"], list("vwxyz"))
    for b in range(4):
        vals = [maps[b, i, j] for i, j in [(0, 0), (1, 2), (2, 4)] if not np.isnan(maps[b, i, j])]
        assert got[b] == pytest.approx(sum(vals) / len(vals))
    assert ch.corresponding_mean(torch.eye(3), list("abc"), list("abc")) == pytest.approx(1.0)  # the diagonal
    with pytest.raises(InvalidInputError, match="3 x 4 layers"):
        ch.corresponding_mean(maps[0], ["a", "b", "c"], list("wxyz"))
    with pytest.raises(InvalidInputError, match="non-empty"):
        ch.corresponding_mean(np.zeros((0, 0)), [], [])


def test_constant_layer_gives_nan_cka():
    acc = ed.metrics.MinibatchCKA()
    x = torch.randn(8, 3, generator=torch.Generator().manual_seed(0))
    acc.update([x, torch.ones(8, 3)], [x])
    out = acc.compute()
    # 0 self-similarity: a rounding residue over 0, inf or NaN depending on the floats (the chapter maps it to NaN)
    assert float(out[0, 0]) == pytest.approx(1.0) and not torch.isfinite(out[1, 0])


@pytest.mark.parametrize("stem", [s.split("/")[1] for s in ch.PRESETS])
@pytest.mark.parametrize("scale", ["smoke", "cpu", "paper"])
def test_presets_resolve(stem, scale):
    cfg = ch.preset(stem, scale, verbose=False)
    assert cfg.scale == scale and cfg.seed == 0


def test_paper_presets_are_the_papers_settings():
    cfg = ch.preset("fig10_ncl_heuristics", "paper", verbose=False)
    r = ch.joint_recipe(cfg, "gncl_mean", cfg.lam)
    assert (r.model.name, r.data.dataset, r.optim.epochs, r.optim.batch_size, r.method.members, r.method.lam) == (
        "resnet50", "imagenet/train", 100, 64, 3, 0.2)
    assert ch.preset("sec431_attribution_penalty", "paper", verbose=False).lams == [10.0, 1.0, 0.1, 0.01, 0.001]
    net = ed.create_model(ch.preset("fig08_supernet_ensembles", "paper", verbose=False).supernet_model,
                          num_classes=4, in_chans=3, img_size=64)
    assert len(ch.select_configs(net, 11, candidates=300)) == 11


@pytest.mark.parametrize("scale", ["smoke", "cpu"])
def test_the_three_ensembles_share_one_budget(scale):
    """#29: Table 2 / Figs. 11-12 compare ensembles trained on the same data, epochs, optimiser, learning rate,
    batch and seed (the attribution penalty's budget), the heterogeneous members retrained on it."""
    cfg = ch.preset("tab02_equitability", scale, verbose=False)
    recipes = ch.matched_recipes(cfg)
    assert len(recipes) == 2 + len(cfg.hetero)
    budgets = {(r.data.dataset, r.data.subset, r.data.augment, r.optim.epochs, r.optim.optimizer, r.optim.lr,
                r.optim.batch_size, r.seeds.init, r.seeds.order) for r in recipes.values()}
    assert budgets == {(cfg.train_set, cfg.attr_train_subset, cfg.augment, cfg.attr_epochs, "adabelief", cfg.lr,
                        cfg.batch_size, cfg.seed, cfg.seed)}
    table = ch.budget_table(cfg)
    assert table["images"].nunique() == 1 and table["epochs"].nunique() == 1 and len(table) == len(recipes)


def test_each_training_seed_trains_the_family_on_the_same_images_with_its_own_initialisation():
    """Sec. 4.3.1, Table 2 and Figs. 11-12 compare training methods over seeds: seed s changes the initialisation
    and data order of every ensemble of the family (the λ runs, the control, GNCL, the heterogeneous members) and
    nothing else; no seed keeps the preset's seed; the budget table names the seeds."""
    cfg = ch.preset("tab02_equitability", "cpu", verbose=False)
    assert cfg.seeds == [0, 1, 2, 3, 4, 5]
    base = ch.matched_recipes(cfg)
    assert ch.matched_recipes(cfg, cfg.seed) == base
    for s in (1, 5):
        seeded = ch.matched_recipes(cfg, s)
        assert list(seeded) == list(base)
        for label, r in seeded.items():
            assert (r.seeds.init, r.seeds.order, r.seeds.subset) == (s, s, base[label].seeds.subset)
            assert r.replace(seed=cfg.seed) == base[label]
        sweep = [ch._attr_recipe(cfg, lam, s) for lam in cfg.lams] + [ch.control_recipe(cfg, s)]
        assert {(r.seeds.init, r.data.subset, r.optim.epochs) for r in sweep} == {
            (s, cfg.attr_train_subset, cfg.attr_epochs)}
    assert ch.budget_table(cfg)["seeds"].unique().tolist() == ["0, 1, 2, 3, 4, 5"]


def test_the_heterogeneous_budget_is_the_candidate_closest_to_gncls_accuracy(monkeypatch):
    """Accuracy matched by training for fewer steps: with stand-in accuracies (the heterogeneous members' grow with
    their training images, GNCL's is 50 %) the budget whose mean over the seeds is nearest 50 is chosen, each
    candidate is listed with its gap, and a single candidate (the paper's pretrained stand-ins) trains nothing."""
    budgets = [[2500, 2], [2500, 1], [1250, 1], [625, 1]]
    cfg = ch.preset("tab02_equitability", "cpu", verbose=False, hetero_budgets=budgets)
    monkeypatch.setattr(ch.ensembles, "train_joint", lambda recipe, label="": recipe)
    monkeypatch.setattr(ch.ensembles, "joint_members", lambda run: ["gncl"])

    def accuracy(sel, members):
        assert sel.eval_images == cfg.match_images
        if members == ["gncl"]:
            return 50.0
        r = members[0]
        return 30.0 + r.data.subset / 100 * r.optim.epochs + r.seeds.init  # 2500 x 2: 80 + seed; 625 x 1: 36.25 + s

    monkeypatch.setattr(ch.ensembles, "clean_accuracy", accuracy)
    budget, table = ch.hetero_match(cfg)
    assert budget == (1250, 1)  # 42.5 + 2.5 = 45 is nearest 50 (2500 x 1: 57.5; 625 x 1: 38.75)
    assert table[["images", "epochs"]].values.tolist() == cfg.hetero_budgets
    assert table["gap (points)"].tolist() == pytest.approx([32.5, 7.5, -5.0, -11.25])
    one = ch.preset("tab02_equitability", "cpu", verbose=False, hetero_budgets=[[2500, 2]])
    monkeypatch.setattr(ch.ensembles, "clean_accuracy", lambda *a: pytest.fail("a single candidate is evaluated"))
    assert ch.hetero_match(one)[0] == (2500, 2) and ch.hetero_match(one)[1].empty
    recipes = ch.matched_recipes(cfg, 3, (625, 1))
    het = [r for k, r in recipes.items() if k.startswith("heterogeneous")]
    assert {(r.data.subset, r.optim.epochs, r.seeds.init) for r in het} == {(625, 1, 3)}
    assert ch.matched_recipes(cfg, 3, (2500, 2)) == ch.matched_recipes(cfg, 3)


def test_landing_page_budget_table_matches_the_cpu_presets():
    """The chapter page's budget table (#29) states the cpu presets' budgets."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "book" / "design-diversity.md").read_text()
    tab2 = ch.preset("tab02_equitability", "cpu", verbose=False)
    fig10 = ch.preset("fig10_ncl_heuristics", "cpu", verbose=False)
    assert f"{tab2.attr_train_subset:,} images × {tab2.attr_epochs} epochs" in text
    assert f"{fig10.train_subset:,} images × {fig10.epochs} epochs" in text


# ---- the training half at paper scale: streamed from an ImageNet-layout folder (issue #29) ---------------------
@pytest.mark.slow
def test_paper_supernet_and_subnetworks_train_from_an_imagenet_folder(fake_imagenet_train):
    # the paper preset of Fig. 8 unchanged except for sizes: imagenet/train read by DataLoader, "flipcrop" (the
    # timm transform's own crop and flip), progressive shrinking, then sub-networks with BN recalibrated on
    # streamed training images
    cfg = ch.preset("fig08_supernet_ensembles", "paper", verbose=False, supernet_model="test_supernet",
                    supernet_epochs=[1, 1, 1], batch_size=4, bn_images=6, subnets=3)
    assert cfg["train_set"] == "imagenet/train" and cfg["augment"] == "flipcrop"
    net = ch.supernet(cfg)
    store = fake_imagenet_train["store"]
    assert len(store.entries("dd-supernet")) == 1 and len(store.entries("model")) == 1  # base, then the stages
    subs = ch.subnetworks(cfg)
    assert len(subs) == 3 and len({s.ensdiv_name for s in subs}) == 3
    x = torch.rand(2, 3, 64, 64)
    for s in subs:
        assert s(x).shape == (2, 1000) and torch.isfinite(s(x)).all()
        bn = next(m for m in s.modules() if isinstance(m, torch.nn.BatchNorm2d))
        assert int(bn.num_batches_tracked) == 1  # recalibrated on the 6 streamed images (one batch)
    assert net.elastic == "none" and not net.training
    again = ch.supernet(cfg)  # cached: no second training
    assert len(store.entries("dd-supernet")) == 1
    torch.testing.assert_close(next(again.parameters()), next(net.parameters()))


def test_paper_joint_ensemble_trains_from_an_imagenet_folder(fake_imagenet_train):
    # Fig. 10's paper preset (ResNet-50 members, AdaBelief, multistep schedule, flipcrop) with a tiny member and
    # two epochs (one milestone): an ed.Joint recipe trained by ed.train_recipe from the folder, members (M, B, 1000)
    cfg = ch.preset("fig10_ncl_heuristics", "paper", verbose=False, member_model="test_resnet", epochs=2,
                    milestones=[1], batch_size=4)
    recipe = ch.joint_recipe(cfg, "gncl_mean", cfg["lam"])
    assert recipe.data.dataset == "imagenet/train" and recipe.optim.schedule == "multistep"
    run = ch.train_joint(recipe, "GNCL average")
    assert run.status == "finished" and run.epochs_done == 2 and len(run.members) == 3
    assert ed.train_recipe(recipe).ensdiv_meta["train_size"] == 12
    out = torch.stack([m(torch.rand(2, 3, 64, 64)) for m in run.members])
    assert out.shape == (3, 2, 1000) and torch.isfinite(out).all()
