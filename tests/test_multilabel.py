"""VOC's 11-point interpolated AP / mAP (training-methods Fig. 7's downstream score) against a hand-computed
case and the VOC2007 devkit's rule written out naively."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score

import ensdiv as ed
from ensdiv.errors import InvalidInputError

ap11 = ed.metrics.average_precision_11pt
map11 = ed.metrics.mean_average_precision_11pt


def devkit_ap11(scores: np.ndarray, targets: np.ndarray) -> float:
    """VOCevalcls (VOC2007) transcribed: rank by descending score, cut after every item, 11 recalls."""
    order = np.argsort(-scores, kind="stable")
    tp = np.cumsum(targets[order] == 1)
    fp = np.cumsum(targets[order] == 0)
    rec = tp / (targets == 1).sum()
    prec = tp / (tp + fp)
    ap = 0.0
    for t in np.arange(0, 1.1, 0.1):
        p = prec[rec >= t - 1e-12]
        ap += (p.max() if p.size else 0.0) / 11
    return ap


def test_hand_computed_case():
    # cuts: (R 1/3, P 1), (1/3, 1/2), (2/3, 2/3), (2/3, 1/2), (1, 3/5): recalls 0-0.3 -> 1, 0.4-0.6 -> 2/3,
    # 0.7-1 -> 3/5
    got = ap11(torch.tensor([0.9, 0.8, 0.7, 0.6, 0.5]), torch.tensor([1, 0, 1, 0, 1]))
    assert float(got) == pytest.approx((4 * 1 + 3 * 2 / 3 + 4 * 3 / 5) / 11)
    assert got.dtype == torch.float32 and got.dim() == 0  # the scores' dtype (computed in float64)
    assert ap11(torch.tensor([9, 8, 7, 6, 5]), torch.tensor([1, 0, 1, 0, 1])).dtype == torch.float64  # integer


def test_a_recall_exactly_on_the_grid_counts():
    # 10 positives; the cut after the third has recall exactly 3/10 and precision 1, so t = 0.3 gets 1
    targets = torch.tensor([1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1])
    got = ap11(torch.arange(11, 0, -1).double(), targets)
    assert float(got) == pytest.approx((4 * 1 + 7 * 10 / 11) / 11)


def test_top_ranked_negative_does_not_get_the_free_point_at_recall_zero():
    # the curve's appended (R 0, P 1) is not a cut: with a negative ranked first, precision never reaches 1
    got = ap11(torch.tensor([0.9, 0.8]), torch.tensor([0, 1]))
    assert float(got) == pytest.approx(0.5)  # every recall's best precision is 1/2


@pytest.mark.parametrize("seed", range(5))
def test_equals_the_devkit_rule_without_ties_and_differs_from_sklearns_average_precision(seed):
    rng = np.random.default_rng(seed)
    scores = rng.permutation(200).astype(float) / 200  # distinct scores
    targets = (rng.random(200) < 0.3).astype(int)
    targets[0] = 1
    got = float(ap11(torch.tensor(scores), torch.tensor(targets)))
    assert got == pytest.approx(devkit_ap11(scores, targets), abs=1e-12)
    assert got != pytest.approx(average_precision_score(targets, scores), abs=1e-6)  # not the step-wise AP


def test_ties_enter_together_so_the_input_order_does_not_matter():
    scores, targets = torch.tensor([0.5, 0.5, 0.2]), torch.tensor([0, 1, 1])
    a, b = ap11(scores, targets), ap11(scores.flip(0), targets.flip(0))
    assert float(a) == float(b)
    # the tied pair is one cut (R 1/2, P 1/2); then (1, 2/3): recalls 0-0.5 -> 2/3, 0.6-1 -> 2/3
    assert float(a) == pytest.approx(2 / 3)


def test_map_is_the_mean_over_classes():
    rng = np.random.default_rng(0)
    scores = rng.random((50, 4))
    targets = (rng.random((50, 4)) < 0.4).astype(int)
    targets[0] = 1
    want = np.mean([devkit_ap11(scores[:, c], targets[:, c]) for c in range(4)])
    assert float(map11(torch.tensor(scores), torch.tensor(targets))) == pytest.approx(want, abs=1e-12)


def test_bad_inputs_are_one_sentence():
    with pytest.raises(InvalidInputError, match="at least one positive"):
        ap11(torch.tensor([0.1, 0.2]), torch.tensor([0, 0]))
    with pytest.raises(InvalidInputError, match="0 \\(negative\\) and 1"):
        ap11(torch.tensor([0.1, 0.2]), torch.tensor([0, 2]))
    with pytest.raises(InvalidInputError, match="one shape"):
        ap11(torch.tensor([0.1, 0.2]), torch.tensor([0, 1, 1]))
    with pytest.raises(InvalidInputError, match="NaN"):
        ap11(torch.tensor([0.1, float("nan")]), torch.tensor([0, 1]))
    with pytest.raises(InvalidInputError, match=r"\(N, C\)"):
        map11(torch.tensor([0.1, 0.2]), torch.tensor([0, 1]))
    with pytest.raises(InvalidInputError, match="at least one positive"):
        map11(torch.tensor([[0.1, 0.3], [0.2, 0.4]]), torch.tensor([[1, 0], [0, 0]]))  # class 1: no positive
