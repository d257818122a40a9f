"""Fidelity of the Packed-Ensembles chapter to the paper and its reference implementation: Table 1's
parameter counts row by row, the "baselines as implemented" table, the reference training recipe and
its blocks, GPU-aware timing (device and dtype reach the timers; rounds paired across models), the
intervals of the compared quantities (runs or a paired bootstrap), deterministic kernels, the sum/mean
member-loss ablation."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.stats
import torch

import ensdiv as ed
from ensdiv.chapters import packed_ensembles as ch
from ensdiv.chapters import zoo
from ensdiv.errors import InvalidInputError, UnknownNameError
from ensdiv.models.efficient import BatchEnsembleConv2d

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks" / "packed-ensembles"


# ---- Table 1's parameter counts: where they are reproduced, and where (and why) not -----------------------
def _counts(arch: str, num_classes: int) -> dict[str, float]:
    return {m: round(ed.count_params(ch.build_method(m, arch=arch, num_classes=num_classes, in_chans=3,
                                                     img_size=32)) / 1e6, 2) for m in ch.METHODS}


# (block) -> methods whose count equals the paper's to its two decimals (the book's landing page lists them)
EXACT = {
    ("cifar10/train", "resnet18"): {"single", "mimo", "packed", "deep_ensemble"},
    ("cifar10/train", "resnet50"): {"single", "mimo", "packed", "deep_ensemble"},
    ("cifar100/train", "resnet18"): {"single", "deep_ensemble"},
    ("cifar100/train", "resnet50"): {"mimo", "deep_ensemble"},
}


@pytest.mark.parametrize("block", list(EXACT))
def test_table1_parameter_counts_match_exactly_on_the_listed_rows_only(block):
    dataset, arch = block
    ours = _counts(arch, 100 if dataset.startswith("cifar100") else 10)
    paper = dict(zip(ch.METHODS, [row[6] for row in ch.TABLE1[block]], strict=True))
    exact = {m for m in ch.METHODS if ours[m] == paper[m]}
    assert exact == EXACT[block], (ours, paper)


def test_masksembles_masks_are_buffers_and_counting_them_does_not_reach_the_papers_count():
    # the reference stores masks as frozen parameters (counted); ours are buffers. Counted, ours give
    # 11.19 M, not the paper's 11.24 M: the rest of the gap is unexplained (the book says so)
    net = ch.build_method("masksembles", arch="resnet18", num_classes=10, in_chans=3, img_size=32)
    single = ch.build_method("single", arch="resnet18", num_classes=10, in_chans=3, img_size=32)
    assert ed.count_params(net) == ed.count_params(single)
    masks = sum(b.numel() for name, b in net.named_buffers() if name.endswith("masks"))
    convs = [m for m in single.modules() if isinstance(m, torch.nn.Conv2d)][1:]  # every conv after the stem
    assert masks == 4 * (sum(c.in_channels for c in convs) + 512)  # + the classifier's input
    assert round((ed.count_params(net) + masks) / 1e6, 2) == 11.19


def test_batchensemble_extra_parameters_are_the_per_member_conv_biases():
    net = ch.build_method("batchensemble", arch="resnet18", num_classes=10, in_chans=3, img_size=32)
    convs = [m for m in net.modules() if isinstance(m, BatchEnsembleConv2d)]
    conv_bias = sum(m.bias.numel() for m in convs)
    assert round(ed.count_params(net) / 1e6, 2) == 11.23  # ours
    assert round((ed.count_params(net) - conv_bias) / 1e6, 2) == 11.21  # the paper's, without them
    # ±1 fast weights by the model's default (BatchEnsemble's own paper; the reference draws N(1, 0.5²))
    r = torch.cat([m.r.flatten() for m in convs])
    assert set(r.unique().tolist()) == {-1.0, 1.0}


@pytest.mark.parametrize("scale", ["smoke", "cpu", "paper"])
@pytest.mark.parametrize("stem", ["tab01_efficient_ensembles", "tab02_imagenet_ood_shift", "appE_ood_criteria",
                                  "fig01_accuracy_vs_speed"])
def test_table1_batchensemble_uses_the_references_fast_weight_init_at_every_scale(stem, scale):
    cfg = ch.preset(stem, scale, verbose=False)
    (be,) = ch.recipes_for("batchensemble", cfg, 0)
    assert be.model.kwargs.get("fast_weight_init") == "normal"
    net = ed.create_model(be.model.name, num_classes=10, in_chans=1, img_size=28, **be.model.kwargs)
    r = torch.cat([m.r.detach().flatten() for m in net.modules() if isinstance(m, BatchEnsembleConv2d)])
    # N(1, 0.5²), not ±1: the sample mean and std within 4 standard errors (the smoke model has few fast weights)
    n = r.numel()
    assert abs(float(r.mean()) - 1.0) < 4 * 0.5 / n**0.5 and abs(float(r.std()) - 0.5) < 4 * 0.5 / (2 * n) ** 0.5
    assert not set(r.unique().tolist()) <= {-1.0, 1.0}
    (single,) = ch.recipes_for("single", cfg, 0)
    assert "fast_weight_init" not in single.model.kwargs
    row = ch.baselines_table().set_index(["method", "aspect"]).loc[("BatchEnsemble", "fast-weight initialisation")]
    assert "fast_weight_init='normal'" in row["this book"]


def test_table1_pages_share_one_cpu_budget_the_zoos_recipe():
    """Table 1's models (tab01, tab02, fig01, appE) are trained once, on the zoo's recipe; Fig. 6-7 and App. F
    keep the quick budget (they compare PE variants or seeds with each other)."""
    zoo_base = zoo.zoo_recipes("cpu", "arch/resnet")["arch/resnet"]
    keys = ("train_subset", "epochs", "batch_size", "lr", "weight_decay", "augment", "seeds")
    cfgs = {s: ch.preset(s, "cpu", verbose=False) for s in ("tab01_efficient_ensembles", "tab02_imagenet_ood_shift",
                                                            "appE_ood_criteria", "fig01_accuracy_vs_speed")}
    first = {k: cfgs["tab01_efficient_ensembles"][k] for k in keys}
    assert all({k: c[k] for k in keys} == first for c in cfgs.values())
    (single,) = ch.recipes_for("single", cfgs["tab01_efficient_ensembles"], 0)
    for part in ("subset", "augment"):
        assert getattr(single.data, part) == getattr(zoo_base.data, part)
    for part in ("batch_size", "lr", "weight_decay", "schedule", "optimizer"):
        assert getattr(single.optim, part) == getattr(zoo_base.optim, part)
    assert first["epochs"] == ch.TABLE1_EPOCHS
    quick = ch.preset("fig06_07_alpha_gamma", "cpu", verbose=False)
    assert (quick["train_subset"], quick["lr"]) == (10000, 0.05)


@pytest.mark.parametrize("scale", ["smoke", "cpu", "paper"])
def test_table2_packs_the_papers_imagenet_setting_at_paper_and_reuses_table1_below(scale):
    cfg = ch.preset("tab02_imagenet_ood_shift", scale, verbose=False)
    t1 = ch.preset("tab01_efficient_ensembles", scale, verbose=False)
    (pe,) = ch.recipes_for("packed", cfg, 0)
    if scale == "paper":
        assert (pe.model.kwargs["alpha"], pe.model.kwargs["gamma"]) == (3, 1)  # Table 2's PE-(3, 4, 1)
        return
    # smoke and cpu: every model, PE included (PE-(2, 4, 2) at smoke, the reference layout PE-(2, 4, 1) at cpu),
    # is one of Table 1's recipes (a cache hit)
    assert (pe.model.kwargs["alpha"], pe.model.kwargs["gamma"]) == (2, {"smoke": 2, "cpu": 1}[scale])
    for method in ch.METHODS:
        for seed in cfg["seeds"]:
            assert ch.recipes_for(method, cfg, seed) == ch.recipes_for(method, t1, seed)


def test_baselines_table_has_every_method_and_its_columns():
    t = ch.baselines_table()
    assert {"BatchEnsemble", "MIMO", "Masksembles", "Packed-Ensembles"} <= set(t["method"])
    assert list(t.columns[:2]) == ["method", "aspect"] and len(t.columns) == 5
    assert t.notna().all().all()


# ---- the reference recipe and the blocks of Table 1 --------------------------------------------------------
def test_paper_recipe_is_the_reference_one():
    cfg = ch.preset("tab01_efficient_ensembles", "paper", verbose=False)
    r = ch.base_recipe(cfg)
    assert (r.optim.epochs, r.optim.lr, r.optim.weight_decay, r.optim.batch_size) == (75, 0.05, 5e-4, 128)
    assert (r.optim.schedule, r.optim.milestones, r.optim.decay_all) == ("multistep", [25, 50], True)
    assert (r.optim.optimizer, r.optim.momentum, r.optim.nesterov, r.optim.lr_decay) == ("sgd", 0.9, False, 0.1)
    assert (r.data.augment, r.data.crop_pad, r.data.dataset) == ("flipcrop", 4, "cifar10/train")


@pytest.mark.parametrize("dataset,arch", list(ch.PAPER_BLOCKS))
def test_dataset_and_arch_select_the_block(dataset, arch):
    cfg = ch.preset("tab01_efficient_ensembles", "paper", dataset=dataset, arch=arch, verbose=False)
    block = ch.PAPER_BLOCKS[(dataset, arch)]
    assert (cfg.epochs, cfg.lr, cfg.weight_decay, cfg.milestones) == (
        block["epochs"], block["lr"], block["weight_decay"], block["milestones"])
    assert cfg.test_set == dataset.replace("train", "test")
    (recipe,) = ch.recipes_for("single", cfg, 0)
    assert recipe.model.name == f"single_{arch}" and recipe.data.dataset == dataset
    paper = ch.table1_paper(cfg)
    assert paper.loc["Packed-Ensembles", "params_M"] == ch.TABLE1[(dataset, arch)][4][6]
    # the reference (torch-uncertainty): heavy-ball and x0.1 for CIFAR-10 / ResNet-18, else Nesterov and x0.2
    reference_like = (dataset, arch) == ("cifar10/train", "resnet18")
    assert (recipe.optim.nesterov, recipe.optim.lr_decay) == ((False, 0.1) if reference_like else (True, 0.2))
    assert (recipe.optim.schedule, recipe.optim.decay_all) == ("multistep", True)
    differences = " ".join(ch.recipe_differences(cfg))
    assert "Nesterov" not in differences and "overridden" not in differences


def test_recipe_differences_names_an_override_of_the_block():
    cfg = ch.preset("tab01_efficient_ensembles", "paper", dataset="cifar100/train", lr_decay=0.1, verbose=False)
    assert ch.base_recipe(cfg).optim.lr_decay == 0.1
    assert any("lr_decay 0.1 (reference: 0.2)" in d for d in ch.recipe_differences(cfg))


def test_paper_block_learning_rate_around_its_milestones():
    # CIFAR-100 / ResNet-18: 0.1, x0.2 at epochs 60, 120 and 160 of 200 (hand-computed values)
    cfg = ch.preset("tab01_efficient_ensembles", "paper", dataset="cifar100/train", verbose=False)
    o = ch.base_recipe(cfg).optim
    lrs = {e: o.lr * ed.train.lr_factor(e / o.epochs, schedule=o.schedule, decay=o.lr_decay,
                                        milestones=tuple(m / o.epochs for m in o.milestones))
           for e in (0, 59, 60, 119, 120, 159, 160, 199)}
    assert lrs == pytest.approx({0: 0.1, 59: 0.1, 60: 0.02, 119: 0.02, 120: 0.004, 159: 0.004,
                                 160: 0.0008, 199: 0.0008})


def test_explicit_overrides_win_over_the_block_and_late_milestones_never_fire():
    cfg = ch.preset("tab01_efficient_ensembles", "paper", dataset="cifar100/train", epochs=1, lr=0.01,
                    verbose=False)
    assert (cfg.epochs, cfg.lr, cfg.test_set) == (1, 0.01, "cifar100/test")
    r = ch.base_recipe(cfg)  # milestones 60/120/160 after epoch 1: torch's MultiStepLR keeps lr constant
    assert (r.optim.schedule, r.optim.milestones) == ("constant", [])
    r = ch.base_recipe({**cfg, "epochs": 100})
    assert (r.optim.schedule, r.optim.milestones) == ("multistep", [60])


def test_unknown_block_is_one_sentence():
    with pytest.raises(UnknownNameError, match="Table 1 block"):
        ch.preset("tab01_efficient_ensembles", "paper", arch="resnet34", verbose=False)


def test_table1_paper_at_cpu_scale_is_the_cifar10_resnet18_block():
    cfg = ch.preset("tab01_efficient_ensembles", "cpu", verbose=False)
    t = ch.table1_paper(cfg)
    assert t.loc["Packed-Ensembles", "nll"] == 0.178 and t.loc["Deep Ensembles", "nll"] == 0.156
    assert list(t.index) == [ch.METHOD_LABELS[m] for m in ch.METHODS]


@pytest.mark.parametrize("block", list(ch.TABLE1))
def test_table1_nll_check_holds_on_every_block_of_the_paper_and_fails_with_pe_at_the_single_model(block):
    """Table 1's "PE's NLL is closer to DE's than to the single model's" (a non-inferiority margin of half DE's
    gain; it replaced "within 10 % of DE's", which the paper's own CIFAR-10 / ResNet-18 numbers failed)."""
    rows = dict(zip(ch.METHODS, ch.TABLE1[block], strict=True))
    nll = {m: r[1] for m, r in rows.items()}
    check = ed.report.Check("mid", needs=("PE", "DE", "single"), region=("<", 0.0),
                            statistic=lambda v: v["PE"] - (v["DE"] + v["single"]) / 2)
    vals = {"PE": nll["packed"], "DE": nll["deep_ensemble"], "single": nll["single"]}
    assert ed.report.evaluate(check, vals).result == "pass"
    assert ed.report.evaluate(check, {**vals, "PE": vals["single"]}).result == "fail"
    # "within 1 point of DE" (accuracy, AUPR, AUROC) holds on the paper's numbers except on CIFAR-100 / ResNet-18,
    # where PE trails DE by 1.5 to 2.6 points: there the calibration row leaves those checks uncounted
    near = ed.report.noninferior("PE", "DE", margin=1.0)
    results = {ed.report.evaluate(near, {"PE": rows["packed"][i], "DE": rows["deep_ensemble"][i]}).result
               for i in (0, 3, 4)}
    assert results == ({"fail"} if block == ("cifar100/train", "resnet18") else {"pass"})


