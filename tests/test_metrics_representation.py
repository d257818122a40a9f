"""CKA: naive numpy HSIC, invariances, minibatch vs full-data unbiased estimate, cka_map hooks."""

import numpy as np
import pytest
import torch
from metric_cases import bad, generator, run_over_dtypes
from torch import nn

from ensdiv.metrics.representation import MinibatchCKA, cka, cka_map, gram_linear, gram_rbf, hsic


def feats(n=60, d=8, seed=0):
    return torch.randn(n, d, generator=generator(seed), dtype=torch.float64)


def naive_hsic_biased(k, l):
    n = k.shape[0]
    h = np.eye(n) - np.ones((n, n)) / n
    return np.trace(k @ h @ l @ h) / (n - 1) ** 2


def naive_hsic_unbiased(k, l):
    n = k.shape[0]
    kt, lt = k.copy(), l.copy()
    np.fill_diagonal(kt, 0)
    np.fill_diagonal(lt, 0)
    one = np.ones(n)
    val = (
        np.trace(kt @ lt)
        + (one @ kt @ one) * (one @ lt @ one) / ((n - 1) * (n - 2))
        - 2 / (n - 2) * (one @ kt @ lt @ one)
    )
    return val / (n * (n - 3))


def naive_cka(x, y, hsic):
    k, l = x @ x.T, y @ y.T
    return hsic(k, l) / np.sqrt(hsic(k, k) * hsic(l, l))


def test_linear_cka_vs_numpy():
    x, y = feats(seed=0), feats(d=5, seed=1)
    y = y + 0.5 * x[:, :5]
    out = cka(x, y)
    assert isinstance(out, torch.Tensor) and out.ndim == 0
    run_over_dtypes(cka, (x, y), lambda a, b: naive_cka(a.numpy(), b.numpy(), naive_hsic_biased))
    run_over_dtypes(cka, (x, y), lambda a, b: naive_cka(a.numpy(), b.numpy(), naive_hsic_unbiased), unbiased=True)
    k, l = x @ x.T, y @ y.T
    assert float(hsic(k, l)) == pytest.approx(naive_hsic_biased(k.numpy(), l.numpy()))
    assert float(hsic(k, l, unbiased=True)) == pytest.approx(naive_hsic_unbiased(k.numpy(), l.numpy()))
    assert torch.allclose(gram_linear(x), k)


def test_rbf_cka_vs_numpy():
    x, y = feats(n=30, seed=2), feats(n=30, d=3, seed=3)

    def rbf(a):
        d2 = ((a[:, None, :] - a[None, :, :]) ** 2).sum(-1)
        return np.exp(-d2 / (2 * np.median(d2)))

    k, l = rbf(x.numpy()), rbf(y.numpy())
    want = naive_hsic_biased(k, l) / np.sqrt(naive_hsic_biased(k, k) * naive_hsic_biased(l, l))
    assert float(cka(x, y, kernel="rbf")) == pytest.approx(want)
    assert np.allclose(gram_rbf(x).numpy(), k)


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
@pytest.mark.parametrize("unbiased", [False, True])
def test_invariances(kernel, unbiased):
    x, y = feats(seed=4), feats(d=6, seed=5)
    y = torch.tanh(y + x[:, :6])
    q, _ = torch.linalg.qr(torch.randn(8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(6)))
    kw = {"kernel": kernel, "unbiased": unbiased}
    base = float(cka(x, y, **kw))
    assert float(cka(x @ q * 3.7, y, **kw)) == pytest.approx(base, abs=1e-9)
    assert float(cka(x, y, **kw)) == pytest.approx(float(cka(y, x, **kw)))
    assert float(cka(x, x, **kw)) == pytest.approx(1.0)


