"""Uncertainty / OOD scores vs naive loops and scipy, over float32, float64 and bfloat16."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from metric_cases import INPUT_TOL, assert_close, bad, member_logits, member_probs, run_over_dtypes

import ensdiv as ed
from ensdiv.metrics.uncertainty import (
    bma_confidence,
    expected_entropy,
    max_logit,
    max_softmax,
    mutual_information,
    pds,
    predictive_entropy,
)


def naive_pds(p, normalize=True):
    a = p.numpy()
    m, n, c = a.shape
    s = [sum(max(a[k, i, j] for k in range(m)) for j in range(c)) for i in range(n)]
    return [v / c for v in s] if normalize else s


def naive_bma(p):
    a = p.numpy()
    return [max(np.mean(a[:, i, j]) for j in range(a.shape[2])) for i in range(a.shape[1])]


def scipy_entropy(p):
    from scipy.stats import entropy

    return entropy(p.numpy(), axis=-1)


def test_pds_and_bma_over_dtypes():
    p = member_probs(3, 20, 4)
    run_over_dtypes(pds, (p,), naive_pds)
    run_over_dtypes(lambda x: pds(x, normalize=False), (p,), lambda x: naive_pds(x, normalize=False))
    run_over_dtypes(bma_confidence, (p,), naive_bma)
    run_over_dtypes(max_softmax, (p,), naive_bma)
    run_over_dtypes(max_softmax, (p[0],), lambda x: x.numpy().max(-1))


def naive_entropy(p):
    a = p.numpy()
    return -np.where(a > 0, a * np.log(np.where(a > 0, a, 1.0)), 0.0).sum(-1)


@pytest.mark.parametrize("h", [scipy_entropy, naive_entropy])
def test_entropies_over_dtypes(h):
    # scipy renormalises its input, so it is the reference only where rows sum to 1 in the dtype
    dtypes = (torch.float32, torch.float64) if h is scipy_entropy else (torch.float32, torch.float64, torch.bfloat16)
    p = member_probs(3, 20, 4, seed=1)
    run_over_dtypes(predictive_entropy, (p,), lambda x: h(x.mean(0)), dtypes=dtypes)
    run_over_dtypes(predictive_entropy, (p[0],), h, dtypes=dtypes)
    run_over_dtypes(expected_entropy, (p,), lambda x: h(x).mean(0), dtypes=dtypes)
    run_over_dtypes(mutual_information, (p,), lambda x: np.maximum(h(x.mean(0)) - h(x).mean(0), 0), dtypes=dtypes)


def test_max_logit_over_dtypes():
    z = member_logits(3, 10, 5, seed=2)
    run_over_dtypes(max_logit, (z,), lambda x: x.numpy().mean(0).max(-1))
    run_over_dtypes(max_logit, (z[0],), lambda x: x.numpy().max(-1))
    assert max_logit(torch.tensor([[[1.0, 3.0]], [[2.0, -1.0]]])).tolist() == [1.5]


@pytest.mark.parametrize("c", [10, 1000])
def test_pds_of_bf16_softmax_matches_float32(c):
    z = member_logits(5, 64, c, seed=3, scale=3.0)
    probs = z.float().softmax(-1)
    out = ed.metrics.pds(probs.bfloat16())  # was rejected as "looks like logits"
    assert out.dtype == torch.float32
    rtol, atol = INPUT_TOL[torch.bfloat16]
    assert_close(out, ed.metrics.pds(probs), rtol=rtol, atol=atol / c)
    # a softmax computed in bf16 itself (autocast) passes too
    assert_close(ed.metrics.pds(z.bfloat16().softmax(-1)), ed.metrics.pds(probs), rtol=rtol, atol=atol / c)
    for fn in (mutual_information, predictive_entropy, bma_confidence):
        assert_close(fn(probs.bfloat16()), fn(probs), rtol=rtol, atol=atol)


def test_pds_counts_unique_for_one_hot():
    onehot = torch.nn.functional.one_hot(torch.tensor([[0, 1], [0, 2], [0, 1]]), 4).double()  # M=3, N=2
    assert pds(onehot, normalize=False).tolist() == [1.0, 2.0]
    assert pds(onehot).tolist() == [0.25, 0.5]


def test_identical_members_have_zero_mi_and_uniform_max_entropy():
    p = member_probs(1, 20, 4, seed=2).expand(4, -1, -1)
    assert float(mutual_information(p).max()) == pytest.approx(0.0, abs=1e-12)
    u = torch.full((2, 3, 5), 0.2, dtype=torch.float64)
    assert predictive_entropy(u).tolist() == pytest.approx([math.log(5)] * 3)


def test_zero_probabilities_are_fine():
    assert mutual_information(torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]])).tolist() == pytest.approx([math.log(2)])


def test_bad_inputs():
    z = torch.randn(3, 5, 4)
    for fn in (pds, bma_confidence, mutual_information, expected_entropy, predictive_entropy, max_softmax):
        bad(lambda fn=fn: fn(z), "looks like logits")
    bad(lambda: pds(torch.ones(4, 1)), r"\(M, N, C\)")
    bad(lambda: max_logit(torch.ones(4)), r"\(N, C\)")
    p = member_probs(3, 20, 4)
    p[0, 0, 0] = float("nan")
    bad(lambda: pds(p), "NaN")


def test_validate_args_false_skips_checks():
    z = torch.randn(3, 5, 4, generator=torch.Generator().manual_seed(0))
    out = pds(z, validate_args=False)  # logits: the check would raise; the fast path computes anyway
    assert out.shape == (5,)
    assert torch.equal(out, z.max(0).values.sum(-1) / 4)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(1, 8), st.integers(2, 7), st.integers(0, 10_000), st.floats(0.1, 20.0))
def test_properties(m, n, c, seed, scale):
    p = member_probs(m, n, c, seed=seed, scale=scale)
    mi = mutual_information(p)
    assert bool((mi >= 0).all()) and bool((mi <= math.log(min(m, c)) + 1e-9).all())
    s = pds(p, normalize=False)
    assert bool(((s >= 1 - 1e-9) & (s <= min(m, c) + 1e-9)).all())
    b = bma_confidence(p)
    assert bool(((b >= 1 / c - 1e-9) & (b <= 1 + 1e-9)).all())
