"""Prediction-diversity measures vs naive loops and hand-computed cases."""

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ensdiv.errors import EnsdivError
from ensdiv.metrics.diversity import (
    conversion_rate,
    correlation_coefficient,
    disagreement,
    double_fault,
    equitability,
    error_consistency,
    error_inconsistency,
    num_unique,
    oracle_disagreement,
    q_statistic,
    specialization_angle,
)


def rand_preds(m=4, n=60, c=5, seed=0):
    g = np.random.default_rng(seed)
    return torch.tensor(g.integers(0, c, (m, n))), torch.tensor(g.integers(0, c, n))


def naive_counts(a, b, y):
    n11 = n10 = n01 = n00 = 0
    for ai, bi, yi in zip(a.tolist(), b.tolist(), y.tolist(), strict=True):
        ca, cb = ai == yi, bi == yi
        n11 += ca and cb
        n10 += ca and not cb
        n01 += (not ca) and cb
        n00 += (not ca) and not cb
    return n11, n10, n01, n00


def naive_pair_mean(preds, y, fn):
    vals = [fn(*naive_counts(preds[i], preds[j], y)) for i, j in itertools.combinations(range(len(preds)), 2)]
    vals = [v for v in vals if not math.isnan(v)]
    return sum(vals) / len(vals)


def test_disagreement_vs_loop():
    p, _ = rand_preds()
    want = np.mean(
        [
            np.mean([p[i, k] != p[j, k] for k in range(p.shape[1])])
            for i, j in itertools.combinations(range(4), 2)
        ]
    )
    assert disagreement(p) == pytest.approx(want)
    mat = disagreement(p, pairwise=True)
    assert mat.shape == (4, 4) and torch.allclose(mat, mat.T) and float(mat.diagonal().abs().max()) < 1e-12


def test_kuncheva_measures_vs_loop():
    p, y = rand_preds(seed=1)
    n = p.shape[1]
    assert oracle_disagreement(p, y) == pytest.approx(naive_pair_mean(p, y, lambda a, b, c, d: (b + c) / n))
    assert double_fault(p, y) == pytest.approx(naive_pair_mean(p, y, lambda a, b, c, d: d / n))
    assert q_statistic(p, y) == pytest.approx(
        naive_pair_mean(
            p, y, lambda a, b, c, d: (a * d - b * c) / (a * d + b * c) if a * d + b * c else math.nan
        )
    )

    def rho(a, b, c, d):
        den = math.sqrt((a + b) * (c + d) * (a + c) * (b + d))
        return (a * d - b * c) / den if den else math.nan

    assert correlation_coefficient(p, y) == pytest.approx(naive_pair_mean(p, y, rho))


def test_hand_computed_pair():
    y = torch.tensor([0, 1, 2, 3])
    p = torch.tensor([[0, 1, 0, 0], [0, 0, 2, 1]])  # correct: a=[1,1,0,0], b=[1,0,1,0]
    assert oracle_disagreement(p, y) == pytest.approx(0.5)  # samples 1 and 2
    assert disagreement(p) == pytest.approx(0.75)  # all but sample 0 differ
    assert double_fault(p, y) == pytest.approx(0.25)
    assert q_statistic(p, y) == pytest.approx((1 * 1 - 1 * 1) / 2)  # N11=N10=N01=N00=1 -> 0
    assert correlation_coefficient(p, y) == pytest.approx(0.0)


def test_all_agree_and_all_wrong():
    y = torch.tensor([0, 1, 2])
    same = torch.tensor([[1, 2, 0]] * 3)
    assert disagreement(same) == 0.0
    assert oracle_disagreement(same, y) == 0.0
    assert double_fault(same, y) == 1.0
    assert math.isnan(q_statistic(same, y))  # undefined when nobody is ever right
    assert torch.equal(num_unique(same), torch.ones(3, dtype=torch.float64))
    assert torch.equal(equitability(same), torch.zeros(3, dtype=torch.float64))


def test_pairwise_measures_need_two_members():
    p, y = rand_preds(m=1)
    for fn in (lambda: disagreement(p), lambda: oracle_disagreement(p, y), lambda: q_statistic(p, y)):
        with pytest.raises(EnsdivError, match="at least 2 members"):
            fn()


