"""The vectorised ensemble sweep vs a per-ensemble Python loop."""

import itertools
import math

import numpy as np
import pytest
import torch
from metric_cases import bad, zoo

from ensdiv.errors import UnknownNameError
from ensdiv.metrics.attribution import attribution_diversity
from ensdiv.metrics.combine import combine
from ensdiv.metrics.diversity import disagreement, oracle_disagreement
from ensdiv.metrics.gain import all_wrong_ratio, error_reduction_rate
from ensdiv.metrics.sweep import combination_index, ensemble_sweep


@pytest.mark.parametrize("how", ["mean_logits", "mean_probs", "median", "geometric_mean"])
@pytest.mark.parametrize("size", [2, 3, 4])
def test_sweep_matches_loop(how, size):
    z, y = zoo()
    params = torch.arange(6.0) * 10
    names = [f"m{i}" for i in range(6)]
    df = ensemble_sweep(z, y, size=size, how=how, params=params, names=names, chunk_elems=1000)
    combos = list(itertools.combinations(range(6), size))
    assert len(df) == len(combos) and df["members"].tolist() == combos
    for row, c in zip(df.itertuples(), combos, strict=True):
        idx = list(c)
        acc = float((combine(z[idx], how).argmax(-1) == y).double().mean())
        member = [float((z[i].argmax(-1) == y).double().mean()) for i in idx]
        assert row.accuracy == pytest.approx(acc)
        assert row.best_member_accuracy == pytest.approx(max(member))
        assert row.mean_member_accuracy == pytest.approx(np.mean(member))
        assert row.improvement == pytest.approx(acc - max(member))
        assert row.disagreement == pytest.approx(float(disagreement(z[idx].argmax(-1))))
        assert row.oracle_disagreement == pytest.approx(float(oracle_disagreement(z[idx].argmax(-1), y)))
        assert row.params == pytest.approx(sum(10 * i for i in idx))
        assert row.names == "+".join(f"m{i}" for i in idx)


def test_sweep_vote_ties_among_max():
    z, y = zoo(m=5, c=3)
    df = ensemble_sweep(z, y, size=2, how="vote", seed=0)
    preds = z.argmax(-1)
    for row in df.itertuples():
        a, b = row.members
        # with two voters, every tie is between their two predictions: accuracy lies between
        # "both right" and "either right"
        both = float(((preds[a] == y) & (preds[b] == y)).double().mean())
        either = float(((preds[a] == y) | (preds[b] == y)).double().mean())
        assert both - 1e-12 <= row.accuracy <= either + 1e-12
    again = ensemble_sweep(z, y, size=2, how="vote", seed=0)
    assert df["accuracy"].tolist() == again["accuracy"].tolist()


def test_sweep_attribution_diversity_matches_eq7():
    z, y = zoo(m=5, n=20)
    g = torch.Generator().manual_seed(1)
    attr = torch.randn(5, 20, 1, 3, 3, generator=g, dtype=torch.float64)
    df = ensemble_sweep(z, y, size=3, attributions=attr)
    for row in df.itertuples():
        assert row.attribution_diversity == pytest.approx(float(attribution_diversity(attr[list(row.members)])))


def test_sweep_explicit_combinations_and_errors():
    z, y = zoo()
    df = ensemble_sweep(z, y, combinations=torch.tensor([[0, 5], [1, 2]]))
    assert df["members"].tolist() == [(0, 5), (1, 2)]
    assert combination_index(14, 3).shape == (364, 3)
    assert combination_index(69, 2).shape == (2346, 2)
    bad(lambda: ensemble_sweep(z, y, size=7), "size")
    bad(lambda: ensemble_sweep(z, y, names=["a"]), "names")
    with pytest.raises(UnknownNameError, match="combination rule"):
        ensemble_sweep(z, y, how="mean")
    bad(lambda: ensemble_sweep(z, y, params=[1.0, 2.0]), r"\(M,\) = \(6,\)")
    bad(lambda: ensemble_sweep(z, y, combinations=torch.tensor([[0, 9]])), "combinations")
    bad(lambda: ensemble_sweep(z, y[:5]), r"\(N,\) = \(120,\)")
    bad(lambda: ensemble_sweep(z, y, attributions=torch.zeros(2, 3)), "attributions")
    single = ensemble_sweep(z, y, size=1)
    assert single["improvement"].abs().max() == 0.0 and single["disagreement"].isna().all()