# ---- intervals: seeds or a paired bootstrap over the evaluation images --------------------------------------
def test_estimates_pair_the_runs_when_there_are_enough_of_them():
    import pandas as pd

    cfg = {"seeds": [0, 1, 2], "ood_set": "digits"}
    runs = pd.DataFrame([{"method": m, "seed": s, "ood_set": "digits", "criterion": c, "acc": base + s,
                          "aupr": 50.0 + s + (c == "mi")}
                         for m, base in (("packed", 90.0), ("single", 89.0)) for s in (2, 0, 1) for c in ("msp", "mi")])
    est, variance = ch.estimates(cfg, runs, {"pe": ch.Measure("packed", "acc"), "single": ch.Measure("single", "acc"),
                                             "mi": ch.Measure("packed", "aupr", criterion="mi")})
    assert est["pe"].replicates.tolist() == [90.0, 91.0, 92.0] and est["pe"].source == "training seeds"
    assert est["mi"].replicates.tolist() == [51.0, 52.0, 53.0]
    out = ed.report.evaluate(ed.report.greater("pe", "single"), est)
    assert out.result == "pass" and out.interval == (1.0, 1.0)  # paired by run: the difference is always 1
    assert "training seeds" in variance
    with pytest.raises(InvalidInputError, match="every seed"):
        ch.estimates(cfg, runs, {"x": ch.Measure("mimo", "acc")})


