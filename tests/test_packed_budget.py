"""Packed-Ensembles Table 1's budget curve: the plateau rule on hand-made curves, the curve on smoke models."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from ensdiv.chapters import packed_ensembles as ch
from ensdiv.errors import InvalidInputError


def _curve(rows):
    return pd.DataFrame([{"method": m, "epochs": e, "val_acc": a} for m, e, a in rows])


def test_plateau_is_the_cheapest_budget_where_every_method_is_within_tolerance():
    # single plateaus at 2 epochs (90.0 best at 8); PE needs 4 (87.5 vs its best 88.0)
    curve = _curve([("single", 1, 88.0), ("single", 2, 89.5), ("single", 4, 89.8), ("single", 8, 90.0),
                    ("packed", 1, 80.0), ("packed", 2, 85.0), ("packed", 4, 87.5), ("packed", 8, 88.0)])
    got = ch.plateau_budget(curve, tolerance=1.0)
    assert got["epochs"] == 4 and got["within"]
    assert got["gap"] == {"packed": 0.5, "single": pytest.approx(0.2)}
    assert got["still_rising"] == []
    assert ch.plateau_budget(curve, tolerance=0.1)["epochs"] == 8  # only the best budget is that close


def test_a_method_still_gaining_at_the_largest_budget_is_named():
    curve = _curve([("single", 2, 89.0), ("single", 4, 89.5), ("packed", 2, 80.0), ("packed", 4, 84.0)])
    got = ch.plateau_budget(curve, tolerance=1.0)
    assert got["epochs"] == 4 and got["still_rising"] == ["packed"]


def test_methods_peaking_at_different_budgets_get_the_smallest_worst_gap():
    # single peaks early then degrades; PE peaks late: no budget has both within 1 point
    curve = _curve([("single", 2, 90.0), ("single", 4, 88.5), ("single", 8, 87.0),
                    ("packed", 2, 84.0), ("packed", 4, 86.5), ("packed", 8, 88.0)])
    got = ch.plateau_budget(curve, tolerance=1.0)
    # worst gaps: 2 -> 4.0, 4 -> 1.5, 8 -> 3.0
    assert got["epochs"] == 4 and not got["within"] and got["gap"] == {"packed": 1.5, "single": 1.5}


def test_a_rising_curve_is_not_converged_and_a_flat_one_is():
    # rising: both gain 1.5-3 points per doubling up to the largest budget; the largest budget is "within" of
    # its own best, so only the slope between the two largest budgets can say "not converged"
    rising = _curve([("single", 1, 84.0), ("single", 2, 87.0), ("single", 4, 89.5), ("single", 8, 91.5),
                     ("packed", 1, 82.0), ("packed", 2, 86.0), ("packed", 4, 88.5), ("packed", 8, 90.5)])
    got = ch.plateau_budget(rising, tolerance=1.0)
    assert got["epochs"] == 8 and got["within"] and not got["converged"]
    assert sorted(got["still_rising"]) == ["packed", "single"]
    text = ch.plateau_sentence(got, 2)
    assert text.startswith("Not converged at 2 epochs") and "below the cheapest budget" in text
    # flat: within 1 point from 2 epochs on, at most 0.3 gained between 4 and 8
    flat = _curve([("single", 1, 84.0), ("single", 2, 89.5), ("single", 4, 89.9), ("single", 8, 90.1),
                   ("packed", 1, 82.0), ("packed", 2, 88.6), ("packed", 4, 89.2), ("packed", 8, 89.5)])
    got = ch.plateau_budget(flat, tolerance=1.0)
    assert got["epochs"] == 2 and got["converged"] and got["still_rising"] == []
    assert ch.plateau_sentence(got, 2).startswith("Converged")
    assert ch.plateau_sentence(got, 1).startswith("Not converged at 1 epochs")
    # one budget alone never shows a plateau
    assert not ch.plateau_budget(_curve([("single", 8, 90.0)]))["converged"]


def test_the_record_of_the_first_seed_serves_a_preset_of_several_seeds(tmp_path):
    cfg = ch.preset("tab01_efficient_ensembles", "cpu", verbose=False)
    assert len(cfg["seeds"]) >= 4  # several seeds: at least the fewest whose seed-swap null can count
    recorded, note = ch.recorded_curve(cfg, _record(tmp_path, cfg, seeds=[0]))
    assert len(recorded) == 4, note
    other, note = ch.recorded_curve(cfg, _record(tmp_path, cfg, seeds=[1]))
    assert other.empty and "seeds differ" in note


def test_plateau_rejects_an_empty_curve_and_a_negative_tolerance():
    with pytest.raises(InvalidInputError, match="non-empty"):
        ch.plateau_budget(_curve([]).reindex(columns=["method", "epochs", "val_acc"]))
    with pytest.raises(InvalidInputError, match=">= 0"):
        ch.plateau_budget(_curve([("single", 1, 80.0)]), tolerance=-1)


def test_budget_curve_rejects_a_budget_below_one_epoch():
    cfg = ch.preset("tab01_efficient_ensembles", "smoke", verbose=False)
    with pytest.raises(InvalidInputError, match="epochs >= 1"):
        ch.budget_curve(cfg, epochs=[0, 1])
    with pytest.raises(InvalidInputError, match="epochs >= 1"):
        ch.budget_curve(cfg, epochs=[])


@pytest.mark.slow
def test_budget_curve_trains_each_budget_as_its_own_run_and_scores_validation(tmp_path, monkeypatch):
    monkeypatch.setenv("ENSDIV_CACHE", str(tmp_path))
    cfg = ch.preset("tab01_efficient_ensembles", "smoke", verbose=False)
    curve = ch.budget_curve(cfg, epochs=[2, 1, 2], methods=("single",), val_set="fmnist/val")
    assert curve[["method", "epochs"]].values.tolist() == [["single", 1], ["single", 2]]
    assert curve.images_seen.tolist() == [cfg["train_subset"], 2 * cfg["train_subset"]]
    # each budget is its own run, scored like Table 1 (the averaged softmax's accuracy on fmnist/val)
    val = ch.eval_set(cfg, "fmnist/val", n=0)
    for e, acc in zip(curve.epochs, curve.val_acc, strict=True):
        (r,) = ch.recipes_for("single", {**cfg, "epochs": int(e)}, cfg["seeds"][0])
        assert r.optim.epochs == e
        logits = ch.method_logits([r], val)
        naive = 100 * float((logits[0].argmax(-1) == val.y).float().mean())
        assert acc == pytest.approx(naive)


def _record(tmp_path, cfg, **recipe_changes):
    import json

    recipe = {k: cfg[k] for k in ch.CURVE_RECIPE_KEYS} | recipe_changes
    rows = [{"method": m, "epochs": e, "images_seen": e * 30000, "val_acc": acc}
            for m, e, acc in [("single", 1, 84.7), ("packed", 1, 82.5), ("single", 8, 92.2), ("packed", 8, 91.1)]]
    path = tmp_path / "packed_budget.json"
    path.write_text(json.dumps({"machine": {"when": "2026-11-26 04:32"}, "recipe": recipe, "curve": rows}))
    return path


def test_the_record_completes_this_runs_curve_and_is_compared_where_both_measured(tmp_path):
    cfg = ch.preset("tab01_efficient_ensembles", "cpu", verbose=False)
    assert cfg["budget_epochs"] == [ch.TABLE1_EPOCHS] and cfg["budget_record"] == ch.RECORD
    recorded, note = ch.recorded_curve(cfg, _record(tmp_path, cfg))
    assert len(recorded) == 4 and "2026-11-26 04:32" in note
    measured = pd.DataFrame([{"method": "single", "epochs": 8, "images_seen": 240000, "val_acc": 92.0},
                             {"method": "packed", "epochs": 8, "images_seen": 240000, "val_acc": 91.5}])
    curve = ch.with_record(measured, recorded)
    assert curve[["method", "epochs", "source"]].values.tolist() == [
        ["packed", 1, "recorded"], ["single", 1, "recorded"], ["packed", 8, "this run"], ["single", 8, "this run"]]
    ours = curve[curve.source == "this run"].set_index("method")
    assert ours.loc["packed", "val_acc"] == 91.5 and ours.loc["packed", "recorded_val_acc"] == 91.1  # run, not record
    assert curve[curve.source == "recorded"].recorded_val_acc.isna().all()
    assert ch.plateau_budget(curve)["epochs"] == 8
    # nothing recorded: this run's curve alone; nothing measured: the record alone
    assert ch.with_record(measured, None).source.tolist() == ["this run"] * 2
    assert ch.with_record(None, recorded).source.tolist() == ["recorded"] * 4


def test_a_record_of_another_recipe_or_no_record_is_not_used(tmp_path):
    cfg = ch.preset("tab01_efficient_ensembles", "cpu", verbose=False)
    other, note = ch.recorded_curve(cfg, _record(tmp_path, cfg, lr=0.05, train_subset=10000))
    assert other.empty and "train_subset, lr differ" in note
    missing, note = ch.recorded_curve(cfg, tmp_path / "nope.json")
    assert missing.empty and "No recorded budget curve" in note
    (tmp_path / "bad.json").write_text("{not json")
    assert ch.recorded_curve(cfg, tmp_path / "bad.json")[0].empty
    with pytest.raises(InvalidInputError, match="both are empty"):
        ch.with_record(None, missing)


def test_the_committed_record_holds_this_presets_single_model_curve():
    """book/data/packed_budget.json (what a cold book reads instead of retraining budgets 1, 2, 4) was made with
    the cpu preset's recipe but PE-(2, 4, 2); Table 1 now trains PE-(2, 4, 1), so only the single model's curve
    is read (re-run benchmarks/bench_packed_budget.py to record PE's too)."""
    from ensdiv.paths import project_root

    cfg = ch.preset("tab01_efficient_ensembles", "cpu", verbose=False)
    recorded, note = ch.recorded_curve(cfg, project_root() / ch.RECORD)
    single = recorded[recorded.method == "single"]
    assert sorted(set(single.epochs)) == [1, 2, 4, 8], note
    assert set(recorded.method) <= {"single", "packed"}


def test_a_record_of_another_pe_serves_only_the_single_models_curve(tmp_path):
    cfg = ch.preset("tab01_efficient_ensembles", "cpu", verbose=False)
    other_pe, note = ch.recorded_curve(cfg, _record(tmp_path, cfg, gamma=cfg["gamma"] + 1))
    assert other_pe.method.tolist() == ["single", "single"] and other_pe.val_acc.tolist() == [84.7, 92.2]
    assert "gamma differ" in note and "single model's budgets" in note
    # a key the single model reads (the learning rate) with PE's: nothing is used
    both, note = ch.recorded_curve(cfg, _record(tmp_path, cfg, gamma=cfg["gamma"] + 1, lr=0.05))
    assert both.empty and "lr, gamma differ" in note
    # PE measured by this run at one budget, the single model recorded at four: the single model, still rising
    # between its two largest budgets, says "not converged" on its own
    measured = pd.DataFrame([{"method": "packed", "epochs": 2, "images_seen": 60000, "val_acc": 86.0}])
    choice = ch.plateau_budget(ch.with_record(measured, other_pe))
    assert choice["still_rising"] == ["single"] and not choice["converged"]


def test_table1_at_cpu_trains_the_reference_layout_and_meets_the_capacity_premise():
    cfg = ch.preset("tab01_efficient_ensembles", "cpu", verbose=False)
    assert cfg["gamma"] == ch.TABLE1_GAMMA == 1
    test = ch.eval_set(cfg, n=8)
    pe, single = ch.build_for("packed", cfg, test), ch.build_for("single", cfg, test)
    got = ch.capacity_premise(pe, single, alpha=cfg["alpha"], members=cfg["num_estimators"], gamma=cfg["gamma"])
    # α·16 = 32 channels in M = 4 groups: 8, half of the single model's 16, as the paper's ResNet-18 PE
    assert got.met and got.measured["PE narrowest group (channels)"] == 8


@pytest.mark.parametrize("stem", ["fig06_07_alpha_gamma", "appF_sources_of_diversity"])
def test_pages_whose_design_cannot_decide_train_nothing_at_cpu(stem):
    assert ch.preset(stem, "cpu", verbose=False)["train"] is False
    assert ch.preset(stem, "smoke", verbose=False)["train"] is True
    assert ch.preset(stem, "paper", verbose=False)["train"] is True
    with pytest.raises(InvalidInputError, match="'train' .* must be a boolean"):
        ch.preset(stem, "cpu", verbose=False, train="yes")


def test_capacity_premise_compares_the_narrowest_group_with_the_papers_resnet18_pe():
    from ensdiv.models.packed_resnet import packed_resnet

    def small(alpha, members, gamma):
        return packed_resnet("small", alpha=alpha, num_estimators=members, gamma=gamma, in_chans=1, img_size=28,
                             widths=[16, 32, 64])

    single = small(1, 1, 1)
    # γ = 2 in every layer of 16-32-64: α·16 = 32 channels in M·γ = 8 groups -> 4 (0.25 of the single model's 16);
    # the paper's ResNet-18 PE-(2,4,2) keeps γ = 1 below 64 channels per group: 128 / 4 = 32 (0.5 of 64)
    fine = ch.capacity_premise(small(2, 4, 2), single, alpha=2, members=4, gamma=2)
    assert not fine.met and fine.measured["PE narrowest group (channels)"] == 4
    assert fine.measured["paper's ResNet-18 PE: narrowest group / single model's"] == 0.5
    assert "premise 'capacity' unmet" in ch.unmet([fine]) and "capacity to be divided" in ch.unmet([fine])
    # the reference's layout at this width (γ = 1): 32 / 4 = 8 channels, 0.5, the paper's ratio
    assert ch.capacity_premise(small(2, 4, 1), single, alpha=2, members=4, gamma=2).met
    assert ch.premise_facts([fine])["premise capacity met"] is False
    with pytest.raises(InvalidInputError, match="no convolution after its stem"):
        ch.narrowest_group(torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.Linear(4, 2)))


