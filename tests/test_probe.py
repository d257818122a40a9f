"""ed.train.probe: the L-BFGS linear probe against scikit-learn, a known linear rule, the feature rankings."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from ensdiv.errors import InvalidInputError
from ensdiv.train import probe


def _data(n=600, d=5, c=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(c, d, generator=g) * 3
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    return x, (x @ w.double().T).argmax(1), w


def test_fit_logistic_matches_sklearn():
    x, y, _ = _data()
    lam = 0.05
    w, b = probe.fit_logistic(x, y, l2=lam, max_iter=500)
    sk = LogisticRegression(C=1 / (lam * len(y)), tol=1e-10, max_iter=5000).fit(x.numpy(), y.numpy())
    ours = torch.softmax(x @ w.T + b, 1).numpy()
    np.testing.assert_allclose(ours, sk.predict_proba(x.numpy()), atol=2e-4)


def test_fit_logistic_multilabel_matches_sklearn_one_vs_rest():
    """Each class of the multi-label objective is scikit-learn's binary LogisticRegression(C=1/(λN))."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(300, 5, generator=g, dtype=torch.float64)
    y = (x[:, :3] + 0.5 * torch.randn(300, 3, generator=g, dtype=torch.float64) > 0).long()
    lam = 0.01
    w, b = probe.fit_logistic_multilabel(x, y, l2=lam)
    assert w.shape == (3, 5) and b.shape == (3,)
    for c in range(3):
        ref = LogisticRegression(C=1 / (lam * 300), tol=1e-10, max_iter=10000).fit(x.numpy(), y[:, c].numpy())
        np.testing.assert_allclose(w[c].numpy(), ref.coef_[0], atol=1e-4)
        np.testing.assert_allclose(b[c].item(), ref.intercept_[0], atol=1e-4)
    with pytest.raises(InvalidInputError, match="shaped \\(300, C\\)"):
        probe.fit_logistic_multilabel(x, y[:, 0], l2=lam)
    with pytest.raises(InvalidInputError, match="0/1 indicators"):
        probe.fit_logistic_multilabel(x, y * 2, l2=lam)
    with pytest.raises(InvalidInputError, match="l2 must be"):
        probe.fit_logistic_multilabel(x, y, l2=-1.0)


def test_probe_recovers_a_known_linear_rule():
    x, y, w = _data(n=2000)
    p = probe.linear_probe(x[:1200], y[:1200], x[1200:1600], y[1200:1600], l2_grid=[1.0, 1e-2, 1e-4])
    assert float(p.accuracy(x[1600:], y[1600:])) > 0.97
    # the learned direction agrees with the rule's (up to the softmax's shift invariance)
    cos = torch.nn.functional.cosine_similarity((p.weight - p.weight.mean(0)).flatten(),
                                                (w.double() - w.double().mean(0)).flatten(), dim=0)
    assert float(cos) > 0.9
    assert p.l2 in (1.0, 1e-2, 1e-4) and p.val_accuracy.shape == (3,)


def test_l2_chosen_on_validation_prefers_stronger_on_ties():
    x, y, _ = _data(n=400)
    p = probe.linear_probe(x[:200], y[:200], x[200:], y[200:], l2_grid=[1e-6, 1e-7])
    assert p.l2 == 1e-6 or float(p.val_accuracy[0]) < float(p.val_accuracy[1])


def test_probe_bad_inputs():
    x, y, _ = _data(n=50)
    with pytest.raises(InvalidInputError, match="dimensions"):
        probe.linear_probe(x, y, x[:, :3], y)
    with pytest.raises(InvalidInputError, match="labels"):
        probe.linear_probe(x, y[:10], x, y)
    with pytest.raises(InvalidInputError, match="NaN"):
        probe.linear_probe(x * float("nan"), y, x, y)
    with pytest.raises(InvalidInputError, match="l2"):
        probe.fit_logistic(x, y, l2=-1.0)


def test_normalize_features():
    x = torch.tensor([[3.0, 4.0], [0.0, 0.0]])
    assert torch.allclose(probe.normalize_features(x), torch.tensor([[0.6, 0.8], [0.0, 0.0]]))
    ref = torch.tensor([[0.0, 1.0], [2.0, 3.0]])
    z = probe.normalize_features(ref, "standardize", reference=ref)
    assert torch.allclose(z.mean(0), torch.zeros(2)) and torch.allclose(z.std(0), torch.ones(2))
    with pytest.raises(InvalidInputError, match="reference"):
        probe.normalize_features(x, "standardize")
    with pytest.raises(InvalidInputError, match="Unknown normalisation"):
        probe.normalize_features(x, "zca")


def test_covariance_ranking_hand_made_case():
    # A: a0 copies b0, a1 is uncorrelated with B, a2 is constant; B: b0, b1 = a noisy half of a0.
    t = torch.arange(8, dtype=torch.float64)
    a1 = torch.tensor([1.0, -1, -1, 1, 1, -1, -1, 1], dtype=torch.float64)  # orthogonal to the centred ramp
    a = torch.stack([t, a1 * 5, torch.ones(8, dtype=torch.float64)], 1)
    b = torch.stack([t, t + torch.tensor([1.0, -1, 1, -1, 1, -1, 1, -1], dtype=torch.float64)], 1)
    order = probe.rank_dimensions(a, b, by="covariance").tolist()
    assert order[0] == 1  # a1: zero correlation with B, the most diverse
    assert order[-1] == 2  # the constant dimension carries nothing: last
    # hand computation of the other scores: mean squared correlation with the other model's live dimensions
    z = torch.cat([a, b], 1)
    c = torch.corrcoef(z.T)
    score_a0 = (c[0, 3] ** 2 + c[0, 4] ** 2) / 2
    score_b1 = (c[4, 0] ** 2 + c[4, 1] ** 2) / 2  # over A's two live dimensions
    assert (order.index(0) < order.index(4)) == bool(score_a0 < score_b1)
    assert probe.rank_dimensions(a, b, by="variance").tolist()[0] == 1  # 5 * a1 has the largest variance
    # the default is the paper's literal "highest to lowest covariance" of each dimension: its variance (#28)
    variances = z.var(0)
    assert probe.rank_dimensions(a, b).tolist() == sorted(range(5), key=lambda i: (-float(variances[i]), i))


def test_rank_and_subsample_bad_inputs():
    with pytest.raises(InvalidInputError, match="same samples"):
        probe.rank_dimensions(torch.ones(5, 2), torch.ones(4, 2))
    with pytest.raises(InvalidInputError, match="Unknown ranking"):
        probe.rank_dimensions(torch.randn(5, 2), torch.randn(5, 2), by="entropy")
    with pytest.raises(InvalidInputError, match="frac_a"):
        probe.subsample_concat(4, 4, 1.5)
    ia, ib = probe.subsample_concat(8, 4, 0.75, seed=3)
    assert len(ia) == 6 and len(ib) == 1 and len(set(ia.tolist())) == 6
