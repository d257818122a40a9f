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


def test_rounds_time_each_model_in_its_own_process_in_rotating_order():
    """Two models, one doing ~16x the other's work: every round times both once, the order rotates, each was
    warmed up, training is timed when asked, and the heavy model is slower in every round."""
    from ensdiv.models import throughput_rounds

    light = nn.Sequential(nn.Flatten(), nn.Linear(64, 10))
    heavy = nn.Sequential(nn.Flatten(), *[m for _ in range(16) for m in (nn.Linear(64, 64), nn.ReLU())],
                          nn.Linear(64, 10))
    rows = throughput_rounds({"light": light, "heavy": heavy}, (1, 8, 8), rounds=3, batch_size=256, min_time=0.05,
                             train_steps=2, train_batch=16, max_warmup=3)
    assert [(r["round"], r["model"], r["position"]) for r in rows] == [
        (0, "light", 0), (0, "heavy", 1), (1, "heavy", 0), (1, "light", 1), (2, "light", 0), (2, "heavy", 1)]
    assert all(1 <= r["warmup runs"] <= 3 and r["training images/s"] > 0 for r in rows)
    by_round = {(r["round"], r["model"]): r["inference images/s"] for r in rows}
    assert all(by_round[(k, "heavy")] < by_round[(k, "light")] for k in range(3))
    assert light[1].weight.grad is None  # the caller's models are left as they were


def test_rounds_refuse_bad_arguments():
    from ensdiv.models import throughput_rounds

    net = nn.Linear(4, 2)
    with pytest.raises(EnsdivError, match="at least one model, round"):
        throughput_rounds({"a": net}, (4,), rounds=0)
    with pytest.raises(EnsdivError, match="at least one model, round"):
        throughput_rounds({}, (4,))
    with pytest.raises(EnsdivError, match="Unknown timing dtype 'int8'"):
        throughput_rounds({"a": net}, (4,), dtype="int8")
