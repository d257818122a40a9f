"""Shared validators: one clear sentence per bad input."""

import numpy as np
import pytest
import torch

from ensdiv.errors import EnsdivError
from ensdiv.metrics import disagreement, oracle_disagreement, pds
from ensdiv.metrics._checks import as_tensor, check_labels, check_preds, check_probs


def test_messages():
    with pytest.raises(EnsdivError, match=r"shaped \(M, N\), got shape \(5,\)"):
        check_preds(torch.zeros(5, dtype=torch.long))
    with pytest.raises(EnsdivError, match="argmax"):
        check_preds(torch.zeros(2, 5))
    with pytest.raises(EnsdivError, match="negative"):
        check_preds(torch.tensor([[-1, 0]]))
    with pytest.raises(EnsdivError, match=r"\(N,\) = \(3,\)"):
        check_labels(torch.zeros(4, dtype=torch.long), 3)
    with pytest.raises(EnsdivError, match="0..2"):
        check_labels(torch.tensor([0, 3]), 2, 3)
    with pytest.raises(EnsdivError, match="integer"):
        check_labels(torch.tensor([0.0, 1.0]))
    with pytest.raises(EnsdivError, match="looks like logits"):
        check_probs(torch.randn(2, 3, 4))
    with pytest.raises(EnsdivError, match="NaN"):
        as_tensor(torch.tensor([1.0, float("nan")]), "x")
    with pytest.raises(EnsdivError, match="infinite"):
        as_tensor(torch.tensor([1.0, float("inf")]), "x")
    with pytest.raises(EnsdivError, match="tensor or array"):
        as_tensor(object(), "x")


def test_numpy_inputs_accepted():
    p = np.array([[0, 1, 1], [0, 1, 2]])
    assert disagreement(p) == pytest.approx(1 / 3)
    assert oracle_disagreement(p, np.array([0, 1, 1])) == pytest.approx(1 / 3)
    assert pds(np.full((2, 1, 2), 0.5)).tolist() == [0.5]


def test_label_mismatch_in_metric():
    with pytest.raises(EnsdivError, match=r"\(N,\) = \(3,\)"):
        oracle_disagreement(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, dtype=torch.long))
