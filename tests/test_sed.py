"""SED chapter plumbing: subset training leaves unsampled heads untouched, the ViT block cut, Heads with an
unlabeled OOD stream end to end, the uniform soup, the released tables and the chapter presets."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from torch import nn

import ensdiv as ed
from ensdiv import losses
from ensdiv.chapters import sed as ch
from ensdiv.models.stack import BackboneWithHeads, HeadStack, cut_features, draw_subset, vit_block_head
from ensdiv.store import Store


def _state(m: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in m.parameters()]


def test_unsampled_heads_do_not_change_in_a_step():
    torch.manual_seed(0)
    heads = [nn.Linear(6, 3) for _ in range(5)]
    stack = HeadStack(heads, loss_fn=lambda lg, y: losses.sed(lg, y, lam=1.0), subset=2)
    opt = torch.optim.AdamW(stack.parameters(), lr=0.1, weight_decay=0.1)
    before = [_state(h) for h in heads]
    x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
    torch.manual_seed(7)
    chosen = draw_subset(5, 2).tolist()
    torch.manual_seed(7)
    stack.training_loss(x, y).backward()
    opt.step()
    for k, h in enumerate(heads):
        moved = any(not torch.equal(a, b) for a, b in zip(before[k], _state(h), strict=True))
        assert moved == (k in chosen), (k, chosen)


def test_subset_draw_matches_the_loss_sampler():
    torch.manual_seed(3)
    a = draw_subset(9, 3)
    torch.manual_seed(3)
    assert a.tolist() == losses.sample_members(9, 3).tolist()


def test_block_cut_reproduces_the_vit_and_reloads_into_linear_heads():
    model = ed.create_model("test_vit", num_classes=10, in_chans=1, img_size=28).eval()
    x = torch.rand(3, 1, 28, 28)
    torch.testing.assert_close(vit_block_head(model)(cut_features(model, x, "block")), model(x))
    full = BackboneWithHeads(model, HeadStack([vit_block_head(model) for _ in range(2)], cut="block"))
    empty = BackboneWithHeads(copy.deepcopy(model), HeadStack([nn.Linear(8, 10) for _ in range(2)]))
    empty.load_state_dict(full.state_dict())
    assert empty.cut == "block"
    torch.testing.assert_close(empty(x), full(x))
    with pytest.raises(ed.InvalidInputError):
        cut_features(ed.create_model("test_resnet", num_classes=10, in_chans=1, img_size=28), x, "block")


def test_uniform_soup_of_heads_is_the_mean_of_state_dicts():
    heads = [nn.Linear(4, 3) for _ in range(3)]
    soup = ed.ensembles.uniform_soup([h.state_dict() for h in heads])
    for k in ("weight", "bias"):
        torch.testing.assert_close(soup[k], torch.stack([h.state_dict()[k] for h in heads]).mean(0))


def test_heads_recipe_with_ood_stream_subset_and_block_cut_trains_and_reloads(tmp_path):
    st = Store(tmp_path)
    bb = ed.Recipe.make(model="test_vit", epochs=1, train_subset=128, batch_size=64, optimizer="adamw", lr=1e-3)
    for method in (
        ed.Heads(backbone=bb.to_dict(), members=3, loss="naive_a2d", lam=1.0, cut="block", ood_set="letters"),
        ed.Heads(backbone=bb.to_dict(), members=3, loss="sed", lam=1.0, subset=2, cut="block", feature_passes=1),
        ed.Heads(backbone=bb.to_dict(), members=2, loss="naive_divdis", lam=1.0, ood_set="letters",
                 options={"reg_weight": 0.5}),
    ):
        r = bb.replace(method=method, augment="flip")
        model = ed.train_recipe(r, store=st, progress=False)
        x = ed.get_dataset("fmnist/test").x[:4]
        assert model(x).shape == (method.members, 4, 10)
        torch.testing.assert_close(ed.train_recipe(r, store=st, progress=False)(x), model(x))
    with pytest.raises(ed.EnsdivError):
        ed.train_recipe(bb.replace(method=ed.Heads(backbone=bb.to_dict(), members=2, loss="naive_a2d")), store=st,
                        progress=False)
    with pytest.raises(ed.UnknownNameError):
        ed.Heads(backbone=bb.to_dict(), cut="neck")


def test_heads_pass_seed_gives_recipes_one_shared_augmented_pass(tmp_path):
    """Two one-head recipes with other data-order seeds and one ``pass_seed`` read one cached augmented pass;
    without ``pass_seed`` the order seed draws it (another pass, the same clean features)."""
    from ensdiv.train import load_training_set, model_cache_config
    from ensdiv.train.frameworks import head_features

    st = Store(tmp_path)
    bb = ed.Recipe.make(model="test_vit", epochs=1, train_subset=64, batch_size=32, optimizer="adamw", lr=1e-3)
    backbone = ed.train_recipe(bb, store=st, progress=False)
    data = load_training_set(bb)

    def features(order, pass_seed):
        heads = ed.Heads(backbone=bb.to_dict(), cut="block", feature_passes=1, pass_seed=pass_seed)
        recipe = bb.replace(method=heads, augment="flip", order_seed=order)
        return head_features(recipe, backbone, data, store=st, backbone_key=model_cache_config(bb))[0]

    a, b = features(3, 5), features(7, 5)
    torch.testing.assert_close(a, b)
    assert len(list((tmp_path / "features").rglob("*.pt"))) == 1
    c = features(7, None)
    assert len(list((tmp_path / "features").rglob("*.pt"))) == 2
    torch.testing.assert_close(a[:64], c[:64])  # the clean pass
    assert not torch.equal(a[64:], c[64:])  # the augmented pass: seed 5 against the order seed 7
    with pytest.raises(ed.InvalidInputError, match="pass_seed"):
        ed.Heads(backbone=bb.to_dict(), pass_seed=-1)


def test_sed_methods_of_one_run_share_one_augmented_pass():
    """Every method's recipes of one training run name the same augmented pass (one backbone pass per run, not
    one per deep-ensemble member), and two runs name two."""
    cfg = ch.preset("tab01_unique", "smoke", verbose=False)
    for run in (0, 1):
        seeds = {r.method.pass_seed for m in (*ch.METHODS, "sed_m50") for r in ch.method_recipes(cfg, m, seed=run)}
        assert seeds == {cfg["seed"] + run}


def test_released_tables_hold_the_readme_numbers():
    t = ch.released_tables()
    cov = t[(t.model == "ood_det_cov_") & (t.metric == "oracle") & (t.set == "in_val")].value.iloc[0]
    assert cov == pytest.approx(0.57, abs=0.01)
    pds = t[(t.model == "ood_det_sem_") & (t.metric == "PDS") & (t.set == "iNaturalist")].value.iloc[0]
    assert pds == pytest.approx(0.977, abs=1e-3)


def test_presets_and_fit_exponent():
    for stem in ("tab01_unique", "tab02_generalisation", "tab03_detection", "fig02_divergent_samples",
                 "fig03_lambda_sweep", "fig04_ensemble_size", "cost_step_time"):
        for scale in ("smoke", "cpu", "paper"):
            assert ch.preset(stem, scale, verbose=False)["cut"] == "block"
    assert ch.fit_exponent([2, 4, 8], [1.0, 4.0, 16.0]) == pytest.approx(2.0)
    with pytest.raises(ed.UnknownNameError):
        ch.method_recipes(ch.preset("tab01_unique", "smoke", verbose=False), "bagging")


def test_weight_spread_is_zero_for_identical_members_and_the_largest_entry_gap_otherwise(monkeypatch):
    torch.manual_seed(0)
    base = nn.Linear(4, 3)
    heads = [copy.deepcopy(base) for _ in range(3)]
    monkeypatch.setattr(ch, "method_recipes", lambda cfg, method, members=None: ["one recipe"])
    monkeypatch.setattr(ch, "_heads_of", lambda recipe: heads)
    assert ch.weight_spread({}, "naive_a2d") == 0.0
    with torch.no_grad():
        heads[1].weight[2, 1] += 0.3   # the largest gap, by hand: 0.3
        heads[2].bias[0] -= 0.1
    assert ch.weight_spread({}, "naive_a2d") == pytest.approx(0.3, abs=1e-6)


def test_member_movement_measures_rms_change_from_the_start_and_between_members(monkeypatch):
    start = nn.Linear(2, 1)
    with torch.no_grad():
        start.weight.zero_()
        start.bias.zero_()
    heads = [copy.deepcopy(start) for _ in range(3)]
    with torch.no_grad():
        heads[0].weight += torch.tensor([[1.0, 1.0]])  # 3 parameters: (1, 1, 0) from the start
        heads[1].bias += 3.0                            # (0, 0, 3)
    monkeypatch.setattr(ch, "start_head", lambda cfg: start)
    monkeypatch.setattr(ch, "method_recipes", lambda cfg, method, members=None, seed=0: ["one recipe"])
    monkeypatch.setattr(ch, "_heads_of", lambda recipe: heads)
    got = ch.member_movement({}, "sed_sem")
    # by hand: RMS moves sqrt(2/3), sqrt(9/3), 0;
    # pair gaps (1, 1, -3) -> sqrt(11/3), (1, 1, 0) -> sqrt(2/3), (0, 0, 3) -> sqrt(3)
    assert got["moved"] == pytest.approx((math.sqrt(2 / 3) + math.sqrt(3) + 0) / 3)
    assert got["spread"] == pytest.approx((math.sqrt(11 / 3) + math.sqrt(2 / 3) + math.sqrt(3)) / 3)
    # members started from distinct random heads: their distances measure the start, refused in one sentence
    with pytest.raises(ed.InvalidInputError, match="distinct random heads"):
        ch.member_movement({}, "naive_a2d")
    # the premise gate: a SED member moved at least |I|/M of the deep ensemble's distance (2/5 here, by hand:
    # 0.02 - 0.4 * 0.04 = 0.004 passes; the release's semantic steps on this scale, about 1/40 of that, fail)
    gate = ch.trained_gate("sed", "de", share=2 / 5, name="premise")
    assert gate.region == (">", 0.0) and gate.statistic({"sed": 0.02, "de": 0.04}) == pytest.approx(0.004)
    assert gate.statistic({"sed": 0.0004, "de": 0.04}) < 0


def test_time_loss_times_the_loss_alone_and_refuses_unknown_losses():
    for loss in ch.TIMED_LOSSES:
        sec = ch.time_loss(4, loss, classes=3, batch=8, steps=2)
        assert math.isfinite(sec) and sec > 0
    with pytest.raises(ed.UnknownNameError):
        ch.time_loss(4, "bagging")


def test_detection_and_bootstrap_helpers_of_the_claims():
    gen = torch.Generator().manual_seed(0)
    id_s, ood_s = torch.rand(40, generator=gen), torch.rand(30, generator=gen) + 0.3
    score, is_ood = ch.pooled(id_s, ood_s)
    assert score.shape == (70,) and is_ood.sum() == 30 and not is_ood[:40].any()
    assert ch.auroc_of(score, is_ood) == pytest.approx(float(ed.metrics.auroc(id_s, ood_s)), abs=1e-6)
    assert ch.auroc_of(np.ones(4), np.array([0, 0, 1, 1])) == 0.5  # ties count one half
    assert math.isnan(ch.auroc_of(score[:40], is_ood[:40]))  # no OOD sample
    logits = torch.randn(3, 10, 4, generator=gen)
    assert np.allclose(ch.ood_score(logits, "PDS"), ed.metrics.pds(logits.softmax(-1)).numpy())
    assert np.allclose(ch.ood_score(logits, "BMA"), -ed.metrics.bma_confidence(logits.softmax(-1)).numpy())
    cfg = {"n_resamples": 50, "seed": 0}
    est = ch.bootstrap(cfg, {"a": (score, is_ood), "b": (score, is_ood)}, {"a": ch.auroc_of, "b": ch.auroc_of})
    assert np.array_equal(est["a"].replicates, est["b"].replicates)  # one resample serves both: paired
    missing = ch.bootstrap(cfg, {"a": np.ones(1)})["a"]  # fewer than two samples: not computable, still an estimate
    assert isinstance(missing, ed.report.Estimate) and math.isnan(missing.value) and missing.interval() is None
    assert ch.preset("tab01_unique", "smoke", verbose=False).n_resamples == 200


def test_timing_heads_are_the_heads_sed_trains_and_bad_names_are_refused():
    """The cost page's ``block`` head is a TokenMLPHead of the stated width (the MLP branch, norms, classifier);
    every timed loss runs one step on it; an unknown head or loss is one sentence."""
    from ensdiv.errors import UnknownNameError
    from ensdiv.models.stack import TokenMLPHead

    head = ch.timing_head("block", 48, 10, 96)
    assert isinstance(head, TokenMLPHead) and head.mlp.fc1.out_features == 96 and head.head.out_features == 10
    assert head(torch.randn(3, 48)).shape == (3, 10)
    for loss in ch.TIMED_LOSSES:
        assert ch.time_steps(3, loss, head="block", steps=1, repeats=1) > 0
    with pytest.raises(UnknownNameError, match="timing head"):
        ch.timing_head("conv", 48, 10, 96)
    with pytest.raises(UnknownNameError, match="timed loss"):
        ch.time_steps(3, "gncl")


def test_one_start_for_every_method_and_distinct_starts_only_for_the_naive_methods():
    """#49: every member of every method starts from the backbone's own head (a shared start, so soups compare like
    with like); a run's seed changes the data order. Naive A2D / DivDis, whose symmetric loss keeps identical starts
    identical, start from distinct seeded random heads; their identical-start runs stay as diagnostics."""
    cfg = ch.preset("tab01_unique", "smoke", verbose=False)
    for method in ("deep_ensemble", "diverse_hp", "sed_gen", "sed_det", "sed_sem", "sed_text"):
        assert {r.method.init for r in ch.method_recipes(cfg, method)} == {"copy"}, method
        assert method in ch.SHARED_START
    de0, de1 = ch.method_recipes(cfg, "deep_ensemble"), ch.method_recipes(cfg, "deep_ensemble", seed=1)
    assert len({r.seeds.order for r in de0}) == cfg.members  # members differ by their data order
    assert not {r.seeds.order for r in de0} & {r.seeds.order for r in de1}  # run 1 shares no member with run 0
    assert ch.method_recipes(cfg, "sed_sem", seed=1)[0].seeds.order != ch.method_recipes(cfg, "sed_sem")[0].seeds.order
    for naive in ("naive_a2d", "naive_divdis"):
        assert ch.method_recipes(cfg, naive)[0].method.init == "seed" and naive not in ch.SHARED_START
        (diag,) = ch.method_recipes(cfg, f"{naive}_shared")
        assert diag.method.init == "copy" and diag.method.loss == naive
    assert cfg.seeds == [0, 1] and ch.preset("tab01_unique", "cpu", verbose=False).seeds == [0, 1, 2, 3, 4, 5]
    assert ch.preset("tab01_unique", "paper", verbose=False).seeds == [0, 1, 2, 3, 4]


def test_evidence_helpers_against_hand_computed_cases():
    """Member correctness, subset means with one paired resampling, the swap null and the exponent null."""
    logits = torch.tensor([[[2.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [0.0, 1.0]], [[3.0, 0.0], [1.0, 0.0]]])
    labels = torch.tensor([0, 1])
    assert ch.member_correct(logits, labels).tolist() == pytest.approx([200 / 3, 200 / 3])
    assert ch.unique_per_image(logits).tolist() == [2.0, 2.0]
    assert ch.correct_per_image(logits, labels).tolist() == [100.0, 100.0]  # mean logits: [5/3, 1/3], [1/3, 2/3]
    values = np.array([0.0, 0.0, 1.0, 1.0, 1.0, 0.0])
    a, b = np.array([1, 1, 1, 0, 0, 0], bool), np.array([0, 0, 1, 1, 1, 0], bool)
    est = ch.subset_means(values, {"a": a, "b": b}, n_resamples=300, rng=np.random.default_rng(0))
    assert est["a"].value == pytest.approx(1 / 3) and est["b"].value == 1.0
    assert est["a"].group == est["b"].group  # one resampling: paired
    null = ch.swap_null(values, a, b, "a", "b", draws=50, n_resamples=20, seed=0)
    assert len({d["a"].value for d in null.draws}) > 1  # images 0, 1, 3, 4 are dealt at random
    same = ch.swap_null(values, a, a, "a", "b", draws=5, n_resamples=20, seed=0)  # nothing to deal
    assert all(d["a"].value == d["b"].value == pytest.approx(1 / 3) for d in same.draws)
    sizes = np.array([2.0, 4.0, 8.0, 16.0])
    reps = [(sizes, 0.01 * sizes ** 2 * (1 + 0.01 * i)) for i in range(3)]
    draws = ch.exponent_null({"k": reps}, k=1.0, draws=20, seed=0).draws
    # an exact power law has no residuals: the null's exponent is exactly the null's k
    assert all(d["k"].value == pytest.approx(1.0) for d in draws)


def test_released_configs_are_mirrored_field_by_field():
    """#30: every field a released config sets is applied to the run that stands for it (optimiser, learning rate,
    weight decay, batch, label smoothing, momentum, |I|, M, λ), or listed as not transferable, with a reason."""
    from ensdiv.chapters.sed.release import OPTIM_FIELDS, STEP_FIELDS

    assert set(ch.RELEASED_CONFIGS) == {"sed_gen", "sed_det", "sed_sem", "sed_m50"}
    for scale in ("smoke", "cpu", "paper"):
        cfg = ch.preset("tab02_generalisation", scale, verbose=False)
        for method, rel in ch.RELEASED_CONFIGS.items():
            (r,) = ch.method_recipes(cfg, method, rel["members"] if method == "sed_m50" else None)
            assert (r.method.loss, r.method.lam, r.method.subset, r.method.members) == (
                "sed", rel["lam"], rel["subset"], rel["members"]), (scale, method)
            for field in OPTIM_FIELDS:
                # the update budget (lr, batch) is the scale's below paper scale: NOT_TRANSFERABLE says why
                want = cfg[field] if scale != "paper" and field in STEP_FIELDS else rel[field]
                assert getattr(r.optim, field) == pytest.approx(want), (scale, method, field)
            applied = {"config", "model", "lam", "subset", "members", *OPTIM_FIELDS}
            assert set(rel) <= applied  # nothing the release sets is left unapplied
    # the README's differences over the §4.1 text, by hand
    gen, det, sem, m50 = (ch.RELEASED_CONFIGS[k] for k in ("sed_gen", "sed_det", "sed_sem", "sed_m50"))
    assert (gen["lam"], gen["label_smoothing"], gen["weight_decay"], gen["batch_size"]) == (0.0, 0.5, 0.1, 32)
    assert (det["lam"], det["label_smoothing"], det["weight_decay"], det["batch_size"]) == (5.0, 0.5, 0.1, 32)
    assert (sem["lam"], sem["batch_size"], sem["lr"], sem["weight_decay"]) == (0.5, 256, 1e-4, 0.01)
    assert (m50["members"], m50["lam"], m50["optimizer"], m50["momentum"], m50["weight_decay"],
            m50["batch_size"]) == (50, 0.0002, "sgd", 0.9, 1e-4, 16)
    assert {"backbone", "epochs", "data", "lr and batch size"} <= set(ch.NOT_TRANSFERABLE)
    # the semantic config at cpu: the scale's lr 1e-3 and batch 64, its own λ and weight decay
    (sem_cpu,) = ch.method_recipes(ch.preset("tab01_unique", "cpu", verbose=False), "sed_sem")
    assert (sem_cpu.optim.lr, sem_cpu.optim.batch_size, sem_cpu.method.lam, sem_cpu.optim.weight_decay) == (
        1e-3, 64, 0.5, 0.01)
    assert all(len(why) > 20 for why in ch.NOT_TRANSFERABLE.values())
    # every released model the README names has a mirrored run
    assert {rel["model"] for rel in ch.RELEASED_CONFIGS.values()} == set(ch.RELEASED_MODELS)
    # the text's variant keeps the scale's own settings and λ = 0.1
    cfg = ch.preset("tab02_generalisation", "cpu", verbose=False)
    (text,) = ch.method_recipes(cfg, "sed_text")
    assert text.method.lam == 0.1 and text.optim.batch_size == cfg.batch_size and text.optim.label_smoothing == 0
    # the large ensembles: the release's M = 50 at paper scale, 20 at cpu (trained once, shown, not counted)
    assert (cfg.large_members, ch.preset("tab02_generalisation", "paper", verbose=False).large_members) == (20, 50)
    # a λ override (the sweep) keeps the rest of the released config
    (swept,) = ch.method_recipes(cfg, "sed_det", lam=1.0)
    assert swept.method.lam == 1.0 and swept.optim.label_smoothing == 0.5


def test_naive_unlabeled_set_is_held_out_from_every_training_image():
    """#30: the naive methods' unlabeled renditions come from Fashion-MNIST training images that neither the frozen
    backbone nor the heads train on (the cpu zoo's 30,000-image subset), compared image by image."""
    from ensdiv.data import ood_sets
    from ensdiv.train.build import load_training_set

    train = ed.get_dataset("fmnist/train")
    held = ood_sets.held_out_train_indices(len(train))
    backbone = ch.backbone_recipe(ch.preset("tab01_unique", "cpu", verbose=False))
    used = load_training_set(backbone)
    assert backbone.data.subset == ood_sets.TRAINED_SUBSET and len(held) == len(train) - len(used)
    # no held-out image equals a training image (rows compared as bytes)
    seen = {bytes(x.numpy().tobytes()) for x in (used.x * 255).round().to(torch.uint8)}
    pick = (train.x[held[:2000]] * 255).round().to(torch.uint8)
    assert not any(bytes(x.numpy().tobytes()) in seen for x in pick)
    assert torch.equal(held, torch.sort(held).values) and len(set(held.tolist())) == len(held)
    # a naive method's recipe reads that set
    (naive,) = ch.method_recipes(ch.preset("tab01_unique", "cpu", verbose=False), "naive_a2d")
    assert naive.method.ood_set == "fmnist-r-train"


def test_the_unlabeled_ood_set_is_part_of_a_naive_models_cache_key():
    """#30: a Heads recipe's unlabeled ``ood_set`` is keyed by its content, as its training set is: changing the
    set's images (as held-out renditions replaced renditions of training images) retrains the naive models
    instead of serving stale ones."""
    from ensdiv.data.registry import registered_fingerprint
    from ensdiv.train import model_cache_config

    cfg = ch.preset("tab01_unique", "smoke", verbose=False)
    (naive,) = ch.method_recipes(cfg, "naive_a2d")
    data = model_cache_config(naive)["data"]
    assert data["fmnist-r-train"] == registered_fingerprint("fmnist-r-train")
    (sed,) = ch.method_recipes(cfg, "sed_det")  # no unlabeled set: nothing extra in its key
    assert "fmnist-r-train" not in model_cache_config(sed)["data"]