def test_bootstrap_estimates_equal_the_tables_and_are_paired():
    cfg = ch.preset("tab02_imagenet_ood_shift", "smoke", verbose=False)
    runs = ch.compare_methods(cfg, methods=("single",), ood_sets=cfg.ood_sets, shift_sets=cfg.shift_sets,
                              criteria=["msp", "mi"])
    wanted = {"acc": ch.Measure("single", "acc"), "nll": ch.Measure("single", "nll"),
              "ece": ch.Measure("single", "ece"),
              "aupr": ch.Measure("single", "aupr", ood_set="textures/frost"),
              "rAcc": ch.Measure("single", "rAcc", shift_set="fmnist-r"), "same": ch.Measure("single", "acc")}
    est, variance = ch.estimates(cfg, runs, wanted, n_resamples=30)
    row = runs[(runs.ood_set == "textures/frost") & (runs.criterion == "msp")].iloc[0]
    for name, col in (("acc", "acc"), ("nll", "nll"), ("ece", "ece"), ("aupr", "aupr"), ("rAcc", "rAcc[fmnist-r]")):
        assert est[name].value == pytest.approx(row[col], rel=1e-5, abs=1e-6), name
    assert len({e.group for e in est.values()}) == 1 and est["acc"].source == "evaluation samples"
    assert (est["acc"].replicates == est["same"].replicates).all() and est["acc"].replicates.std() > 0
    assert "bootstrap" in variance and "fmnist-r" in variance