def test_equitability_hand_values():
    # 3 members: all agree -> 0; 2-1 split; all differ -> 1 (S = min(M, C) = 3)
    p = torch.tensor([[0, 0, 0], [0, 0, 1], [0, 1, 2]])
    e = equitability(p, num_classes=10)
    h21 = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))
    assert e.tolist() == pytest.approx([0.0, h21 / math.log(3), 1.0])
    assert equitability(p, num_species="classes", num_classes=10).tolist() == pytest.approx(
        [0.0, h21 / math.log(10), math.log(3) / math.log(10)]
    )
    assert equitability(p, num_species="observed").tolist() == pytest.approx([0.0, h21 / math.log(2), 1.0])
    assert equitability(p, num_species=4).tolist() == pytest.approx(
        [0.0, h21 / math.log(4), math.log(3) / math.log(4)]
    )
    # single member: S = 1, defined as 0
    assert equitability(torch.tensor([[3, 1]])).tolist() == [0.0, 0.0]


def test_equitability_vs_numpy():
    p, _ = rand_preds(m=5, n=40, c=3, seed=3)
    for k in range(p.shape[1]):
        _, counts = np.unique(p[:, k].numpy(), return_counts=True)
        q = counts / 5
        want = -(q * np.log(q)).sum() / np.log(3)
        assert float(equitability(p, num_classes=3)[k]) == pytest.approx(want)


def test_equitability_bad_species():
    with pytest.raises(EnsdivError, match="num_species"):
        equitability(torch.tensor([[0, 1]]), num_species="bogus")


def test_num_unique_vs_set():
    p, _ = rand_preds(m=5, n=30, c=4, seed=4)
    want = [len(set(p[:, k].tolist())) for k in range(30)]
    assert num_unique(p).tolist() == want


def test_two_model_measures():
    g = np.random.default_rng(5)
    y = torch.tensor(g.integers(0, 3, 200))
    a = torch.where(torch.tensor(g.random(200) < 0.7), y, (y + 1) % 3)
    b = torch.where(torch.tensor(g.random(200) < 0.6), y, (y + 2) % 3)
    ens = torch.where(torch.tensor(g.random(200) < 0.5), a, b)
    ca, cb, ce = (a == y).numpy(), (b == y).numpy(), (ens == y).numpy()
    assert error_inconsistency(a, b, y) == pytest.approx(np.mean(ca != cb))
    c_obs = np.mean(ca == cb)
    pa, pb = ca.mean(), cb.mean()
    c_exp = pa * pb + (1 - pa) * (1 - pb)
    assert error_consistency(a, b, y) == pytest.approx((c_obs - c_exp) / (1 - c_exp))
    mask = ca != cb
    assert conversion_rate(ens, a, b, y) == pytest.approx(ce[mask].mean())
    # identical models: kappa = 1
    assert error_consistency(a, a, y) == pytest.approx(1.0)


def test_conversion_rate_and_kappa_undefined():
    y = torch.tensor([0, 1])
    with pytest.warns(RuntimeWarning, match="no sample"):
        assert math.isnan(conversion_rate(y, y, y, y))
    with pytest.warns(RuntimeWarning, match="always right"):
        assert math.isnan(error_consistency(y, y, y))


def test_specialization_angle():
    a = torch.tensor([1.0, 0.5, 0.0])
    b = torch.tensor([0.0, 0.5, 1.0])
    assert specialization_angle(a, b).tolist() == pytest.approx([90.0, 45.0, 0.0])
    assert float(specialization_angle(a[:1], b[:1], degrees=False)[0]) == pytest.approx(math.pi / 2)
    with pytest.raises(EnsdivError, match="non-negative"):
        specialization_angle(torch.tensor([-1.0]), torch.tensor([1.0]))


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 5), st.integers(1, 20), st.integers(1, 6), st.integers(0, 10_000))
def test_properties(m, n, c, seed):
    p, y = rand_preds(m, n, c, seed)
    d = disagreement(p, pairwise=True)
    assert torch.allclose(d, d.T)
    assert 0.0 <= disagreement(p) <= 1.0
    e = equitability(p, num_classes=c)
    assert bool(((e >= -1e-12) & (e <= 1 + 1e-12)).all())
    assert bool(((num_unique(p) >= 1) & (num_unique(p) <= min(m, c))).all())
    # oracle disagreement <= label-free disagreement (exactly-one-correct implies different predictions)
    assert oracle_disagreement(p, y) <= disagreement(p) + 1e-12
