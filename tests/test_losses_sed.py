"""SED-chapter losses against naive loops and hand computations (A2D, α_n, subset sampler, DivDis MI)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from ensdiv import losses
from ensdiv.errors import InvalidInputError, UnknownNameError


def _a2d_loop(probs: torch.Tensor, pairs: list[tuple[int, int]]) -> torch.Tensor:
    m, b, _ = probs.shape
    out = torch.zeros(b, dtype=torch.float64)
    for n in range(b):
        vals = []
        for i, j in pairs:
            pi = probs[i, n].tolist()
            yhat = max(range(len(pi)), key=lambda c: pi[c])
            a, c = pi[yhat], float(probs[j, n, yhat])
            vals.append(-math.log(a * (1 - c) + (1 - a) * c + 1e-9))
        out[n] = sum(vals) / len(vals)
    return out


def test_a2d_all_pairs_matches_scalar_loop():
    probs = torch.randn(4, 7, 5, generator=torch.Generator().manual_seed(0)).softmax(-1).double()
    pairs = list(itertools.combinations(range(4), 2))
    torch.testing.assert_close(losses.a2d_pairs(probs, pairs="all"), _a2d_loop(probs, pairs))


def test_a2d_one_vs_rest_matches_scalar_loop_with_the_drawn_member():
    probs = torch.randn(5, 6, 3, generator=torch.Generator().manual_seed(1)).softmax(-1).double()
    r = int(torch.randint(0, 5, (1,), generator=torch.Generator().manual_seed(3)))
    got = losses.a2d_pairs(probs, pairs="one_vs_rest", generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(got, _a2d_loop(probs, [(i, r) for i in range(5) if i != r]))


def test_a2d_gradient_flows_through_both_members():
    logits = torch.randn(2, 4, 3, requires_grad=True)
    losses.a2d_pairs(logits.softmax(-1)).sum().backward()
    assert logits.grad[0].abs().sum() > 0 and logits.grad[1].abs().sum() > 0


def test_a2d_vectorised_gradients_match_a_loop_over_pairs():
    """One gather for all pairs gives the gradient a Python loop over the pairs gives (M = 6, all pairs)."""
    logits = torch.randn(6, 5, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    a, b = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    losses.a2d_pairs(a.softmax(-1), pairs="all").sum().backward()
    probs, terms = b.softmax(-1), []
    for i, j in itertools.combinations(range(6), 2):
        p_i, yhat = probs[i].max(-1)
        p_j = probs[j].gather(-1, yhat[:, None])[:, 0]
        terms.append(-torch.log(p_i * (1 - p_j) + (1 - p_i) * p_j + 1e-9))
    torch.stack(terms).mean(0).sum().backward()
    torch.testing.assert_close(a.grad, b.grad)


def test_a2d_bad_inputs():
    with pytest.raises(InvalidInputError):
        losses.a2d_pairs(torch.rand(1, 3, 2))  # one member
    with pytest.raises(InvalidInputError):
        losses.a2d_pairs(torch.rand(3, 2))  # not (M, B, C)
    with pytest.raises(UnknownNameError):
        losses.a2d_pairs(torch.rand(2, 3, 2), pairs="ring")


def test_sed_weights_batch_mean_is_inverse_mean_ce_and_detached():
    logits = torch.randn(3, 16, 4, generator=torch.Generator().manual_seed(2), requires_grad=True)
    y = torch.randint(0, 4, (16,), generator=torch.Generator().manual_seed(2))
    w = losses.sed_weights(logits, y)
    ce = torch.nn.functional.cross_entropy(logits.detach().mean(0), y, reduction="none")
    torch.testing.assert_close(w.mean(), 1 / ce.mean())
    torch.testing.assert_close(w, ce / ce.mean() ** 2)
    assert not w.requires_grad


def test_sed_gradient_does_not_flow_through_alpha():
    logits = torch.randn(2, 8, 3, generator=torch.Generator().manual_seed(4), requires_grad=True)
    y = torch.randint(0, 3, (8,), generator=torch.Generator().manual_seed(4))
    lam = 0.7
    losses.sed(logits, y, lam=lam, pairs="all").backward()
    # same loss with α_n passed in as constants
    ref = logits.detach().clone().requires_grad_(True)
    w = losses.sed_weights(ref.detach(), y)
    loss = losses.independent(ref, y) + lam * (w * losses.a2d_pairs(ref.softmax(-1))).mean()
    loss.backward()
    torch.testing.assert_close(logits.grad, ref.grad)


def test_sed_lambda_zero_is_independent():
    x, y = torch.randn(3, 5, 4), torch.randint(0, 4, (5,))
    torch.testing.assert_close(losses.sed(x, y, lam=0.0), losses.independent(x, y))


def test_sample_members_is_deterministic_under_a_seed_and_distinct():
    a = [losses.sample_members(10, 3, generator=torch.Generator().manual_seed(s)).tolist() for s in range(20)]
    b = [losses.sample_members(10, 3, generator=torch.Generator().manual_seed(s)).tolist() for s in range(20)]
    assert a == b and all(len(set(x)) == 3 for x in a) and len({tuple(x) for x in a}) > 1
    torch.manual_seed(5)
    g1 = losses.sample_members(10, 3)
    torch.manual_seed(5)
    assert g1.tolist() == losses.sample_members(10, 3).tolist()
    assert losses.sample_members(4, 0).tolist() == [0, 1, 2, 3]
    with pytest.raises(InvalidInputError):
        losses.sample_members(0, 1)
    with pytest.raises(InvalidInputError):
        losses.sample_members(3, -1)


def test_divdis_mi_matches_naive_joint_distribution():
    probs = torch.randn(3, 9, 4, generator=torch.Generator().manual_seed(6)).softmax(-1).double()
    m, b, c = probs.shape
    mis = []
    for i, j in itertools.combinations(range(m), 2):
        joint = [[sum(float(probs[i, n, u] * probs[j, n, v]) for n in range(b)) / b for v in range(c)]
                 for u in range(c)]
        pi = [sum(row) for row in joint]
        pj = [sum(joint[u][v] for u in range(c)) for v in range(c)]
        mis.append(sum(joint[u][v] * math.log(joint[u][v] / (pi[u] * pj[v])) for u in range(c) for v in range(c)))
    assert float(losses.divdis_mi(probs)) == pytest.approx(sum(mis) / len(mis), abs=1e-6)


def test_divdis_kl_matches_hand_computation():
    lab = torch.tensor([[[0.5, 0.5]], [[0.5, 0.5]]])
    ood = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]])
    # each member's OOD mean is one-hot, the labelled mean uniform: KL = log 2 each
    assert float(losses.divdis_kl(lab, ood)) == pytest.approx(math.log(2), abs=1e-6)


def test_naive_losses_need_an_unlabeled_batch():
    with pytest.raises(InvalidInputError):
        losses.naive_a2d(torch.zeros(2, 3, 2), torch.zeros(3, dtype=torch.long))
    with pytest.raises(InvalidInputError):
        losses.naive_divdis(torch.zeros(2, 3, 2), torch.zeros(3, dtype=torch.long))
    assert {"sed", "naive_a2d", "naive_divdis"} <= set(losses.ENSEMBLE_LOSSES)