def test_measure_rejects_what_it_cannot_compute():
    with pytest.raises(UnknownNameError):
        ch.Measure("packed", "brier")
    with pytest.raises(InvalidInputError, match="shift_set"):
        ch.Measure("packed", "rAcc")
    with pytest.raises(UnknownNameError):
        ch.Measure("packed", "aupr", criterion="energy")


def test_disagreement_per_image_averages_to_the_metric():
    logits = torch.randn(3, 50, 4, generator=torch.Generator().manual_seed(0))
    per_image = ch.disagreement_per_image(logits)
    assert per_image.shape == (50,) and set(per_image.round(6)) <= {0.0, round(1 / 3, 6), round(2 / 3, 6), 1.0}
    assert per_image.mean() == pytest.approx(float(ed.metrics.disagreement(logits.argmax(-1))))
    with pytest.raises(InvalidInputError, match="two members"):
        ch.disagreement_per_image(logits[:1])


# ---- member-loss ablation ----------------------------------------------------------------------------------
def test_member_loss_sum_reaches_the_packed_model_only():
    cfg = ch.preset("tab01_efficient_ensembles", "smoke", verbose=False)
    (r,) = ch.recipes_for("packed", cfg, 0, member_loss="sum")
    assert r.model.kwargs["member_loss"] == "sum"
    model = ed.create_model(r.model.name, num_classes=10, in_chans=1, img_size=28, **r.model.kwargs)
    assert model.member_loss == "sum"
    (plain,) = ch.recipes_for("packed", cfg, 0, member_loss="mean")
    assert "member_loss" not in plain.model.kwargs  # the default: same recipe (and cache) as Table 1's PE
    with pytest.raises(InvalidInputError, match="packed model only"):
        ch.recipes_for("single", cfg, 0, member_loss="sum")


