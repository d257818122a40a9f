"""Ensemble gain (improvement, ERR, all-wrong) and SAT score."""

import math

import numpy as np
import pytest
import torch

from ensdiv.errors import EnsdivError
from ensdiv.metrics.gain import all_wrong_ratio, ensemble_improvement, error_reduction_rate
from ensdiv.metrics.similarity import SAT_EPS, sat_score, sat_score_one_side


def test_improvement_and_err():
    assert ensemble_improvement(0.80, [0.70, 0.78, 0.75]) == pytest.approx(0.02)
    assert ensemble_improvement(0.70, [0.75]) == pytest.approx(-0.05)
    out = ensemble_improvement(torch.tensor([0.8, 0.9]), torch.tensor([[0.7, 0.75], [0.95, 0.5]]))
    assert out.tolist() == pytest.approx([0.05, -0.05])
    assert error_reduction_rate(0.2, [0.3, 0.5]) == pytest.approx(1 - 0.2 / 0.4)
    assert error_reduction_rate(0.2, [0.3, 0.5], reference="min") == pytest.approx(1 - 0.2 / 0.3)
    assert math.isnan(error_reduction_rate(0.0, [0.0, 0.0]))
    with pytest.raises(EnsdivError, match="reference"):
        error_reduction_rate(0.1, [0.2], reference="max")
    with pytest.raises(EnsdivError, match="at least one member"):
        ensemble_improvement(0.5, [])


def test_all_wrong_ratio():
    y = torch.tensor([0, 1, 2, 3])
    p = torch.tensor([[1, 1, 0, 0], [2, 0, 2, 0]])
    assert all_wrong_ratio(p, y) == pytest.approx(0.5)  # samples 0 and 3
    g = np.random.default_rng(0)
    p, y = g.integers(0, 3, (4, 50)), g.integers(0, 3, 50)
    want = np.mean([all(p[m, i] != y[i] for m in range(4)) for i in range(50)])
    assert all_wrong_ratio(torch.tensor(p), torch.tensor(y)) == pytest.approx(want)


def naive_sat(ia, ib, mask, eps=SAT_EPS):
    idx = [i for i in range(len(mask)) if mask[i]]
    rate = 100 * sum(int(ia[i]) + int(ib[i]) for i in idx) / (2 * len(idx))
    return math.log(max(eps, rate))


def test_sat_identical_and_disjoint():
    ones = torch.ones(50, dtype=torch.bool)
    assert sat_score(ones, ones) == pytest.approx(math.log(100)) == pytest.approx(4.605, abs=1e-3)
    zeros = torch.zeros(50, dtype=torch.bool)
    assert sat_score(zeros, zeros) == pytest.approx(math.log(SAT_EPS))
    assert sat_score_one_side(ones) == pytest.approx(math.log(100))


def test_sat_vs_naive_with_mask_and_batch():
    g = np.random.default_rng(1)
    ia, ib, mask = g.random((3, 40)) < 0.4, g.random((3, 40)) < 0.6, g.random((3, 40)) < 0.7
    for k in range(3):
        assert sat_score(ia[k], ib[k], mask[k]) == pytest.approx(naive_sat(ia[k], ib[k], mask[k]))
        want1 = math.log(max(SAT_EPS, 100 * ia[k][mask[k]].mean()))
        assert sat_score_one_side(ia[k], mask[k]) == pytest.approx(want1)
    batched = sat_score(torch.tensor(ia), torch.tensor(ib), torch.tensor(mask))
    assert batched.shape == (3,)
    assert batched.tolist() == pytest.approx([naive_sat(ia[k], ib[k], mask[k]) for k in range(3)])
    # 0/1 ints are accepted as indicators
    assert sat_score(ia[0].astype(int), ib[0].astype(int), mask[0]) == pytest.approx(
        sat_score(ia[0], ib[0], mask[0])
    )


def test_sat_empty_xab_is_nan_with_warning():
    ones = torch.ones(5, dtype=torch.bool)
    with pytest.warns(RuntimeWarning, match="empty X_AB"):
        assert math.isnan(sat_score(ones, ones, torch.zeros(5, dtype=torch.bool)))
    with pytest.warns(RuntimeWarning, match="empty X_AB"):
        assert math.isnan(sat_score(torch.ones(0, dtype=torch.bool), torch.ones(0, dtype=torch.bool)))
    with pytest.warns(RuntimeWarning):
        out = sat_score(
            torch.ones(2, 3, dtype=torch.bool),
            torch.ones(2, 3, dtype=torch.bool),
            torch.tensor([[True, False, False], [False, False, False]]),
        )
    assert out[0] == pytest.approx(math.log(100)) and math.isnan(float(out[1]))


def test_sat_bad_input():
    with pytest.raises(EnsdivError, match="same shape"):
        sat_score(torch.ones(3, dtype=torch.bool), torch.ones(4, dtype=torch.bool))
    with pytest.raises(EnsdivError, match="indicator"):
        sat_score(torch.tensor([0.5, 1.0]), torch.tensor([1.0, 1.0]))
    with pytest.raises(EnsdivError, match="both_correct"):
        sat_score(
            torch.ones(3, dtype=torch.bool), torch.ones(3, dtype=torch.bool), torch.ones(4, dtype=torch.bool)
        )
    with pytest.raises(EnsdivError, match="eps"):
        sat_score(torch.ones(3, dtype=torch.bool), torch.ones(3, dtype=torch.bool), eps=0.0)
