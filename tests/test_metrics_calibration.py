"""Accuracy, NLL, Brier, ECE, AUROC, AUPR, FPR@95 vs scikit-learn, torchmetrics and naive loops."""

import math

import numpy as np
import pytest
import torch
from metric_cases import bad, detection_scores, labels, member_probs, run_over_dtypes

from ensdiv.metrics.calibration import accuracy, aupr, auroc, brier, ece, fpr_at_tpr, nll

#: torchmetrics computes ECE and the ROC / PR curves in float32 internally
LIB_TOL = {"rtol": 1e-6, "atol": 1e-7}


def case(n=300, c=5, seed=0):
    return member_probs(1, n, c, seed=seed)[0], labels(n, c, seed=seed)


def naive_ece(p, y, n_bins):
    conf, pred = p.max(1).values.numpy(), p.argmax(1).numpy()
    correct = (pred == y.numpy()).astype(float)
    total = 0.0
    for b in range(n_bins + 1):  # bin n_bins holds conf == 1 exactly
        idx = [i for i in range(len(conf)) if min(int(math.floor(conf[i] * n_bins)), n_bins) == b]
        if idx:
            total += len(idx) / len(conf) * abs(correct[idx].mean() - conf[idx].mean())
    return total


def naive_nll(p, y):
    a = p.numpy()
    return -np.mean([math.log(a[i, k]) for i, k in enumerate(y.tolist())])


def naive_brier(p, y):
    return np.mean(((p.numpy() - np.eye(p.shape[1])[y.numpy()]) ** 2).sum(1))


def test_classification_metrics_over_dtypes():
    p, y = case()
    run_over_dtypes(accuracy, (p, y), lambda a, b: np.mean(a.numpy().argmax(1) == b.numpy()))
    run_over_dtypes(nll, (p, y), naive_nll)
    run_over_dtypes(brier, (p, y), naive_brier)
    for bins in (1, 10, 15):
        # torchmetrics accumulates the bins in float32 even for float64 input
        run_over_dtypes(ece, (p, y), lambda a, b, bins=bins: naive_ece(a, b, bins), n_bins=bins, **LIB_TOL)


def test_classification_metrics_vs_libraries():
    from sklearn.metrics import accuracy_score, brier_score_loss, log_loss
    from torchmetrics.functional.classification import multiclass_accuracy

    p, y = case(seed=1)
    a, yy = p.numpy(), y.numpy()
    assert float(accuracy(p, y)) == pytest.approx(accuracy_score(yy, a.argmax(1)))
    assert float(accuracy(p, y)) == pytest.approx(float(multiclass_accuracy(p, y, num_classes=5, average="micro")))
    assert float(accuracy(p.log(), y)) == float(accuracy(p, y))  # logits are fine for accuracy
    assert float(nll(p, y)) == pytest.approx(log_loss(yy, a, labels=range(5)))
    assert float(brier(p, y)) == pytest.approx(brier_score_loss(yy, a, labels=range(5)))


def test_ece_hand_case_and_single_class():
    p = torch.tensor([[0.8, 0.2], [0.8, 0.2], [0.4, 0.6]], dtype=torch.float64)
    want = 2 / 3 * abs(0.5 - 0.8) + 1 / 3 * abs(1.0 - 0.6)
    assert float(ece(p, torch.tensor([0, 1, 1]), n_bins=10)) == pytest.approx(want)
    one, y0 = torch.ones(4, 1, dtype=torch.float64), torch.zeros(4, dtype=torch.long)
    assert float(accuracy(one, y0)) == 1.0 and float(nll(one, y0)) == pytest.approx(0.0)
    assert float(ece(one, y0)) == pytest.approx(0.0)


def naive_auroc(sid, sood):
    tot = sum(1.0 if o > i else 0.5 if o == i else 0.0 for o in sood for i in sid)
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