def test_bad_inputs_and_fast_path():
    x = feats(n=8, d=3)
    bad(lambda: cka(x, x[:5]), "same N")
    bad(lambda: cka(x, x, kernel="poly"), "kernel")
    bad(lambda: cka(x[:, 0], x), "features shaped")
    bad(lambda: cka(torch.ones(8, 3), x), "constant features")
    bad(lambda: gram_rbf(torch.ones(8, 3)), "bandwidth")
    bad(lambda: hsic(torch.ones(3, 3), torch.ones(3, 3), unbiased=True), "at least 4")
    bad(lambda: hsic(torch.ones(3, 3), torch.ones(4, 4)), "square")
    bad(lambda: MinibatchCKA().update(x[:3], x[:3]), "at least 4")
    bad(lambda: MinibatchCKA().compute(), "before any update")
    nan = x.clone()
    nan[0, 0] = float("nan")
    bad(lambda: cka(nan, x), "NaN")
    assert torch.isnan(cka(nan, x, validate_args=False))  # unchecked: NaN flows through


def test_minibatch_single_batch_equals_full_unbiased():
    x, y = feats(n=40, seed=7), feats(n=40, d=4, seed=8)
    acc = MinibatchCKA()
    acc.update(x, y)
    out = acc.compute()
    assert isinstance(out, torch.Tensor) and out.ndim == 0
    assert float(out) == pytest.approx(float(cka(x, y, unbiased=True)))


def test_minibatch_average_converges_to_full_unbiased():
    # Each batch's unbiased HSIC is an unbiased estimate of the full-data U-statistic; averaging
    # over many random partitions recovers the full-data unbiased CKA.
    n = 120
    x = feats(n=n, d=10, seed=9)
    y = torch.cat([x[:, :3] + 0.3 * feats(n=n, d=3, seed=10), feats(n=n, d=2, seed=11)], 1)
    acc = MinibatchCKA()
    g = torch.Generator().manual_seed(0)
    for _ in range(150):
        perm = torch.randperm(n, generator=g)
        for b in perm.split(20):
            acc.update(x[b], y[b])
    assert float(acc.compute()) == pytest.approx(float(cka(x, y, unbiased=True)), abs=0.01)


def test_minibatch_layer_lists_and_errors():
    x1, x2, y1 = feats(n=16, seed=1), feats(n=16, d=3, seed=2), feats(n=16, d=4, seed=3)
    acc = MinibatchCKA()
    acc.update([x1, x2], [y1])
    out = acc.compute()
    assert out.shape == (2, 1)
    assert float(out[0, 0]) == pytest.approx(float(cka(x1, y1, unbiased=True)))
    assert float(out[1, 0]) == pytest.approx(float(cka(x2, y1, unbiased=True)))
    bad(lambda: acc.update([x1], [y1]), "same number of layers")


def test_cka_map_with_hooks():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 5))
    x = torch.randn(64, 3, 2, 2)
    loader = [(x[i : i + 16], torch.zeros(16)) for i in range(0, 64, 16)] + [(x[:2], torch.zeros(2))]
    out = cka_map(net, net, loader, ["1", "2", "3"], ["1", "3"])
    assert out.shape == (3, 2)
    assert float(out[0, 0]) == pytest.approx(1.0) and float(out[2, 1]) == pytest.approx(1.0)
    # matches a manual MinibatchCKA over the same batches
    acc = MinibatchCKA()
    with torch.no_grad():
        for i in range(0, 64, 16):
            h1 = net[1](net[0](x[i : i + 16]))
            acc.update(h1, net(x[i : i + 16]))
    assert float(out[0, 1]) == pytest.approx(float(acc.compute()))
    assert net.training  # mode restored
    bad(lambda: cka_map(net, net, loader, ["nope"], ["1"]), "no layer named")
    bad(lambda: cka_map(net, net, [x[:2]], ["1"], ["1"]), "no batch")


def test_cka_map_captures_before_inplace_ops():
    torch.manual_seed(1)
    net = nn.Sequential(nn.Linear(6, 5), nn.BatchNorm1d(5), nn.ReLU(inplace=True), nn.Linear(5, 3))
    net.eval()
    x = torch.randn(32, 6)
    out = cka_map(net, net, [x], ["1"], ["1"])
    with torch.no_grad():
        bn = net[1](net[0](x))  # has negative values that the in-place ReLU would zero
    assert float(out[0, 0]) == pytest.approx(1.0)
    acc = MinibatchCKA()
    with torch.no_grad():
        acc.update(bn, torch.relu(bn))
    full = cka_map(net, net, [x], ["1"], ["2"])
    assert float(full[0, 0]) == pytest.approx(float(acc.compute()))
