"""Prediction-diversity measures vs naive loops, scikit-learn and scipy, and hand-computed cases."""

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from metric_cases import assert_close, bad, preds_and_labels

from ensdiv.metrics.diversity import (
    correlation_coefficient,
    disagreement,
    disagreement_matrix,
    double_fault,
    equitability,
    num_unique,
    oracle_disagreement,
    pair_counts,
    q_statistic,
)


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
    return sum(vals) / len(vals) if vals else math.nan


def test_disagreement_is_0d_and_pairwise_is_mm():
    p, _ = preds_and_labels()
    d = disagreement(p)
    assert isinstance(d, torch.Tensor) and d.ndim == 0 and d.dtype == torch.float64
    mat = disagreement(p, pairwise=True)
    assert mat.shape == (4, 4) and torch.allclose(mat, mat.T) and float(mat.diagonal().abs().max()) == 0.0
    assert torch.equal(mat, disagreement_matrix(p))


def test_disagreement_vs_sklearn_accuracy_score():
    from sklearn.metrics import accuracy_score

    p, _ = preds_and_labels(seed=2)
    want = np.mean([1 - accuracy_score(p[i], p[j]) for i, j in itertools.combinations(range(4), 2)])
    assert float(disagreement(p)) == pytest.approx(want)


def test_kuncheva_measures_vs_loop():
    p, y = preds_and_labels(seed=1)
    n = p.shape[1]
    assert float(oracle_disagreement(p, y)) == pytest.approx(naive_pair_mean(p, y, lambda a, b, c, d: (b + c) / n))
    assert float(double_fault(p, y)) == pytest.approx(naive_pair_mean(p, y, lambda a, b, c, d: d / n))
    assert float(q_statistic(p, y)) == pytest.approx(
        naive_pair_mean(p, y, lambda a, b, c, d: (a * d - b * c) / (a * d + b * c) if a * d + b * c else math.nan)
    )
    counts = pair_counts(p, y)
    for i, j in itertools.combinations(range(4), 2):
        n11, n10, n01, n00 = naive_counts(p[i], p[j], y)
        assert [float(counts[k][i, j]) for k in ("n11", "n10", "n01", "n00")] == [n11, n10, n01, n00]


def test_correlation_is_matthews_of_correctness():
    from sklearn.metrics import matthews_corrcoef

    p, y = preds_and_labels(m=5, n=80, c=3, seed=7)
    c = (p == y).numpy()
    mat = correlation_coefficient(p, y, pairwise=True)
    for i, j in itertools.combinations(range(5), 2):
        assert float(mat[i, j]) == pytest.approx(matthews_corrcoef(c[i], c[j]))
    want = np.mean([matthews_corrcoef(c[i], c[j]) for i, j in itertools.combinations(range(5), 2)])
    assert float(correlation_coefficient(p, y)) == pytest.approx(want)


def test_hand_computed_pair():
    y = torch.tensor([0, 1, 2, 3])
    p = torch.tensor([[0, 1, 0, 0], [0, 0, 2, 1]])  # correct: a=[1,1,0,0], b=[1,0,1,0]
    assert float(oracle_disagreement(p, y)) == pytest.approx(0.5)  # samples 1 and 2
    assert float(disagreement(p)) == pytest.approx(0.75)  # all but sample 0 differ
    assert float(double_fault(p, y)) == pytest.approx(0.25)
    assert float(q_statistic(p, y)) == pytest.approx(0.0)  # N11=N10=N01=N00=1
    assert float(correlation_coefficient(p, y)) == pytest.approx(0.0)


def test_all_agree_and_all_wrong():
    y = torch.tensor([0, 1, 2])
    same = torch.tensor([[1, 2, 0]] * 3)
    assert float(disagreement(same)) == 0.0
    assert float(oracle_disagreement(same, y)) == 0.0
    assert float(double_fault(same, y)) == 1.0
    assert math.isnan(float(q_statistic(same, y)))  # undefined when nobody is ever right
    assert torch.equal(num_unique(same), torch.ones(3, dtype=torch.float64))
    assert torch.equal(equitability(same), torch.zeros(3, dtype=torch.float64))


def test_bad_inputs():
    p, y = preds_and_labels(m=1)
    for fn in (lambda: disagreement(p), lambda: oracle_disagreement(p, y), lambda: q_statistic(p, y)):
        bad(fn, "at least 2 members")
    bad(lambda: disagreement(torch.zeros(2, 0, dtype=torch.long)), "N = 0")
    bad(lambda: double_fault(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0, dtype=torch.long)), "N = 0")
    bad(lambda: equitability(torch.tensor([[0, 1]]), num_species="bogus"), "num_species")
    bad(lambda: equitability(torch.tensor([[0, 5]]), num_classes=3), "num_classes")
    bad(lambda: num_unique(torch.zeros(0, 3, dtype=torch.long)), "M = 0")
    bad(lambda: disagreement(torch.rand(2, 3)), "integer")


def test_validate_args_false_skips_checks():
    one = torch.tensor([[0, 1, 2]])  # one member: the check would reject it
    assert torch.isnan(disagreement(one, validate_args=False))
    assert torch.isnan(q_statistic(one, torch.tensor([0, 1, 2]), validate_args=False))


def test_equitability_hand_values():
    p = torch.tensor([[0, 0, 0], [0, 0, 1], [0, 1, 2]])  # columns: all agree, 2-1 split, all differ
    h21 = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))
    assert equitability(p, num_classes=10).tolist() == pytest.approx([0.0, h21 / math.log(3), 1.0])
    assert equitability(p, num_species="classes", num_classes=10).tolist() == pytest.approx(
        [0.0, h21 / math.log(10), math.log(3) / math.log(10)]
    )
    assert equitability(p, num_species="observed").tolist() == pytest.approx([0.0, h21 / math.log(2), 1.0])
    assert equitability(p, num_species=4).tolist() == pytest.approx([0.0, h21 / math.log(4), math.log(3) / math.log(4)])
    assert equitability(torch.tensor([[3, 1]])).tolist() == [0.0, 0.0]  # single member: S = 1, E = 0


def test_equitability_vs_scipy_entropy():
    from scipy.stats import entropy

    p, _ = preds_and_labels(m=5, n=40, c=3, seed=3)
    want = [entropy(np.bincount(p[:, k].numpy(), minlength=3)) / math.log(3) for k in range(40)]
    assert_close(equitability(p, num_classes=3), want, rtol=1e-12, atol=1e-12)


def test_num_unique_vs_set():
    p, _ = preds_and_labels(m=5, n=30, c=4, seed=4)
    assert num_unique(p).tolist() == [len(set(p[:, k].tolist())) for k in range(30)]


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 5), st.integers(1, 20), st.integers(1, 6), st.integers(0, 10_000))
def test_properties(m, n, c, seed):
    p, y = preds_and_labels(m, n, c, seed=seed)
    d = disagreement(p, pairwise=True)
    assert torch.allclose(d, d.T)
    assert 0.0 <= float(disagreement(p)) <= 1.0
    e = equitability(p, num_classes=c)
    assert bool(((e >= -1e-12) & (e <= 1 + 1e-12)).all())
    assert bool(((num_unique(p) >= 1) & (num_unique(p) <= min(m, c))).all())
    # oracle disagreement <= label-free disagreement (exactly-one-correct implies different predictions)
    assert float(oracle_disagreement(p, y)) <= float(disagreement(p)) + 1e-12