@pytest.mark.parametrize("c", [3, 70])  # both score layouts (classes-first for C <= 64)
def test_sweep_layouts_and_exact_ties(c):
    z, y = zoo(m=4, n=50, c=c, seed=3)
    z[:, :10, 1] = z[:, :10, 0]  # exact ties between classes 0 and 1 on 10 samples: argmax picks 0
    y[:10] = 1
    for how in ("mean_logits", "median"):
        df = ensemble_sweep(z, y, size=2, how=how)
        for row in df.itertuples():
            want = float((combine(z[list(row.members)], how).argmax(-1) == y).double().mean())
            assert row.accuracy == pytest.approx(want)


@pytest.mark.parametrize("how", ["mean_logits", "geometric_mean"])
def test_sweep_gather_path_many_members(how):
    # 8 * size <= M switches from the selection-matrix product to summing gathered rows
    z, y = zoo(m=17, n=60, c=4, seed=5)
    df = ensemble_sweep(z, y, size=2, how=how)
    for row in df.itertuples():
        want = float((combine(z[list(row.members)], how).argmax(-1) == y).double().mean())
        assert row.accuracy == pytest.approx(want)


@pytest.mark.parametrize("how", ["mean_logits", "vote"])
@pytest.mark.parametrize("size", [1, 2, 3])
def test_sweep_err_and_all_wrong_vs_loop(how, size):
    z, y = zoo(m=5, n=90, c=3, seed=2)
    df = ensemble_sweep(z, y, size=size, how=how, chunk_elems=100)
    for row in df.itertuples():
        idx = list(row.members)
        preds = z[idx].argmax(-1)
        member_err = [float((p != y).double().mean()) for p in preds]
        want_err = float(error_reduction_rate(1 - row.accuracy, member_err))
        assert row.err == pytest.approx(want_err)
        assert row.err == pytest.approx(1 - (1 - row.accuracy) / np.mean(member_err))
        wrong_all = np.mean([all(int(preds[k, i]) != int(y[i]) for k in range(len(idx))) for i in range(90)])
        assert row.all_wrong == pytest.approx(wrong_all)
        assert row.all_wrong == pytest.approx(float(all_wrong_ratio(preds, y)))


def test_sweep_err_is_nan_when_members_make_no_error():
    y = torch.tensor([0, 1, 0])
    z = torch.nn.functional.one_hot(y, 2).double().expand(3, -1, -1).clone()  # every member always right
    df = ensemble_sweep(z, y, size=2)
    assert df["err"].isna().all() and (df["all_wrong"] == 0).all() and (df["accuracy"] == 1).all()


def test_sweep_accepts_bf16_and_fast_path():
    z, y = zoo(m=4, n=40, c=3, seed=1)
    z = z.round(decimals=1)  # exactly representable-ish values keep bf16 argmaxes close
    ref = ensemble_sweep(z.bfloat16().double(), y, size=2)
    df = ensemble_sweep(z.bfloat16(), y, size=2)
    assert df["accuracy"].tolist() == ref["accuracy"].tolist()
    fast = ensemble_sweep(z, y, size=2, validate_args=False)
    assert fast.equals(ensemble_sweep(z, y, size=2))
    assert math.isnan(ensemble_sweep(z, y, size=1)["disagreement"].iloc[0])


@pytest.mark.parametrize("m", [6, 30])  # 30 members take the gather path, 6 the matrix-product path
def test_vote_ties_are_broken_at_random_on_both_paths(m):
    """Half the members always say class 0 (the label), half class 1: every mixed pair is a tie, which a
    random tie-break wins about half the time (class order would win it every time)."""
    n = 2000
    logits = torch.zeros(m, n, 2)
    logits[: m // 2, :, 0] = 1.0
    logits[m // 2 :, :, 1] = 1.0
    labels = torch.zeros(n, dtype=torch.long)
    df = ensemble_sweep(logits, labels, size=2, how="vote", seed=0)
    mixed = df[[(a < m // 2) != (b < m // 2) for a, b in df["members"]]]
    assert 0.45 < mixed["accuracy"].mean() < 0.55
