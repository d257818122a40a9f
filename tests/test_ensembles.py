"""Combination rules, temperature scaling, greedy selection and uniform soup."""

import numpy as np
import pytest
import torch
from metric_cases import bad, labels, member_logits

import ensdiv.metrics.combine as mc
from ensdiv import ensembles
from ensdiv.ensembles import combine, fit_temperature, greedy_select, uniform_soup, vote
from ensdiv.errors import UnknownNameError


def rand_logits(m=3, n=8, c=4, seed=0):
    return member_logits(m, n, c, seed=seed, scale=2.0)


def test_rules_have_one_home():
    assert ensembles.combine is mc.combine and ensembles.vote is mc.vote
    assert ensembles.COMBINE_RULES == mc.COMBINE_RULES


def softmax_np(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("m", [1, 3, 4])
def test_combine_vs_numpy(m):
    z = rand_logits(m=m)
    a = z.numpy()
    p = softmax_np(a)
    assert combine(z, "mean_logits").numpy() == pytest.approx(a.mean(0))
    assert combine(z, "mean_probs").numpy() == pytest.approx(p.mean(0))
    med = np.median(p, axis=0)
    assert combine(z, "median").numpy() == pytest.approx(med / med.sum(-1, keepdims=True))
    geo = np.exp(np.log(p).mean(0))
    assert combine(z, "geometric_mean").numpy() == pytest.approx(geo / geo.sum(-1, keepdims=True))
    onehot = combine(z, "vote")
    assert onehot.shape == z.shape[1:] and bool((onehot.sum(-1) == 1).all())


def test_vote_majority_and_ties():
    preds = torch.tensor([[0, 1, 2, 0], [0, 2, 1, 1], [1, 2, 0, 2]])
    out = vote(preds, num_classes=3, seed=0)
    assert out[:2].tolist() == [0, 2]  # clear majorities
    # samples 2 and 3 are three-way ties: over many seeds each tied class wins about 1/3
    wins = np.zeros((2, 3))
    for s in range(300):
        o = vote(preds, num_classes=3, seed=s)
        wins[0, o[2]] += 1
        wins[1, o[3]] += 1
    assert (wins > 60).all()
    assert torch.equal(vote(preds, seed=7), vote(preds, seed=7))
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(vote(preds, generator=g1), vote(preds, generator=g2))
    # single member: its own predictions
    assert vote(preds[:1]).tolist() == preds[0].tolist()


def test_combine_bad_rule_and_shapes():
    with pytest.raises(UnknownNameError, match="mean_logits"):
        combine(rand_logits(), "average")
    bad(lambda: combine(torch.randn(4, 3), "mean_logits"), r"\(M, N, C\)")
    bad(lambda: combine(torch.zeros(0, 3, 2), "mean_logits"), "M = 0")
    bad(lambda: vote(torch.tensor([[0, 3]]), num_classes=2), "num_classes")
    bad(lambda: vote(torch.zeros(2, 3)), "integer")
    # fast path: no checks, same result
    z = rand_logits()
    assert torch.equal(combine(z, "median", validate_args=False), combine(z, "median"))


def naive_nll(z, y, t):
    p = softmax_np(z / t)
    return -np.mean(np.log(p[np.arange(len(y)), y]))


def test_fit_temperature_matches_grid_search():
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 5, (400,), generator=g)
    base = torch.randn(400, 5, generator=g, dtype=torch.float64)
    base[torch.arange(400), y] += 1.5
    z = torch.stack([base * 3.0, base * 0.5])  # over- and under-confident members
    t = fit_temperature(z, y)
    assert t.shape == (2,)
    grid = np.exp(np.linspace(np.log(0.05), np.log(20), 4000))
    for k in range(2):
        best = grid[np.argmin([naive_nll(z[k].numpy(), y.numpy(), s) for s in grid])]
        assert float(t[k]) == pytest.approx(best, rel=5e-3)
    assert fit_temperature(z[0], y).ndim == 0
    t16 = fit_temperature(z.bfloat16(), y)
    assert t16.dtype == torch.float32 and torch.allclose(t16.double(), t, rtol=0.05)
    bad(lambda: fit_temperature(z, y[:10]), r"\(N,\) = \(400,\)")
    bad(lambda: fit_temperature(z.long(), y), "floating")


def test_greedy_select_vs_brute_force_steps():
    y = labels(200, 3, seed=1)
    z = member_logits(6, 200, 3, seed=1, scale=1.0, signal=torch.linspace(0.2, 1.2, 6), y=y)
    members, accs = greedy_select(z, y, how="mean_probs")
    assert isinstance(accs, torch.Tensor) and accs.dtype == torch.float64 and accs.shape == (len(members),)
    accs = accs.tolist()

    def acc(idx):
        return float((z[idx].softmax(-1).mean(0).argmax(-1) == y).double().mean())

    assert members[0] == int(np.argmax([acc([i]) for i in range(6)]))
    for step in range(1, len(members)):  # each addition is the best available one
        prev = members[:step]
        best = max(acc(prev + [i]) for i in range(6) if i not in prev)
        assert accs[step] == pytest.approx(best) and accs[step] > accs[step - 1]
    assert accs == sorted(accs)
    m2, _ = greedy_select(z, y, start=0, max_size=2)
    assert m2[0] == 0 and len(m2) <= 2
    bad(lambda: greedy_select(z, y, start=9), "start")
    bad(lambda: greedy_select(z, y, candidates=[7]), "candidates")


def test_uniform_soup():
    a = {"w": torch.tensor([1.0, 2.0]), "n": torch.tensor(3)}
    b = {"w": torch.tensor([3.0, 6.0]), "n": torch.tensor(5)}
    s = uniform_soup([a, b])
    assert s["w"].tolist() == [2.0, 4.0] and int(s["n"]) == 3
    lin = [torch.nn.Linear(3, 2) for _ in range(3)]
    soup = uniform_soup([m.state_dict() for m in lin])
    for k in soup:
        want = sum(m.state_dict()[k] for m in lin) / 3
        assert torch.allclose(soup[k], want)
    bad(lambda: uniform_soup([a, {"w": torch.zeros(2)}]), "keys")
    bad(lambda: uniform_soup([a, {"w": torch.zeros(3), "n": torch.tensor(1)}]), "shapes")
    bad(lambda: uniform_soup([]), "at least one")


def test_vote_combine_agrees_with_counting():
    z = rand_logits(m=5, n=50, c=3, seed=4)
    preds = z.argmax(-1)
    out = combine(z, "vote", seed=1).argmax(-1)
    for i in range(50):
        counts = np.bincount(preds[:, i].numpy(), minlength=3)
        assert counts[out[i]] == counts.max()
