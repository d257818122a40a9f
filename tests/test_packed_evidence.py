"""Packed-Ensembles' evidence helpers: the nulls its pages build from their own runs, on hand-made numbers."""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest

import ensdiv as ed
from ensdiv.chapters import packed_ensembles as ch


def test_swap_null_flips_seeds_and_falls_back_to_a_stand_in_on_one_run():
    ours = {"pe": ed.report.from_seeds([91.0, 92.0, 93.0, 94.0, 95.0]),
            "single": ed.report.from_seeds([90.0, 90.5, 91.0, 91.5, 92.0])}
    null = ch.swap_null(ours, "pe", "single", seed=0)
    assert len(null.draws) == 2 ** 5  # every swap pattern of five seeds
    means = sorted(round(float(d["pe"].value), 6) for d in null.draws)
    assert means[0] == pytest.approx(np.mean([90.0, 90.5, 91.0, 91.5, 92.0]))  # all swapped: PE gets single's runs
    assert means[-1] == pytest.approx(93.0)  # none swapped
    boot = {"pe": ed.report.Estimate(0.9, np.array([0.8, 1.0]), "evaluation samples", "bootstrap", "g"),
            "single": ed.report.Estimate(0.7, np.array([0.6, 0.8]), "evaluation samples", "bootstrap", "g")}
    (draw,) = ch.swap_null(boot, "pe", "single", seed=0).draws
    assert draw == {"pe": boot["single"]}


def test_stand_in_rotates_a_methods_seeds_to_break_the_pairing():
    ours = {"pe": ed.report.from_seeds([1.0, 2.0, 3.0]), "de": ed.report.from_seeds([10.0, 20.0, 30.0])}
    null = ch.stand_in(ours, "pe", "de", rotate=True)
    assert [d["pe"].replicates.tolist() for d in null.draws] == [[20.0, 30.0, 10.0], [30.0, 10.0, 20.0]]
    assert ch.stand_in(ours, "pe", "de").draws == [{"pe": ours["de"]}]


def test_criteria_null_permutes_the_criteria_within_each_seed():
    names = {"a": {"msp": "a msp", "max_logit": "a ml"}}
    ours = {"a msp": ed.report.from_seeds([1.0, 2.0, 3.0]), "a ml": ed.report.from_seeds([10.0, 20.0, 30.0])}
    null = ch.criteria_null(ours, names, seed=0, draws=50)
    for d in null.draws:
        pairs = set(zip(d["a msp"].replicates.tolist(), d["a ml"].replicates.tolist(), strict=True))
        # each seed keeps its two values, in either order
        assert pairs <= {(1.0, 10.0), (10.0, 1.0), (2.0, 20.0), (20.0, 2.0), (3.0, 30.0), (30.0, 3.0)}
    assert any(d["a ml"].replicates[0] == 1.0 for d in null.draws)  # the labels do move


def test_share_draws_rescale_a_source_to_a_share_of_the_other():
    a = np.array([0.0, 0.5, 0.5, 1.0])  # mean 0.5
    b = np.array([1.0, 1.0, 0.0, 0.0])  # mean 0.5
    null = ch.share_draws({"a": a, "b": b}, "a", "b", share=0.6, construction="claim false", draws=5,
                          n_resamples=50, seed=0)
    for d in null.draws:
        if d["b"].value > 0 and d["a"].value > 0:
            assert d["a"].value == pytest.approx(0.6 * d["b"].value)
    with pytest.raises(ed.errors.InvalidInputError):
        ch.share_draws({"a": a, "b": b[:3]}, "a", "b", share=1.0, construction="x", seed=0)


def test_timing_claims_are_untestable_off_a_gpu_and_same_model_null_is_a_ratio_of_one():
    assert ch.gpu_premise("cpu") == ch.GPU_PREMISE and ch.gpu_premise("cuda") == ""
    speeds = pd.DataFrame({"model": ["x", "y"] * 4, "round": [0, 0, 1, 1] * 2, "process set": [0] * 4 + [1] * 4,
                           "dtype": "float32", "inference images/s": [100.0, 50.0, 110.0, 55.0] * 2})
    (draw,) = ch.same_model_null(speeds, "x vs y", "y").draws
    assert draw["x vs y"].replicates.tolist() == [1.0, 1.0]
    assert float(ch.speed_ratio(speeds, "x", "y").value) == pytest.approx(2.0)


def test_the_gpu_record_of_fig3_and_app_h_is_read_as_facts():
    facts, note = ch.gpu_record("Fig. 3")
    assert facts["(c) speed vs (a) (GPU)"] == pytest.approx(1.674, abs=1e-3) and "H200" in note
    assert ch.gpu_record("Fig. 1")[0] == {}


def test_the_image_bootstrap_statistics_equal_scikit_learn_and_a_hand_ece_row_by_row():
    """The quantities Packed-Ensembles' image bootstrap hands to ``ed.report.sample_bootstrap``: per resample row,
    AUROC/AUPR averaged over runs (scikit-learn's, OOD positive, in %), the mean of per-image values, and the 15-bin
    ECE averaged over runs (a hand loop over the bins)."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    # the module (the package's name ``estimates`` is its function)
    est = importlib.import_module("ensdiv.chapters.packed_ensembles.estimates")

    rng = np.random.default_rng(0)
    arrays = {"id0": rng.normal(0, 1, (3, 40)), "ood0": rng.normal(1, 1, (3, 25)),
              "id1": rng.normal(0, 1, (3, 40)), "ood1": rng.normal(0.5, 1, (3, 25))}
    pairs = [("id0", "ood0"), ("id1", "ood1")]

    def sk(fn, r):
        truth = np.r_[np.zeros(40), np.ones(25)]
        return np.mean([100 * fn(truth, np.r_[arrays[a][r], arrays[b][r]]) for a, b in pairs])

    assert est._ood_statistic("auroc", pairs)(arrays) == pytest.approx([sk(roc_auc_score, r) for r in range(3)])
    assert est._ood_statistic("aupr", pairs)(arrays) == pytest.approx([sk(average_precision_score, r)
                                                                       for r in range(3)])
    values = rng.random((3, 40))
    assert est._mean_statistic("v", {"v": values}) == pytest.approx(values.mean(1))

    logits = rng.normal(0, 2, (2, 3, 60, 4))  # runs, resample rows, images, classes
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    y = rng.integers(0, 4, (3, 60))

    def hand_ece(p, labels):
        conf, pred = p.max(1), p.argmax(1)
        edges, total = np.linspace(0, 1, 16), 0.0
        for lo, hi in zip(edges[:-1], edges[1:], strict=True):
            inside = (conf > lo) & (conf <= hi)
            if inside.any():
                total += inside.mean() * abs((pred[inside] == labels[inside]).mean() - conf[inside].mean())
        return total

    got = est._ece_statistic(["p0", "p1"], "y")({"p0": probs[0].astype(np.float32), "p1": probs[1].astype(np.float32),
                                                  "y": y})
    want = [np.mean([hand_ece(probs[k][r], y[r]) for k in range(2)]) for r in range(3)]
    assert got == pytest.approx(want, abs=1e-5)