# ---- timing: device and dtype reach the timers -------------------------------------------------------------
def test_speed_table_passes_device_dtype_threads_and_training_to_the_timer(monkeypatch):
    """speed_table times through ed.models.throughput_rounds (a process per model): one call per dtype with the
    device, rounds, batch and threads asked for; training only in float32."""
    calls = []

    def fake_rounds(models, shape, **kw):
        calls.append(kw)
        return [{"round": r, "model": m, "position": i, "warmup runs": 2, "inference images/s": 100.0,
                 **({"training images/s": 10.0} if kw["train_steps"] else {})}
                for r in range(kw["rounds"]) for i, m in enumerate(models)]

    monkeypatch.setattr(ed.models, "throughput_rounds", fake_rounds)
    nets = {"a": torch.nn.Linear(4, 2), "b": torch.nn.Linear(4, 2)}
    df = ch.speed_table(nets, (4,), device="cuda:1", batch_size=3, repeats=2, dtypes=["float32", "float16"],
                        train_batch=2, train_steps=5, threads=1)
    assert [(c["dtype"], c["device"], c["rounds"], c["batch_size"], c["threads"], c["train_steps"]) for c in calls] \
        == [("float32", "cuda:1", 2, 3, 1, 5), ("float16", "cuda:1", 2, 3, 1, 0)]
    assert df["device"].eq("cuda:1").all() and df["threads"].eq(1).all()
    assert df["training images/s"].isna().tolist() == [False] * 4 + [True] * 4


