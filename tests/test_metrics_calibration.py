"""Accuracy, NLL, Brier, ECE, AUROC, AUPR, FPR@95 vs naive implementations."""

import math

import numpy as np
import pytest
import torch

from ensdiv.errors import EnsdivError
from ensdiv.metrics.calibration import accuracy, aupr, auroc, brier, ece, fpr_at_tpr, nll


def rand_case(n=300, c=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    p = (torch.randn(n, c, generator=g, dtype=torch.float64) * 2).softmax(-1)
    y = torch.randint(0, c, (n,), generator=g)
    return p, y


def naive_ece(p, y, n_bins):
    conf = p.max(1).values.numpy()
    pred = p.argmax(1).numpy()
    correct = (pred == y.numpy()).astype(float)
    total = 0.0
    for b in range(n_bins + 1):  # bin n_bins holds conf == 1 exactly
        idx = [i for i in range(len(conf)) if min(int(math.floor(conf[i] * n_bins)), n_bins) == b]
        if idx:
            total += len(idx) / len(conf) * abs(correct[idx].mean() - conf[idx].mean())
    return total


def test_classification_metrics_vs_loops():
    p, y = rand_case()
    a, yy = p.numpy(), y.numpy()
    assert accuracy(p, y) == pytest.approx(np.mean(a.argmax(1) == yy))
    assert accuracy(p.log(), y) == accuracy(p, y)  # logits are fine for accuracy
    assert nll(p, y) == pytest.approx(-np.mean([math.log(a[i, yy[i]]) for i in range(len(yy))]))
    onehot = np.eye(5)[yy]
    assert brier(p, y) == pytest.approx(np.mean(((a - onehot) ** 2).sum(1)))
    for bins in (1, 10, 15):
        assert ece(p, y, n_bins=bins) == pytest.approx(
            naive_ece(p, y, bins), abs=1e-6
        )  # torchmetrics sums in float32


def test_ece_hand_case():
    # two samples at confidence 0.8 (one right), one at 0.6 (right); 10 bins
    p = torch.tensor([[0.8, 0.2], [0.8, 0.2], [0.4, 0.6]], dtype=torch.float64)
    y = torch.tensor([0, 1, 1])
    want = 2 / 3 * abs(0.5 - 0.8) + 1 / 3 * abs(1.0 - 0.6)
    assert ece(p, y, n_bins=10) == pytest.approx(want)


def test_single_class():
    p = torch.ones(4, 1, dtype=torch.float64)
    y = torch.zeros(4, dtype=torch.long)
    assert accuracy(p, y) == 1.0 and nll(p, y) == pytest.approx(0.0) and ece(p, y) == pytest.approx(0.0)


def naive_auroc(sid, sood):
    tot = 0.0
    for o in sood:
        for i in sid:
            tot += 1.0 if o > i else 0.5 if o == i else 0.0
    return tot / (len(sid) * len(sood))


def naive_ap(sid, sood):
    scores = np.concatenate([sid, sood])
    y = np.concatenate([np.zeros(len(sid)), np.ones(len(sood))])
    ap, prev_recall = 0.0, 0.0
    for t in sorted(set(scores), reverse=True):
        flagged = scores >= t
        tp = (flagged & (y == 1)).sum()
        recall, precision = tp / len(sood), tp / flagged.sum()
        ap += (recall - prev_recall) * precision
        prev_recall = recall
    return ap


def naive_fpr(sid, sood, tpr):
    best = 1.0
    for t in sorted(set(np.concatenate([sid, sood])).union({np.inf})):
        if np.mean(sood >= t) >= tpr:
            best = min(best, np.mean(sid >= t))
    return best


def test_detection_vs_naive():
    g = np.random.default_rng(0)
    sid = np.round(g.normal(0, 1, 80), 1)  # rounding creates ties
    sood = np.round(g.normal(1, 1, 50), 1)
    assert auroc(torch.tensor(sid), torch.tensor(sood)) == pytest.approx(naive_auroc(sid, sood))
    assert aupr(sid, sood) == pytest.approx(naive_ap(sid, sood))
    for t in (0.5, 0.95, 1.0):
        assert fpr_at_tpr(sid, sood, tpr=t) == pytest.approx(naive_fpr(sid, sood, t))


def test_detection_edge_cases():
    assert auroc([1.0, 1.0, 1.0], [1.0, 1.0]) == 0.5  # constant scores
    assert auroc([0.0, 0.1], [0.5, 0.9]) == 1.0 and aupr([0.0, 0.1], [0.5, 0.9]) == 1.0
    assert fpr_at_tpr([0.0, 0.1], [0.5, 0.9]) == 0.0
    assert auroc([0.5, 0.9], [0.0, 0.1]) == 0.0  # inverted direction
    assert aupr([2.0, 2.0], [2.0, 2.0]) == pytest.approx(0.5)  # constant: chance = OOD fraction
    with pytest.raises(EnsdivError, match="empty"):
        auroc([], [1.0])
    with pytest.raises(EnsdivError, match=r"\(N,\)"):
        auroc(torch.ones(2, 2), torch.ones(2))
    with pytest.raises(EnsdivError, match="tpr"):
        fpr_at_tpr([0.0], [1.0], tpr=1.5)


def test_bad_inputs():
    p, y = rand_case(n=10)
    with pytest.raises(EnsdivError, match="looks like logits"):
        nll(p.log(), y)
    with pytest.raises(EnsdivError, match=r"\(N,\) = \(10,\)"):
        ece(p, y[:5])
    with pytest.raises(EnsdivError, match="class indices in 0..4"):
        brier(p, y + 5)
    with pytest.raises(EnsdivError, match=r"\(N, C\)"):
        accuracy(p[None], y)
    bad = p.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(EnsdivError, match="NaN"):
        accuracy(bad, y)
    with pytest.raises(EnsdivError, match="n_bins"):
        ece(p, y, n_bins=0)
