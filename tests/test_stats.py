"""Parameter and mult-add counting: both conventions against hand-computed costs."""

from __future__ import annotations

import pytest
from torch import nn

from ensdiv.errors import UnknownNameError
from ensdiv.models.stats import count_mult_adds, count_params


def _net():
    # conv 1->4, 3x3, padding 1 on 5x5: 25 positions x 4*1*9 weights; dense 100 -> 3
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, bias=False), nn.Flatten(), nn.Linear(100, 3))


def test_both_conventions_agree_on_conv_and_dense():
    hand = 25 * 4 * 9 + 100 * 3
    assert count_mult_adds(_net(), (1, 5, 5), convention="layers") == hand
    assert count_mult_adds(_net(), (1, 5, 5), convention="flops") == hand


def test_grouped_conv_counts_only_its_weights():
    net = nn.Conv2d(4, 8, 3, padding=1, groups=4, bias=False)  # weight (8, 1, 3, 3)
    assert count_mult_adds(net, (4, 6, 6), convention="layers") == 36 * 8 * 9


def test_flops_convention_sees_attention_products():
    class SelfAttention(nn.Module):  # single head, no projections: only the two attention products
        def forward(self, x):  # x (1, 1, T, D)
            t = x[:, 0]
            return (t @ t.transpose(1, 2)).softmax(-1) @ t

    T, D = 4, 8
    assert count_mult_adds(SelfAttention(), (1, T, D), convention="layers") == 0  # no layer weights
    assert count_mult_adds(SelfAttention(), (1, T, D), convention="flops") == 2 * T * T * D  # QK^T + AV


def test_params_all_and_trainable():
    net = _net()
    net[0].weight.requires_grad_(False)
    assert count_params(net) == 36 + 303
    assert count_params(net, trainable_only=True) == 303


def test_unknown_convention():
    with pytest.raises(UnknownNameError, match="Unknown mult-add convention 'macs'.*flops, layers"):
        count_mult_adds(_net(), (1, 5, 5), convention="macs")