def sk_fpr(sid, sood, tpr):
    from sklearn.metrics import roc_curve

    y = np.r_[np.zeros(len(sid)), np.ones(len(sood))]
    fpr, tpr_curve, _ = roc_curve(y, np.r_[sid, sood], drop_intermediate=False)
    return fpr[np.searchsorted(tpr_curve, tpr - 1e-12)]


def test_detection_vs_sklearn_and_naive_over_dtypes():
    from sklearn.metrics import average_precision_score, roc_auc_score

    sid, sood = detection_scores()

    def sk(fn):
        return lambda a, b: fn(np.r_[np.zeros(len(a)), np.ones(len(b))], np.r_[a.numpy(), b.numpy()])

    run_over_dtypes(auroc, (sid, sood), sk(roc_auc_score), **LIB_TOL)
    run_over_dtypes(auroc, (sid, sood), lambda a, b: naive_auroc(a.numpy(), b.numpy()), **LIB_TOL)
    run_over_dtypes(aupr, (sid, sood), sk(average_precision_score), **LIB_TOL)
    run_over_dtypes(aupr, (sid, sood), lambda a, b: naive_ap(a.numpy(), b.numpy()), **LIB_TOL)
    for t in (0.5, 0.9, 0.95, 1.0):
        run_over_dtypes(fpr_at_tpr, (sid, sood), lambda a, b, t=t: sk_fpr(a.numpy(), b.numpy(), t), tpr=t, **LIB_TOL)
        run_over_dtypes(fpr_at_tpr, (sid, sood), lambda a, b, t=t: naive_fpr(a.numpy(), b.numpy(), t), tpr=t, **LIB_TOL)


def test_detection_keeps_order_of_large_scores():
    # torchmetrics would squash scores outside [0, 1] with a sigmoid: 40 and 50 both become 1.0
    sid = torch.tensor([40.0, 41.0, 42.0], dtype=torch.float64)
    sood = torch.tensor([50.0, 51.0], dtype=torch.float64)
    assert float(auroc(sid, sood)) == 1.0 and float(aupr(sid, sood)) == 1.0
    assert float(fpr_at_tpr(sid, sood)) == 0.0


def test_detection_edge_cases():
    assert float(auroc([1.0, 1.0, 1.0], [1.0, 1.0])) == 0.5  # constant scores
    assert float(auroc([0.0, 0.1], [0.5, 0.9])) == 1.0 and float(aupr([0.0, 0.1], [0.5, 0.9])) == 1.0
    assert float(fpr_at_tpr([0.0, 0.1], [0.5, 0.9])) == 0.0
    assert float(auroc([0.5, 0.9], [0.0, 0.1])) == 0.0  # inverted direction
    assert float(aupr([2.0, 2.0], [2.0, 2.0])) == pytest.approx(0.5)  # constant: chance = OOD fraction
    out = auroc(np.array([0.1, 0.4]), np.array([0.3, 0.9]))
    assert isinstance(out, torch.Tensor) and out.ndim == 0 and out.dtype == torch.float64


def test_bad_inputs():
    p, y = case(n=10)
    bad(lambda: nll(p.log(), y), "looks like logits")
    bad(lambda: ece(p, y[:5]), r"\(N,\) = \(10,\)")
    bad(lambda: brier(p, y + 5), "class indices in 0..4")
    bad(lambda: accuracy(p[None], y), r"\(N, C\)")
    nan = p.clone()
    nan[0, 0] = float("nan")
    bad(lambda: accuracy(nan, y), "NaN")
    bad(lambda: ece(p, y, n_bins=0), "n_bins")
    bad(lambda: accuracy(p[:0], y[:0]), "no samples")
    bad(lambda: auroc([], [1.0]), "empty")
    bad(lambda: auroc(torch.ones(2, 2), torch.ones(2)), r"\(N,\)")
    bad(lambda: fpr_at_tpr([0.0], [1.0], tpr=1.5), "tpr")


def test_validate_args_false_skips_checks():
    p, y = case(n=10)
    out = nll(p.log(), y, validate_args=False)  # log-probabilities: the check would raise
    assert torch.isfinite(out)