def test_speed_table_ratios_pair_the_rounds(monkeypatch):
    rates = iter([100.0, 50.0, 120.0, 60.0, 80.0, 40.0])  # round by round: a, b

    def fake_rounds(models, shape, **kw):
        return [{"round": r, "model": m, "position": i, "warmup runs": 1, "inference images/s": next(rates)}
                for r in range(kw["rounds"]) for i, m in enumerate(models)]

    monkeypatch.setattr(ed.models, "throughput_rounds", fake_rounds)
    nets = {"a": torch.nn.Linear(4, 2), "b": torch.nn.Linear(4, 2)}
    df = ch.speed_table(nets, (4,), device="cpu", batch_size=3, repeats=3)
    assert df["round"].tolist() == [0, 0, 1, 1, 2, 2]
    ratio = ch.speed_ratio(df, "a", "b")
    assert ratio.source == "timing repeats" and ratio.replicates.tolist() == [2.0, 2.0, 2.0]
    assert ratio.interval() == (2.0, 2.0)  # the timings move, their ratio does not
    summary = ch.speed_summary(df).set_index("model")
    assert summary.loc["a", "inference images/s"] == 100.0 and summary.loc["a", "rounds"] == 3
    with pytest.raises(UnknownNameError, match="timed model"):
        ch.speed_ratio(df, "a", "c")


def test_speed_ratio_over_process_sets_is_one_value_per_set_with_a_student_t_interval(monkeypatch):
    # two process sets of two rounds each; within a set the ratio barely moves, between sets it does (the
    # run-to-run spread of a shared CPU)
    rates = iter([100.0, 50.0, 102.0, 50.0,  # set 0: ratios 2.00, 2.04
                  60.0, 50.0, 61.0, 50.0,  # set 1: ratios 1.20, 1.22
                  90.0, 50.0, 88.0, 50.0])  # set 2: ratios 1.80, 1.76

    def fake_rounds(models, shape, **kw):
        return [{"round": r, "model": m, "position": i, "warmup runs": 1, "inference images/s": next(rates)}
                for r in range(kw["rounds"]) for i, m in enumerate(models)]

    monkeypatch.setattr(ed.models, "throughput_rounds", fake_rounds)
    nets = {"a": torch.nn.Linear(4, 2), "b": torch.nn.Linear(4, 2)}
    df = ch.speed_table(nets, (4,), device="cpu", batch_size=3, repeats=2, process_sets=3)
    assert df["process set"].tolist() == [0] * 4 + [1] * 4 + [2] * 4 and df["round"].tolist() == [0, 0, 1, 1] * 3
    ratio = ch.speed_ratio(df, "a", "b")
    by_hand = np.array([(2.0 + 2.04) / 2, (1.2 + 1.22) / 2, (1.8 + 1.76) / 2])  # the mean ratio of each set
    assert ratio.replicates == pytest.approx(by_hand) and ratio.source == "timing repeats"
    half = scipy.stats.t.ppf(0.95, 2) * by_hand.std(ddof=1) / np.sqrt(3)
    assert ratio.interval() == pytest.approx((by_hand.mean() - half, by_hand.mean() + half))
    # the per-round ratios of all sets pooled would claim a far narrower interval than the sets support
    pooled = ed.report.from_seeds([2.0, 2.04, 1.2, 1.22, 1.8, 1.76], source="timing repeats").interval()
    assert pooled[1] - pooled[0] < ratio.interval()[1] - ratio.interval()[0]
    assert ch.speed_summary(df).set_index("model").loc["a", "rounds"] == 6
    with pytest.raises(InvalidInputError, match="at least one process set"):
        ch.speed_table(nets, (4,), device="cpu", batch_size=3, repeats=2, process_sets=0)


