"""Shared validators: one clear sentence per bad input, ValueError + EnsdivError, dtype-aware tolerance."""

import numpy as np
import pytest
import torch
from metric_cases import bad, member_logits, member_probs

import ensdiv as ed
from ensdiv.metrics import disagreement, oracle_disagreement, pds
from ensdiv.metrics.checks import (
    as_tensor,
    check_labels,
    check_preds,
    check_probs,
    compute_dtype,
    prob_tolerance,
)


def test_every_check_raises_value_error_and_ensdiv_error():
    bad(lambda: check_preds(torch.zeros(5, dtype=torch.long)), r"shaped \(M, N\), got shape \(5,\)")
    bad(lambda: check_preds(torch.zeros(2, 5)), "argmax")
    bad(lambda: check_preds(torch.tensor([[-1, 0]])), "negative")
    bad(lambda: check_labels(torch.zeros(4, dtype=torch.long), 3), r"\(N,\) = \(3,\)")
    bad(lambda: check_labels(torch.tensor([0, 3]), 2, 3), "0..2")
    bad(lambda: check_labels(torch.tensor([0.0, 1.0])), "integer")
    bad(lambda: check_labels(torch.zeros(2, 2, dtype=torch.long)), r"shaped \(N,\)")
    bad(lambda: check_probs(torch.randn(2, 3, 4)), "looks like logits")
    bad(lambda: check_probs(torch.ones(3, 4) / 4), r"\(M, N, C\)")
    bad(lambda: check_probs(torch.ones(2, 3, 4, dtype=torch.long)), "floating")
    bad(lambda: as_tensor(torch.tensor([1.0, float("nan")]), "x"), "NaN")
    bad(lambda: as_tensor(torch.tensor([1.0, float("inf")]), "x"), "infinite")
    bad(lambda: as_tensor(object(), "x"), "tensor or array")


def test_public_error_class_is_exported():
    assert issubclass(ed.errors.InvalidInputError, ValueError)
    assert issubclass(ed.errors.InvalidInputError, ed.EnsdivError)


def test_numpy_and_list_inputs_accepted():
    p = np.array([[0, 1, 1], [0, 1, 2]])
    assert float(disagreement(p)) == pytest.approx(1 / 3)
    assert float(oracle_disagreement(p, [0, 1, 1])) == pytest.approx(1 / 3)
    assert pds(np.full((2, 1, 2), 0.5)).tolist() == [0.5]


def test_label_mismatch_in_metric():
    bad(
        lambda: oracle_disagreement(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, dtype=torch.long)),
        r"\(N,\) = \(3,\)",
    )


def test_tolerance_follows_dtype():
    assert prob_tolerance(torch.float64) == prob_tolerance(torch.float32) == 1e-4
    assert prob_tolerance(torch.bfloat16) == pytest.approx(8 * 2**-7)
    assert prob_tolerance(torch.float16) == pytest.approx(8 * 2**-10)
    assert compute_dtype(torch.bfloat16) == compute_dtype(torch.float16) == torch.float32
    assert compute_dtype(torch.float32) == torch.float32 and compute_dtype(torch.int64) == torch.float64


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64])
@pytest.mark.parametrize("c", [2, 10, 1000])
def test_low_precision_softmax_passes(dtype, c):
    # softmax computed in the low dtype itself (what a bf16 autocast forward gives)
    z = member_logits(3, 64, c, seed=c, scale=4.0).to(dtype)
    check_probs(z.softmax(-1))
    check_probs(member_probs(3, 64, c, seed=c).to(dtype))


def test_float32_rows_off_by_more_than_tolerance_are_rejected():
    p = member_probs(2, 4, 3, seed=1).float()
    p[0, 0] *= 1.001  # row sum 1.001: fine in bf16, not in float32
    bad(lambda: check_probs(p), "within 0.0001")
    check_probs(p.bfloat16())


def test_validate_false_only_converts():
    assert check_preds(np.array([[0.0, 1.0]]), validate=False).dtype == torch.int64
    x = check_probs(torch.randn(2, 3), validate=False)
    assert x.shape == (2, 3)
    assert torch.isnan(as_tensor([float("nan")], "x", validate=False)).all()
