"""Packed-Ensembles layers and ResNets: values against naive loops, Table 1 counts, bad input."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ensdiv.errors import EnsdivError
from ensdiv.models import (
    PackedConv2d,
    PackedLinear,
    count_mult_adds,
    count_params,
    pack_members,
    packed_mask,
    packed_param_count,
    to_members,
)
from ensdiv.models.layers import packed_channels
from ensdiv.models.packed_resnet import packed_resnet  # ensdiv.models.packed_resnet is the module (name clash)


def _naive_grouped_conv(x, weight, bias, groups, padding):
    """Eq. 2 with plain loops over groups: group g sees only its slice of input channels."""
    cin_g = x.shape[1] // groups
    cout_g = weight.shape[0] // groups
    outs = []
    for g in range(groups):
        xs = x[:, g * cin_g:(g + 1) * cin_g]
        ws = weight[g * cout_g:(g + 1) * cout_g]
        bs = None if bias is None else bias[g * cout_g:(g + 1) * cout_g]
        outs.append(F.conv2d(xs, ws, bs, padding=padding))
    return torch.cat(outs, dim=1)


@pytest.mark.parametrize("alpha,m,gamma", [(2, 4, 2), (1, 2, 1), (3, 2, 2)])
def test_packed_conv_matches_group_loop_and_mask_form(alpha, m, gamma):
    torch.manual_seed(0)
    layer = PackedConv2d(8, 12, 3, alpha=alpha, num_estimators=m, gamma=gamma, padding=1)
    assert layer.in_channels == 8 * alpha and layer.out_channels == 12 * alpha
    assert layer.groups == m * gamma
    x = torch.randn(3, 8 * alpha, 5, 5)
    out = layer(x)
    ref = _naive_grouped_conv(x, layer.weight, layer.bias, m * gamma, 1)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    # Eq. 3: a full convolution with the weight multiplied by the block-diagonal mask.
    # Off-block weights are random: the mask must remove them.
    full = torch.randn(layer.out_channels, layer.in_channels, 3, 3)
    ci, co = layer.in_channels // layer.groups, layer.out_channels // layer.groups
    for g in range(layer.groups):
        full[g * co:(g + 1) * co, g * ci:(g + 1) * ci] = layer.weight[g * co:(g + 1) * co]
    mask = packed_mask(layer.in_channels, layer.out_channels, layer.groups)
    torch.testing.assert_close(F.conv2d(x, full * mask[:, :, None, None], layer.bias, padding=1), out,
                               atol=1e-5, rtol=1e-5)


def test_packed_mask_matches_hand_case():
    # M=2 groups, 4 in / 4 out channels: two 2x2 blocks on the diagonal (Figure 4a).
    expected = torch.tensor([[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]], dtype=torch.float)
    assert torch.equal(packed_mask(4, 4, 2), expected)
    # M=2, gamma=2 -> 4 groups of 1 channel (Figure 4b): the identity pattern.
    assert torch.equal(packed_mask(4, 4, 4), torch.eye(4))


def test_packed_linear_matches_loop_and_last_heads():
    torch.manual_seed(0)
    layer = PackedLinear(6, 5, alpha=2, num_estimators=3, gamma=1, last=True)
    assert (layer.in_features, layer.out_features, layer.groups) == (12, 15, 3)
    x = torch.randn(4, 12)
    out = layer(x)
    w = layer.weight  # (15, 4)
    for g in range(3):
        ref = x[:, 4 * g:4 * (g + 1)] @ w[5 * g:5 * (g + 1)].T + layer.bias[5 * g:5 * (g + 1)]
        torch.testing.assert_close(out[:, 5 * g:5 * (g + 1)], ref, atol=1e-6, rtol=1e-6)
    heads = to_members(out, 3)
    assert heads.shape == (3, 4, 5)
    torch.testing.assert_close(heads[1], out[:, 5:10])


def test_first_layer_is_full_conv():
    layer = PackedConv2d(3, 8, 3, alpha=2, num_estimators=4, gamma=2, first=True)
    assert (layer.in_channels, layer.out_channels, layer.groups) == (3, 16, 1)


def test_param_count_formula_matches_built_layers():
    # Formula of §3.2: alpha^2 C_j C_{j+1} s^2 / (M gamma) for inner layers.
    layers = [(3, 16, 3), (16, 32, 3), (32, 32, 3), (32, 10, 1)]
    built = [
        PackedConv2d(3, 16, 3, alpha=2, num_estimators=4, gamma=2, first=True, bias=False),
        PackedConv2d(16, 32, 3, alpha=2, num_estimators=4, gamma=2, bias=False),
        PackedConv2d(32, 32, 3, alpha=2, num_estimators=4, gamma=2, bias=False),
        PackedLinear(32, 10, alpha=2, num_estimators=4, gamma=2, last=True, bias=False),
    ]
    hand = 3 * 32 * 9 + (2 * 16 * 2 * 32 * 9) // 8 + (2 * 32 * 2 * 32 * 9) // 8 + (2 * 32 * 40) // 8
    assert packed_param_count(layers, alpha=2, num_estimators=4, gamma=2) == hand
    assert sum(count_params(b) for b in built) == hand
    # alpha = sqrt(M), gamma = 1 keeps the inner layers at the single model's size.
    assert packed_param_count([(16, 32, 3)], alpha=2, num_estimators=4, gamma=1,
                              first_index=None, last_index=None) == 16 * 32 * 9


@pytest.mark.parametrize("arch,single,packed", [("resnet18", 11.17, 8.18), ("resnet50", 23.52, 14.55)])
def test_table1_parameter_counts(arch, single, packed):
    """Table 1 (CIFAR-10): single model, PE-(2,4,2), Deep Ensembles = 4 x single."""
    n_single = count_params(packed_resnet(arch, alpha=1, num_estimators=1, gamma=1))
    n_packed = count_params(packed_resnet(arch, alpha=2, num_estimators=4, gamma=2))
    assert round(n_single / 1e6, 2) == single
    assert round(n_packed / 1e6, 2) == packed
    assert round(4 * n_single / 1e6, 2) == {"resnet18": 44.70, "resnet50": 94.08}[arch]


def test_table1_mult_adds_resnet18():
    single = packed_resnet("resnet18", alpha=1, num_estimators=1, gamma=1)
    pe = packed_resnet("resnet18", alpha=2, num_estimators=4, gamma=2)
    assert round(count_mult_adds(single, (3, 32, 32)) / 1e9, 2) == 0.56
    assert round(count_mult_adds(pe, (3, 32, 32)) / 1e9, 2) == 0.48


def test_mult_adds_hand_case():
    net = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, groups=2), nn.Flatten(), nn.Linear(4 * 5 * 5, 3))
    assert count_mult_adds(net, (2, 5, 5)) == 4 * 25 * 1 * 9 + 100 * 3


def _member(seed):
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 6, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(6, 6, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(6 * 4 * 4, 5),
    )


def test_figure3_three_forms_are_equivalent():
    members = [_member(s) for s in range(3)]
    x = torch.randn(7, 1, 8, 8)
    seq = torch.stack([m(x) for m in members])  # form (a)
    rearranged = pack_members(members, full_first_conv=False)(x)  # form (b)
    full_first = pack_members(members, full_first_conv=True)(x)  # form (c)
    assert seq.shape == rearranged.shape == full_first.shape == (3, 7, 5)
    torch.testing.assert_close(rearranged, seq, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(full_first, seq, atol=1e-5, rtol=1e-5)


def test_packed_resnet_members_are_independent():
    torch.manual_seed(0)
    net = packed_resnet("test", in_chans=1, img_size=28, alpha=2, num_estimators=2, gamma=2).eval()
    x = torch.randn(3, 1, 28, 28)
    before = net(x)
    assert before.shape == (2, 3, 10)
    with torch.no_grad():  # scramble every weight of member 1 in the grouped layers
        for mod in net.modules():
            if isinstance(mod, PackedConv2d | PackedLinear) and not mod.first:
                out = mod.weight.shape[0]
                mod.weight[out // 2:] = torch.randn_like(mod.weight[out // 2:])
    after = net(x)
    torch.testing.assert_close(after[0], before[0])
    assert not torch.allclose(after[1], before[1])


def test_training_loss_is_mean_member_cross_entropy():
    torch.manual_seed(0)
    net = packed_resnet("test", in_chans=1, img_size=28, alpha=2, num_estimators=2, gamma=1)
    x, y = torch.randn(4, 1, 28, 28), torch.tensor([0, 1, 2, 3])
    net.eval()
    logits = net(x)
    expected = (F.cross_entropy(logits[0], y) + F.cross_entropy(logits[1], y)) / 2
    torch.testing.assert_close(net.training_loss(x, y), expected)


def test_min_channels_per_group_lowers_gamma():
    layer = PackedConv2d(64, 64, 3, alpha=2, num_estimators=4, gamma=2, min_channels_per_group=64)
    assert layer.groups == 4 and layer.gamma == 1  # 128/8 = 16 < 64 -> gamma lowered
    layer = PackedConv2d(256, 256, 3, alpha=2, num_estimators=4, gamma=2, min_channels_per_group=64)
    assert layer.groups == 8 and layer.gamma == 2


# --- bad input -------------------------------------------------------------------------------------


def test_channels_not_divisible_by_groups():
    with pytest.raises(EnsdivError, match=r"not divisible by M\*gamma = 4\*2 = 8.*multiples of 8"):
        PackedConv2d(6, 8, 3, alpha=2, num_estimators=4, gamma=2)  # 12 input channels, 8 groups
    with pytest.raises(EnsdivError, match="output channels"):
        PackedConv2d(8, 6, 3, alpha=1, num_estimators=4)


def test_alpha_gamma_m_out_of_range():
    with pytest.raises(EnsdivError, match="gamma"):
        PackedConv2d(8, 8, 3, alpha=2, num_estimators=4, gamma=0)
    with pytest.raises(EnsdivError, match="alpha"):
        PackedConv2d(8, 8, 3, alpha=-1, num_estimators=4)
    with pytest.raises(EnsdivError, match="num_estimators"):
        PackedLinear(8, 8, alpha=2, num_estimators=0)
    with pytest.raises(EnsdivError, match="whole number"):
        PackedConv2d(5, 8, 3, alpha=1.5, num_estimators=1)


def test_first_and_last_together():
    with pytest.raises(EnsdivError, match="both first and last"):
        PackedLinear(8, 10, alpha=2, num_estimators=4, first=True, last=True)


def test_to_members_bad_split():
    with pytest.raises(EnsdivError, match="cannot be split into 4 heads"):
        to_members(torch.zeros(2, 10), 4)


def test_packed_channels_reports_values():
    assert packed_channels(64, 128, alpha=2, num_estimators=4, gamma=2) == (128, 256, 8)
    assert packed_channels(512, 10, alpha=2, num_estimators=4, last=True) == (1024, 40, 4)


def test_dense_implementation_matches_grouped_values_and_gradients():
    torch.manual_seed(0)
    grouped = PackedConv2d(8, 8, 3, alpha=2, num_estimators=4, gamma=2, padding=1, implementation="grouped")
    dense = PackedConv2d(8, 8, 3, alpha=2, num_estimators=4, gamma=2, padding=1, implementation="dense")
    dense.load_state_dict(grouped.state_dict())
    x = torch.randn(2, 16, 6, 6)
    out_g, out_d = grouped(x), dense(x)
    torch.testing.assert_close(out_d, out_g, atol=1e-5, rtol=1e-5)
    (out_g ** 2).sum().backward()
    (out_d ** 2).sum().backward()
    torch.testing.assert_close(dense.weight.grad, grouped.weight.grad, atol=1e-4, rtol=1e-4)
    # the dense weight is the masked full weight of Eq. 3: zero off the diagonal blocks
    mask = packed_mask(16, 16, 8)[:, :, None, None]
    assert torch.all(dense.dense_weight() * (1 - mask) == 0)
    with pytest.raises(EnsdivError, match="implementation"):
        PackedConv2d(8, 8, 3, implementation="fast")


def test_member_loss_sum_is_m_times_mean():
    torch.manual_seed(0)
    x, y = torch.randn(4, 1, 28, 28), torch.tensor([0, 1, 2, 3])
    mean = packed_resnet("test", in_chans=1, img_size=28, num_estimators=2, gamma=1).eval()
    summed = packed_resnet("test", in_chans=1, img_size=28, num_estimators=2, gamma=1, member_loss="sum")
    summed.eval()
    summed.load_state_dict(mean.state_dict())
    torch.testing.assert_close(summed.training_loss(x, y), 2 * mean.training_loss(x, y))
    with pytest.raises(EnsdivError, match="member_loss"):
        packed_resnet("test", member_loss="max")
