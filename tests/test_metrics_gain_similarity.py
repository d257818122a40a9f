"""Ensemble gain (improvement, ERR, all-wrong) and SAT score vs naive loops."""

import math

import numpy as np
import pytest
import torch
from metric_cases import bad, preds_and_labels, run_over_dtypes

from ensdiv.metrics.gain import all_wrong_ratio, ensemble_improvement, error_reduction_rate
from ensdiv.metrics.similarity import SAT_EPS, sat_score, sat_score_one_side


def test_improvement_and_err():
    out = ensemble_improvement(0.80, [0.70, 0.78, 0.75])
    assert isinstance(out, torch.Tensor) and out.ndim == 0 and float(out) == pytest.approx(0.02)
    assert float(ensemble_improvement(0.70, [0.75])) == pytest.approx(-0.05)
    out = ensemble_improvement(torch.tensor([0.8, 0.9]), torch.tensor([[0.7, 0.75], [0.95, 0.5]]))
    assert out.tolist() == pytest.approx([0.05, -0.05])
    assert float(error_reduction_rate(0.2, [0.3, 0.5])) == pytest.approx(1 - 0.2 / 0.4)
    assert float(error_reduction_rate(0.2, [0.3, 0.5], reference="min")) == pytest.approx(1 - 0.2 / 0.3)
    assert math.isnan(float(error_reduction_rate(0.0, [0.0, 0.0])))  # members make no error: undefined
    assert math.isnan(float(error_reduction_rate(0.1, [0.0, 0.2], reference="min")))  # never -inf


def test_gain_over_dtypes():
    ens = torch.tensor([0.2, 0.1, 0.3], dtype=torch.float64)
    mem = torch.tensor([[0.3, 0.5], [0.1, 0.2], [0.25, 0.3]], dtype=torch.float64)
    run_over_dtypes(error_reduction_rate, (ens, mem), lambda e, m: 1 - e.numpy() / m.numpy().mean(1))
    run_over_dtypes(ensemble_improvement, (ens, mem), lambda e, m: e.numpy() - m.numpy().max(1))


def test_all_wrong_ratio():
    y = torch.tensor([0, 1, 2, 3])
    p = torch.tensor([[1, 1, 0, 0], [2, 0, 2, 0]])
    assert float(all_wrong_ratio(p, y)) == pytest.approx(0.5)  # samples 0 and 3
    p, y = preds_and_labels(4, 50, 3)
    want = np.mean([all(p[m, i] != y[i] for m in range(4)) for i in range(50)])
    assert float(all_wrong_ratio(p, y)) == pytest.approx(want)


def test_gain_bad_inputs():
    bad(lambda: error_reduction_rate(0.1, [0.2], reference="max"), "reference")
    bad(lambda: ensemble_improvement(0.5, []), "at least one member")
    bad(lambda: all_wrong_ratio(torch.zeros(0, 3, dtype=torch.long), torch.zeros(3, dtype=torch.long)), "one member")
    bad(lambda: all_wrong_ratio(torch.zeros(2, 3), torch.zeros(3, dtype=torch.long)), "integer")


def naive_sat(ia, ib, mask, eps=SAT_EPS):
    idx = [i for i in range(len(mask)) if mask[i]]
    rate = 100 * sum(int(ia[i]) + int(ib[i]) for i in idx) / (2 * len(idx))
    return math.log(max(eps, rate))


def test_sat_identical_and_disjoint():
    ones = torch.ones(50, dtype=torch.bool)
    out = sat_score(ones, ones)
    assert out.ndim == 0 and out.dtype == torch.float64 and float(out) == pytest.approx(math.log(100))
    zeros = torch.zeros(50, dtype=torch.bool)
    assert float(sat_score(zeros, zeros)) == pytest.approx(math.log(SAT_EPS))
    assert float(sat_score_one_side(ones)) == pytest.approx(math.log(100))


def test_sat_vs_naive_with_mask_and_batch():
    g = np.random.default_rng(1)
    ia, ib, mask = g.random((3, 40)) < 0.4, g.random((3, 40)) < 0.6, g.random((3, 40)) < 0.7
    for k in range(3):
        assert float(sat_score(ia[k], ib[k], mask[k])) == pytest.approx(naive_sat(ia[k], ib[k], mask[k]))
        want1 = math.log(max(SAT_EPS, 100 * ia[k][mask[k]].mean()))
        assert float(sat_score_one_side(ia[k], mask[k])) == pytest.approx(want1)
    batched = sat_score(torch.tensor(ia), torch.tensor(ib), torch.tensor(mask))
    assert batched.shape == (3,)
    assert batched.tolist() == pytest.approx([naive_sat(ia[k], ib[k], mask[k]) for k in range(3)])
    # 0/1 ints are accepted as indicators
    assert float(sat_score(ia[0].astype(int), ib[0].astype(int), mask[0])) == pytest.approx(
        float(sat_score(ia[0], ib[0], mask[0]))
    )


def test_sat_empty_xab_is_nan_with_warning():
    ones = torch.ones(5, dtype=torch.bool)
    with pytest.warns(RuntimeWarning, match="empty X_AB"):
        assert math.isnan(float(sat_score(ones, ones, torch.zeros(5, dtype=torch.bool))))
    with pytest.warns(RuntimeWarning, match="empty X_AB"):
        assert math.isnan(float(sat_score(torch.ones(0, dtype=torch.bool), torch.ones(0, dtype=torch.bool))))
    with pytest.warns(RuntimeWarning):
        out = sat_score(
            torch.ones(2, 3, dtype=torch.bool),
            torch.ones(2, 3, dtype=torch.bool),
            torch.tensor([[True, False, False], [False, False, False]]),
        )
    assert float(out[0]) == pytest.approx(math.log(100)) and math.isnan(float(out[1]))


def test_sat_bad_input():
    b3 = torch.ones(3, dtype=torch.bool)
    bad(lambda: sat_score(b3, torch.ones(4, dtype=torch.bool)), "same shape")
    bad(lambda: sat_score(torch.tensor([0.5, 1.0]), torch.tensor([1.0, 1.0])), "indicator")
    bad(lambda: sat_score(b3, b3, torch.ones(4, dtype=torch.bool)), "both_correct")
    bad(lambda: sat_score(b3, b3, eps=0.0), "eps")
    bad(lambda: sat_score(torch.tensor(True), torch.tensor(True)), "scalar")


def test_sat_validate_args_false_skips_checks():
    # 0.5 is not an indicator; unchecked it is read as True
    out = sat_score(torch.tensor([0.5, 1.0]), torch.tensor([1.0, 1.0]), validate_args=False)
    assert float(out) == pytest.approx(math.log(100))