def test_timing_pages_need_two_rounds_at_least():
    with pytest.raises(InvalidInputError, match="at least 2"):
        ch.preset("fig01_accuracy_vs_speed", "cpu", verbose=False, throughput_repeats=1)
    with pytest.raises(InvalidInputError, match="at least 2"):
        ch.preset("appH_training_speed", "cpu", verbose=False, repeats=1)


@pytest.mark.slow
def test_speed_table_times_on_the_cpu_in_16_bits_and_restores_the_model():
    net = ch.build_method("packed", arch="test", num_classes=10, in_chans=1, img_size=28, num_estimators=2)
    df = ch.speed_table({"pe": net}, (1, 28, 28), device="cpu", batch_size=2, repeats=1,
                        dtypes=["float32", "bfloat16"], train_batch=2, train_steps=1)
    assert (df["inference images/s"] > 0).all() and df.loc[0, "training images/s"] > 0
    p = next(net.parameters())
    assert p.dtype == torch.float32 and p.device.type == "cpu"


def test_speed_table_rejects_an_unknown_dtype():
    with pytest.raises(UnknownNameError, match="float8"):
        ch.speed_table({"a": torch.nn.Linear(4, 2)}, (4,), device="cpu", batch_size=2, repeats=1, dtypes=["float8"])


def test_timing_device_is_the_gpu_when_there_is_one(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert ch.timing_device() == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert ch.timing_device() == "cpu"


@pytest.mark.parametrize("stem", ["fig01_accuracy_vs_speed", "appH_training_speed"])
def test_fig01_and_appH_time_on_the_timing_device(stem):
    """The notebooks time through ``ch.speed_table(..., device=device)`` with ``device = ch.timing_device()``
    (never the bare timers, which default to the CPU)."""
    cells = json.loads((NOTEBOOKS / f"{stem}.ipynb").read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert "device = ch.timing_device()" in code
    assert "ch.speed_table(" in code and "device=device" in code
    assert "inference_throughput(" not in code and "training_throughput(" not in code


# ---- deterministic kernels (App. F) ------------------------------------------------------------------------
def test_deterministic_kernels_change_nothing_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    before = torch.are_deterministic_algorithms_enabled()
    with ch.deterministic_kernels(True) as changed:
        assert changed is False and torch.are_deterministic_algorithms_enabled() == before


def test_deterministic_kernels_set_and_restore_the_switches(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    assert not torch.are_deterministic_algorithms_enabled()
    with ch.deterministic_kernels(True) as changed:
        assert changed is True and torch.are_deterministic_algorithms_enabled()
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8" and torch.backends.cudnn.benchmark is False
    assert not torch.are_deterministic_algorithms_enabled() and "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    with ch.deterministic_kernels(False) as changed:
        assert changed is False and not torch.are_deterministic_algorithms_enabled()


def test_mean_std_shows_a_single_run_without_a_spread():
    df = pd.DataFrame({"method": ["a", "a", "b"], "seed": [0, 1, 0], "acc": [1.0, 3.0, 5.0]})
    out = ch.mean_std(df)
    assert out.loc["a", "acc"] == "2.0 ± 1.414"  # std with ddof=1: sqrt(((1-2)² + (3-2)²) / 1)
    assert out.loc["b", "acc"] == "5.0"  # one run: no "± 0.0"
