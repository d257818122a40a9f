"""Two-model measures of training-methods vs scikit-learn and numpy."""

import math

import numpy as np
import pytest
import torch
from metric_cases import bad, run_over_dtypes, two_models

from ensdiv.metrics.consistency import conversion_rate, error_consistency, error_inconsistency, specialization_angle


def test_vs_numpy_and_sklearn_kappa():
    from sklearn.metrics import cohen_kappa_score

    a, b, ens, y = two_models()
    ca, cb, ce = (a == y).numpy(), (b == y).numpy(), (ens == y).numpy()
    out = error_inconsistency(a, b, y)
    assert out.ndim == 0 and out.dtype == torch.float64
    assert float(out) == pytest.approx(np.mean(ca != cb))
    # Geirhos' error consistency is Cohen's kappa of the two correctness vectors
    assert float(error_consistency(a, b, y)) == pytest.approx(cohen_kappa_score(ca, cb))
    assert float(error_consistency(a, a, y)) == pytest.approx(1.0)
    assert float(conversion_rate(ens, a, b, y)) == pytest.approx(ce[ca != cb].mean())


def test_undefined_values_are_nan_tensors_with_warning():
    y = torch.tensor([0, 1])
    with pytest.warns(RuntimeWarning, match="no sample"):
        out = conversion_rate(y, y, y, y)
    assert isinstance(out, torch.Tensor) and math.isnan(float(out))
    with pytest.warns(RuntimeWarning, match="always right"):
        assert math.isnan(float(error_consistency(y, y, y)))


def test_bad_inputs():
    y = torch.tensor([0, 1, 2])
    bad(lambda: error_inconsistency(y, y[:2], y), "same shape")
    bad(lambda: error_inconsistency(y[:0], y[:0], y[:0]), "N = 0")
    bad(lambda: conversion_rate(y[:2], y, y, y), "same shape")
    bad(lambda: specialization_angle(torch.tensor([-1.0]), torch.tensor([1.0])), "non-negative")
    bad(lambda: error_consistency(y.float(), y, y), "integer")


def test_validate_args_false_skips_checks():
    # negative confidences pass straight through to atan2 without the check
    out = specialization_angle(torch.tensor([-1.0]), torch.tensor([1.0]), validate_args=False)
    assert float(out) == pytest.approx(-45.0)


def test_specialization_angle_over_dtypes():
    a = torch.tensor([1.0, 0.5, 0.0, 0.3], dtype=torch.float64)
    b = torch.tensor([0.0, 0.5, 1.0, 0.9], dtype=torch.float64)
    assert specialization_angle(a, b)[:3].tolist() == pytest.approx([90.0, 45.0, 0.0])
    assert float(specialization_angle(a[:1], b[:1], degrees=False)[0]) == pytest.approx(math.pi / 2)
    run_over_dtypes(specialization_angle, (a, b), lambda x, y: np.degrees(np.arctan2(x.numpy(), y.numpy())))
