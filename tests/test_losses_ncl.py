"""design-diversity's NCL losses (ensdiv.losses.ncl) against naive loops, an autograd Hessian and torch's CE."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ensdiv.errors import InvalidInputError, UnknownNameError
from ensdiv.losses import attribution_variance, independent
from ensdiv.losses.ncl import (
    CONSENSUS,
    NCL_LOSSES,
    attribution_penalty,
    balanced,
    consensus_distribution,
    gncl,
    gncl_penalty,
)


def _logits(m=3, b=7, c=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return 2 * torch.randn(m, b, c, generator=g, dtype=torch.float64), torch.randint(0, c, (b,), generator=g)


def _naive_consensus(h: torch.Tensor, how: str, alpha: float = 0.5) -> torch.Tensor:
    m, b, c = h.shape
    p = h.softmax(-1).numpy()
    out = np.zeros((b, c))
    for j in range(b):
        if how == "mean":
            out[j] = torch.softmax(h[:, j].mean(0), -1).numpy()
        elif how == "median":
            med = np.median(p[:, j], axis=0)
            out[j] = med / med.sum()
        elif how == "geometric":
            g = np.exp(np.log(p[:, j]).mean(0))
            out[j] = g / g.sum()
        else:
            votes = np.bincount(h[:, j].argmax(-1).numpy(), minlength=c)
            out[j] = (votes + alpha) / (m + alpha * c)
    return torch.tensor(out)


def _naive_gncl(h, y, lam, how="mean", masked=False):
    """(1/M) Σ_i [CE_i − λ/2 d_iᵀ H d_i], batch mean, with H the autograd Hessian of CE at f = log p_f."""
    m, b, _ = h.shape
    pf = _naive_consensus(h, how)
    total = 0.0
    for j in range(b):
        f = pf[j].log()
        hess = torch.autograd.functional.hessian(lambda z, j=j: F.cross_entropy(z[None], y[j : j + 1]), f)
        for i in range(m):
            ce = float(F.cross_entropy(h[i, j][None], y[j : j + 1]))
            d = h[i, j] - f
            pen = float(d @ hess @ d)
            if masked and int(h[i, j].argmax()) != int(y[j]):
                pen = 0.0
            total += (ce - lam / 2 * pen) / m
    return total / b


@pytest.mark.parametrize("how", CONSENSUS)
def test_consensus_matches_naive(how):
    h, _ = _logits()
    torch.testing.assert_close(consensus_distribution(h, how).double(), _naive_consensus(h, how), atol=1e-6, rtol=0)


def test_geometric_consensus_equals_average():
    h, y = _logits(m=4, seed=3)
    torch.testing.assert_close(consensus_distribution(h, "geometric"), consensus_distribution(h, "mean"))
    assert float(gncl(h, y, consensus="geometric")) == pytest.approx(float(gncl(h, y, consensus="mean")), abs=1e-6)


def test_penalty_is_the_explicit_hessian_quadratic_form():
    h, y = _logits()
    pf = consensus_distribution(h, "mean").double()
    pen = gncl_penalty(h, pf)
    for j in range(h.shape[1]):
        f = h[:, j].mean(0)  # Pysembles' f (mean logits): D annihilates the constant shift to log p_f
        hess = torch.autograd.functional.hessian(lambda z, j=j: F.cross_entropy(z[None], y[j : j + 1]), f)
        for i in range(h.shape[0]):
            d = h[i, j] - f
            assert float(pen[i, j]) == pytest.approx(float(d @ hess @ d), rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("how", CONSENSUS)
@pytest.mark.parametrize("masked", [False, True])
def test_gncl_matches_naive_loop(how, masked):
    h, y = _logits(seed=1)
    assert float(gncl(h, y, lam=0.7, consensus=how, masked=masked)) == pytest.approx(
        _naive_gncl(h, y, 0.7, how, masked), rel=1e-5)


@pytest.mark.parametrize("how", CONSENSUS)
def test_gncl_lambda_zero_is_independent(how):
    h, y = _logits(seed=2)
    assert float(gncl(h, y, lam=0.0, consensus=how)) == pytest.approx(float(independent(h, y)), abs=1e-7)
    assert float(gncl(h, y, lam=0.0, masked=True)) == pytest.approx(float(independent(h, y)), abs=1e-7)


def test_masked_zeroes_exactly_the_wrong_members():
    h, y = _logits(m=3, b=6, c=4, seed=4)
    pen = gncl_penalty(h, consensus_distribution(h))
    right = (h.argmax(-1) == y[None]).double()
    assert 0 < right.sum() < right.numel()  # some members right, some wrong
    expect = float(independent(h, y)) - 0.5 * 0.3 * float((pen * right).mean())
    assert float(gncl(h, y, lam=0.3, masked=True)) == pytest.approx(expect, rel=1e-6)
    # the penalty that remains is exactly the sum over the right (member, sample) pairs: perturbing a wrong
    # member's penalty (scaling its d_i) leaves the masked loss's penalty part unchanged
    per = pen * right
    assert torch.equal(per[right == 0], torch.zeros_like(per[right == 0]))
    # every member wrong on every sample: no penalty at all
    y_wrong = (h.argmax(-1)[0] + 1) % 4
    h2 = torch.full_like(h, -5.0).scatter(-1, ((y_wrong + 1) % 4).expand(3, -1)[..., None], 5.0)
    h2 = h2 + 0.1 * h  # members differ, so the unmasked penalty is non-zero
    assert float(gncl(h2, y_wrong, lam=0.9)) != pytest.approx(float(independent(h2, y_wrong)), abs=1e-6)
    assert float(gncl(h2, y_wrong, lam=0.9, masked=True)) == pytest.approx(float(independent(h2, y_wrong)), abs=1e-9)


def test_balanced_limits_and_naive():
    h, y = _logits(seed=5)
    f = h.mean(0)
    assert float(balanced(h, y, lam=1.0)) == pytest.approx(float(F.cross_entropy(f, y)), rel=1e-6)
    assert float(balanced(h, y, lam=0.0)) == pytest.approx(float(independent(h, y)), rel=1e-6)
    naive = 0.2 * float(F.cross_entropy(f, y)) + 0.8 * np.mean([float(F.cross_entropy(z, y)) for z in h])
    assert float(balanced(h, y, lam=0.2)) == pytest.approx(naive, rel=1e-6)


def test_registry_calling_convention():
    h, y = _logits(seed=6)
    for name, how in [("gncl_mean", "mean"), ("gncl_median", "median"), ("gncl_geometric", "geometric"),
                      ("gncl_vote", "vote")]:
        assert float(NCL_LOSSES[name](h, y, lam=0.2)) == pytest.approx(float(gncl(h, y, lam=0.2, consensus=how)))
    assert float(NCL_LOSSES["gncl_masked"](h, y, lam=0.2)) == pytest.approx(float(gncl(h, y, lam=0.2, masked=True)))
    assert float(NCL_LOSSES["gncl"](h, y, lam=0.2, consensus="vote", vote_smoothing=1.0)) == pytest.approx(
        float(gncl(h, y, lam=0.2, consensus="vote", vote_smoothing=1.0)))
    assert float(NCL_LOSSES["balanced"](h, y, lam=0.2)) == pytest.approx(float(balanced(h, y, lam=0.2)))


def test_vote_consensus_has_no_gradient_but_members_do():
    h, y = _logits(seed=7)
    hg = h.clone().requires_grad_(True)
    assert not consensus_distribution(hg, "vote").requires_grad
    gncl(hg, y, lam=0.5, consensus="vote").backward()
    assert torch.isfinite(hg.grad).all() and hg.grad.abs().sum() > 0


def test_attribution_penalty_matches_its_parts():
    torch.manual_seed(0)
    members = [nn.Sequential(nn.Flatten(), nn.Linear(8, 6), nn.Tanh(), nn.Linear(6, 3)) for _ in range(3)]
    x, y = torch.rand(5, 2, 2, 2), torch.tensor([0, 1, 2, 0, 1])
    logits = torch.stack([m(x) for m in members])
    expect = float(independent(logits, y).detach()) - 0.1 * float(attribution_variance(members, x, y).detach())
    loss = attribution_penalty(members, x, y, lam=0.1)
    assert float(loss.detach()) == pytest.approx(expect, rel=1e-5)
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for m in members for p in m.parameters())


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: gncl(torch.zeros(3, 4), torch.zeros(3, dtype=torch.long)), r"\(M, B, C\)"),
        (lambda: gncl(torch.zeros(2, 3, 4), torch.zeros(2, dtype=torch.long)), "B = 3"),
        (lambda: gncl(torch.zeros(2, 3, 4, dtype=torch.long), torch.zeros(3, dtype=torch.long)), "floating"),
        (lambda: gncl(torch.zeros(2, 3, 4), torch.zeros(3, dtype=torch.long), consensus="mode"), "consensus"),
        (lambda: gncl(torch.zeros(2, 3, 4), torch.zeros(3, dtype=torch.long), consensus="vote", vote_smoothing=0),
         "vote_smoothing"),
        (lambda: balanced(torch.zeros(2, 3, 4), torch.zeros(3, dtype=torch.long), lam=1.5), "0 <= lam <= 1"),
        (lambda: consensus_distribution(torch.zeros(3, 4)), r"\(M, B, C\)"),
        (lambda: attribution_penalty([nn.Flatten()], torch.zeros(2, 1, 2, 2), torch.zeros(2, 4)), r"\(B,\)"),
    ],
)
def test_bad_inputs(call, match):
    with pytest.raises((InvalidInputError, UnknownNameError), match=match):
        call()
