"""Attribution maps (captum), Eq. 7 diversity, and the differentiable Eq. 8 penalty."""

import numpy as np
import pytest
import torch
from metric_cases import bad, run_over_dtypes
from torch import nn

from ensdiv.losses import attribution_variance as attribution_variance_penalty
from ensdiv.metrics.attribution import attribution_diversity, attributions


def linear_model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(2 * 3 * 3, 4))


def test_saliency_of_linear_model_is_abs_weight_row():
    model = linear_model(0)
    x = torch.randn(5, 2, 3, 3)
    t = torch.tensor([0, 1, 2, 3, 0])
    a = attributions(model, x, t)
    w = model[1].weight.detach()
    assert torch.allclose(a, w[t].abs().reshape(5, 2, 3, 3))
    signed = attributions(model, x, t, abs=False)
    assert torch.allclose(signed, w[t].reshape(5, 2, 3, 3))


def test_integrated_gradients_of_linear_model():
    model = linear_model(1)
    x = torch.randn(3, 2, 3, 3)
    t = torch.tensor([1, 2, 3])
    w = model[1].weight.detach()[t].reshape(3, 2, 3, 3)
    for steps in (1, 2, 10):  # IG of a linear model is exact at any number of steps: x * w
        a = attributions(model, x, t, method="integrated_gradients", n_steps=steps)
        assert torch.allclose(a, x * w, atol=1e-5)
    bad(lambda: attributions(model, x, t, method="gradcam"), "method")
    bad(lambda: attributions(model, x, t, method="integrated_gradients", n_steps=0), "n_steps")


def test_attributions_of_several_models_stack():
    models = [linear_model(s) for s in range(3)]
    x = torch.randn(4, 2, 3, 3)
    a = attributions(models, x, torch.zeros(4, dtype=torch.long), batch_size=3)
    assert a.shape == (3, 4, 2, 3, 3)


def test_attribution_diversity_vs_loops():
    g = np.random.default_rng(0)
    attr = g.normal(size=(3, 4, 2, 3, 3))
    want = []
    for n in range(4):
        tot = 0.0
        for c in range(2):
            for i in range(3):
                for j in range(3):
                    vals = attr[:, n, c, i, j]
                    tot += np.mean((vals - vals.mean()) ** 2)
        want.append(tot)
    t = torch.tensor(attr)
    run_over_dtypes(attribution_diversity, (t,), lambda a: np.var(a.numpy(), axis=0).reshape(4, -1).sum(1).mean())
    run_over_dtypes(
        attribution_diversity,
        (t,),
        lambda a: np.var(a.numpy(), axis=0).reshape(4, -1).sum(1),
        reduction="none",
    )
    assert attribution_diversity(t, reduction="none").numpy() == pytest.approx(np.array(want))
    out = attribution_diversity(t)
    assert out.ndim == 0 and float(out) == pytest.approx(np.mean(want))
    assert float(attribution_diversity(t, unbiased=True)) == pytest.approx(np.mean(want) * 3 / 2)
    # identical members and a single member have zero diversity
    assert float(attribution_diversity(t[:1].expand(3, -1, -1, -1, -1))) == 0.0
    assert float(attribution_diversity(t[:1])) == 0.0
    bad(lambda: attribution_diversity(torch.zeros(4, 5)), "members first")
    bad(lambda: attribution_diversity(t[:1], unbiased=True), "at least 2 members")
    bad(lambda: attribution_diversity(t, reduction="sum"), "reduction")
    assert attribution_diversity(torch.zeros(4, 5), validate_args=False).ndim == 0  # unchecked 2-D input


def test_penalty_equals_eq7_and_backpropagates():
    torch.manual_seed(0)
    models = [nn.Sequential(nn.Flatten(), nn.Linear(18, 6), nn.Tanh(), nn.Linear(6, 4)) for _ in range(3)]
    x = torch.randn(5, 2, 3, 3)
    y = torch.tensor([0, 1, 2, 3, 1])
    pen, logits = attribution_variance_penalty(models, x, y, return_logits=True)
    assert logits.shape == (3, 5, 4)
    want = float(attribution_diversity(attributions(models, x, y)))
    assert float(pen.detach()) == pytest.approx(want, rel=1e-5)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 4), y.repeat(3)) - 0.1 * pen
    loss.backward()
    grad = models[0][1].weight.grad
    assert grad is not None and float(grad.abs().sum()) > 0

    # same value through a callable returning (M, N, C)
    def fn(inp):
        return torch.stack([m(inp) for m in models])

    assert float(attribution_variance_penalty(fn, x, y).detach()) == pytest.approx(float(pen.detach()), rel=1e-6)
    bad(lambda: attribution_variance_penalty(models, x, y[:3]), r"\(N,\) = \(5,\)")
