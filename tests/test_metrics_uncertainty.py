"""Uncertainty / OOD scores vs numpy, hand values and properties."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ensdiv.errors import EnsdivError
from ensdiv.metrics.uncertainty import (
    bma_confidence,
    expected_entropy,
    max_logit,
    max_softmax,
    mutual_information,
    pds,
    predictive_entropy,
)


def rand_probs(m=3, n=20, c=4, seed=0, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(m, n, c, generator=g, dtype=torch.float64) * scale).softmax(-1)


def test_pds_and_bma_vs_numpy():
    p = rand_probs()
    a = p.numpy()
    m, n, c = a.shape
    want_pds = [sum(max(a[k, i, j] for k in range(m)) for j in range(c)) / c for i in range(n)]
    want_bma = [max(np.mean(a[:, i, j]) for j in range(c)) for i in range(n)]
    assert pds(p).tolist() == pytest.approx(want_pds)
    assert pds(p, normalize=False).tolist() == pytest.approx([v * c for v in want_pds])
    assert bma_confidence(p).tolist() == pytest.approx(want_bma)


def test_pds_counts_unique_for_one_hot():
    onehot = torch.nn.functional.one_hot(torch.tensor([[0, 1], [0, 2], [0, 1]]), 4).double()  # M=3, N=2
    assert pds(onehot, normalize=False).tolist() == [1.0, 2.0]
    assert pds(onehot).tolist() == [0.25, 0.5]


def test_entropies_vs_numpy():
    p = rand_probs(seed=1)
    a = p.numpy()
    mean = a.mean(0)
    pe = -(mean * np.log(mean)).sum(-1)
    ee = (-(a * np.log(a)).sum(-1)).mean(0)
    assert predictive_entropy(p).numpy() == pytest.approx(pe)
    assert expected_entropy(p).numpy() == pytest.approx(ee)
    assert mutual_information(p).numpy() == pytest.approx(pe - ee)
    assert max_softmax(p).numpy() == pytest.approx(mean.max(-1))
    assert predictive_entropy(p[0]).numpy() == pytest.approx(-(a[0] * np.log(a[0])).sum(-1))


def test_identical_members_have_zero_mi_and_uniform_max_entropy():
    p = rand_probs(m=1, seed=2).expand(4, -1, -1)
    assert float(mutual_information(p).max()) == pytest.approx(0.0, abs=1e-12)
    u = torch.full((2, 3, 5), 0.2, dtype=torch.float64)
    assert predictive_entropy(u).tolist() == pytest.approx([math.log(5)] * 3)


def test_zero_probabilities_are_fine():
    p = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]])
    assert mutual_information(p).tolist() == pytest.approx([math.log(2)])


def test_max_logit():
    z = torch.tensor([[[1.0, 3.0]], [[2.0, -1.0]]])
    assert max_logit(z).tolist() == [1.5]
    assert max_logit(z[0]).tolist() == [3.0]


def test_logits_rejected_where_probs_needed():
    z = torch.randn(3, 5, 4)
    for fn in (pds, bma_confidence, mutual_information, expected_entropy, predictive_entropy):
        with pytest.raises(EnsdivError, match="looks like logits"):
            fn(z)


def test_shape_and_nan_errors():
    with pytest.raises(EnsdivError, match=r"\(M, N, C\)"):
        pds(torch.ones(4, 1) / 1)
    p = rand_probs()
    p[0, 0, 0] = float("nan")
    with pytest.raises(EnsdivError, match="NaN"):
        pds(p)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(1, 8), st.integers(2, 7), st.integers(0, 10_000), st.floats(0.1, 20.0))
def test_properties(m, n, c, seed, scale):
    p = rand_probs(m, n, c, seed, scale)
    mi = mutual_information(p)
    assert bool((mi >= 0).all())
    assert bool((mi <= math.log(min(m, c)) + 1e-9).all())
    s = pds(p, normalize=False)
    assert bool(((s >= 1 - 1e-9) & (s <= min(m, c) + 1e-9)).all())
    sn = pds(p)
    assert bool(((sn >= 1 / c - 1e-9) & (sn <= 1 + 1e-9)).all())
    b = bma_confidence(p)
    assert bool(((b >= 1 / c - 1e-9) & (b <= 1 + 1e-9)).all())
