"""Throughput timers: they run on the device asked for, in the dtype asked for, and synchronise a CUDA
device before reading the clock (checked on CPU by recording the synchronisation calls)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ensdiv.errors import EnsdivError
from ensdiv.models import inference_throughput, throughput, training_throughput


def _net() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(16, 3))


def test_inference_on_the_device_and_dtype_asked_for():
    net = _net()
    rate = inference_throughput(net, (1, 4, 4), batch_size=8, repeats=2, min_time=0.01, device="cpu",
                                dtype=torch.bfloat16)
    assert rate > 0
    assert next(net.parameters()).dtype == torch.bfloat16 and next(net.parameters()).device.type == "cpu"


def test_training_throughput_is_positive_on_cpu():
    assert training_throughput(_net(), (1, 4, 4), num_classes=3, batch_size=8, steps=2, device="cpu") > 0


def test_a_cuda_device_is_synchronised_before_each_clock_read(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    throughput._sync(torch.device("cuda", 0))
    throughput._sync(torch.device("cpu"))
    assert calls == [torch.device("cuda", 0)]


def test_bad_arguments_are_one_sentence():
    with pytest.raises(EnsdivError, match="repeats >= 1"):
        inference_throughput(_net(), (1, 4, 4), repeats=0)