def test_converged_premise_reads_the_plateau_test_and_names_its_sentence():
    flat = {"converged": True, "epochs": 2}
    assert ch.converged_premise(flat, 2).met and not ch.converged_premise(flat, 1, "Not converged at 1").met
    rising = ch.converged_premise({"converged": False, "epochs": 8}, 8, "Not converged at 8 epochs (rising)")
    assert not rising.met and "Not converged at 8 epochs" in ch.unmet([rising])
    assert ch.converged_premise(None, 90).met  # the reference schedule: no curve to test
    assert ch.unmet([ch.converged_premise(flat, 2)]) == ""


@pytest.mark.slow
def test_a_page_reading_table1s_models_reads_their_convergence(tmp_path, monkeypatch):
    paper = ch.preset("tab02_imagenet_ood_shift", "paper", verbose=False)
    assert ch.converged_for(paper).met  # the reference schedules: no curve to read
    monkeypatch.setenv("ENSDIV_CACHE", str(tmp_path))
    cfg = ch.preset("tab02_imagenet_ood_shift", "smoke", verbose=False)
    got = ch.converged_for(cfg)
    # one budget of each method trained here and no record of this recipe: no plateau can be seen
    assert not got.met and "measured at one budget only" in got.why
    assert got.measured == {"Table 1 epochs": cfg["epochs"], "plateau budget (epochs)": cfg["epochs"],
                            "budget curve flattened": False}


def test_a_pages_curve_is_the_record_where_it_trains_no_budget(tmp_path):
    cfg = ch.preset("tab01_efficient_ensembles", "cpu", verbose=False)
    curve, note = ch.curve_with_record(cfg, epochs=[], record=_record(tmp_path, cfg))
    assert curve.source.tolist() == ["recorded"] * 4 and "2026-11-26 04:32" in note
    with pytest.raises(InvalidInputError, match="both are empty"):
        ch.curve_with_record(cfg, epochs=[], record="")
