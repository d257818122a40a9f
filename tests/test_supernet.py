"""The weight-sharing super-network of design-diversity Fig. 8: extraction, importance ordering, BN recalibration."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import ensdiv as ed
from ensdiv.errors import InvalidInputError
from ensdiv.models.supernet import (
    SubnetConfig,
    SuperResNet,
    all_configs,
    extract_subnet,
    max_config,
    recalibrate_bn,
    sample_config,
    subnet_params,
)


def _trained_net(seed=0, **kw) -> SuperResNet:
    """A small super-network after a few elastic SGD steps (non-trivial weights and BN statistics)."""
    torch.manual_seed(seed)
    net = SuperResNet(10, 1, channels=(4, 8, 8), **kw)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    x, y = torch.rand(16, 1, 28, 28), torch.randint(0, 10, (16,))
    net.train()
    net.elastic = "depth+width"
    for _ in range(5):
        opt.zero_grad()
        net.training_loss(x, y).backward()
        opt.step()
    net.elastic = "none"
    return net.eval()


def test_registered_and_shapes():
    for name in ("supernet", "test_supernet"):
        m = ed.create_model(name, num_classes=10, in_chans=1, img_size=28)
        assert m(torch.rand(2, 1, 28, 28)).shape == (2, 10)


def test_all_configs_count_by_hand():
    net = SuperResNet(10, 1, channels=(4, 8, 8), blocks=(2, 2, 2))
    # per stage: no skip -> 3 x 3 widths, skip the last block -> 3 widths: 12; three stages: 12^3
    assert len(all_configs(net)) == 12**3 == len(set(all_configs(net)))
    net3 = SuperResNet(10, 1, channels=(4, 8), blocks=(3, 1), strides=(1, 2))
    assert len(all_configs(net3)) == (27 + 9) * 3  # max_skip 1: 3 or 2 active blocks; the 1-block stage is fixed


@pytest.mark.parametrize("k", [0, 1, 17, 500, 1727])
def test_extraction_reproduces_the_supernetwork(k):
    net = _trained_net()
    cfg = all_configs(net)[k]
    x = torch.rand(6, 1, 28, 28)
    sub = extract_subnet(net, cfg)
    assert all(type(m) in (nn.Conv2d, nn.BatchNorm2d, nn.Linear, nn.ReLU, nn.Sequential) or m is sub
               or type(m).__name__ in ("_PlainBlock",) for m in sub.modules())
    torch.testing.assert_close(sub(x), net(x, cfg), atol=1e-5, rtol=1e-5)
    assert subnet_params(net, cfg) == ed.count_params(sub)


def test_reorganize_widths_keeps_the_full_network_and_orders_channels():
    net = _trained_net(1)
    x = torch.rand(5, 1, 28, 28)
    before = net(x)
    net.reorganize_widths()
    torch.testing.assert_close(net(x), before, atol=1e-5, rtol=1e-5)
    for stage in net.stages:
        for blk in stage:
            imp = blk.conv2.weight.abs().sum((0, 2, 3))
            assert torch.all(imp[:-1] >= imp[1:])


def test_bn_recalibration_changes_only_bn_statistics():
    net = _trained_net(2)
    sub = extract_subnet(net, all_configs(net)[40])
    before = {k: v.clone() for k, v in sub.state_dict().items()}
    x = torch.rand(64, 1, 28, 28, generator=torch.Generator().manual_seed(3))
    recalibrate_bn(sub, x, batch_size=16)
    after = sub.state_dict()
    stats = ("running_mean", "running_var", "num_batches_tracked")
    for k, v in after.items():
        if k.endswith(stats):
            continue
        assert torch.equal(v, before[k]), k
    assert not torch.equal(after["stem.1.running_mean"], before["stem.1.running_mean"])
    assert not sub.training
    # naive: the stem BN's statistics are the mean / unbiased variance of the stem conv's output over the
    # four equal batches (cumulative average of the batch statistics)
    with torch.no_grad():
        h = sub.stem[0](x).reshape(4, 16, *sub.stem[0](x).shape[1:])
    mean = h.mean((1, 3, 4)).mean(0)
    var = torch.stack([hb.transpose(0, 1).reshape(hb.shape[1], -1).var(1) for hb in h]).mean(0)
    torch.testing.assert_close(after["stem.1.running_mean"], mean, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(after["stem.1.running_var"], var, atol=1e-5, rtol=1e-4)
    assert [bn.momentum for bn in sub.modules() if isinstance(bn, nn.BatchNorm2d)][0] == 0.1


def test_training_loss_samples_configs_reproducibly():
    net = SuperResNet(10, 1, channels=(4, 8, 8))
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    a = [sample_config(net, "depth+width", generator=g1) for _ in range(10)]
    assert a == [sample_config(net, "depth+width", generator=g2) for _ in range(10)]
    assert all(c.width == max_config(net).width for c in (sample_config(net, "depth") for _ in range(5)))
    assert len(set(a)) > 1


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda n: n.check_config(SubnetConfig((0, 0), (0,) * 6)), "depth"),
        (lambda n: n.check_config(SubnetConfig((0, 2, 0), (0,) * 6)), "depth"),
        (lambda n: n.check_config(SubnetConfig((0, 0, 0), (0,) * 5)), "width"),
        (lambda n: n.check_config(SubnetConfig((0, 0, 0), (0, 0, 0, 0, 0, 3))), "width"),
        (lambda n: sample_config(n, "height"), "elastic"),
        (lambda n: recalibrate_bn(extract_subnet(n, max_config(n)), torch.rand(1, 1, 28, 28)), "at least 2"),
        (lambda n: SuperResNet(10, 1, channels=(4, 8), blocks=(2,)), "one width"),
    ],
)
def test_bad_inputs(call, match):
    net = SuperResNet(10, 1, channels=(4, 8, 8))
    with pytest.raises(InvalidInputError, match=match):
        call(net)
