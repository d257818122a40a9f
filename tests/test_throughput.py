"""Throughput timers: they run on the device asked for, in the dtype asked for, and synchronise a CUDA
device before reading the clock (checked on CPU by recording the synchronisation calls)."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

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


@pytest.mark.slow
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
    assert {r["steady allocator"] for r in rows} == {GLIBC}
    plain = throughput_rounds({"light": light}, (1, 8, 8), rounds=1, batch_size=8, min_time=0.01, max_warmup=2,
                              steady=False)
    assert [r["steady allocator"] for r in plain] == [False]


GLIBC = platform.libc_ver()[0] == "glibc"

# glibc's own accounting of one 16 MiB malloc in a fresh process: mallinfo2().hblkhd is the memory held in
# mmap-ed blocks, so it grows by the block (plus its header page) when malloc maps it and stays put when the
# block comes from the heap
_MALLINFO = textwrap.dedent("""
    import ctypes, ctypes.util, sys
    from ensdiv.models.throughput import steady_allocator
    fields = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")
    class Info(ctypes.Structure):
        _fields_ = [(f, ctypes.c_size_t) for f in fields]
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.mallinfo2.restype, libc.malloc.restype = Info, ctypes.c_void_p
    libc.malloc.argtypes, libc.free.argtypes = [ctypes.c_size_t], [ctypes.c_void_p]
    steady = steady_allocator() if sys.argv[1] == "steady" else None
    before = libc.mallinfo2().hblkhd
    block = libc.malloc(16 << 20)
    print(steady, libc.mallinfo2().hblkhd - before)
    libc.free(block)
""")


@pytest.mark.skipif(not GLIBC, reason="mallopt and mallinfo2 are glibc's")
@pytest.mark.parametrize("mode, expected", [("default", "None 16781312"), ("steady", "True 0")])
@pytest.mark.slow
def test_steady_allocator_serves_a_16_mib_block_from_the_heap(mode, expected):
    """A fresh process maps a 16 MiB block (glibc's default threshold is 128 KiB until a large block is freed);
    after steady_allocator the same block comes from the heap (threshold 32 MiB): hblkhd grows by 16 MiB + one
    4 KiB page, and by nothing."""
    out = subprocess.run([sys.executable, "-c", _MALLINFO, mode], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[-2] == expected


class _NoMallopt:
    def __init__(self, *args):
        pass


class _Refusing:
    def __init__(self, *args):
        self.mallopt = lambda *a: 0


@pytest.mark.parametrize("cdll", [_NoMallopt, _Refusing], ids=["no mallopt (not glibc)", "a value refused"])
def test_steady_allocator_reports_false_where_it_cannot_set_the_thresholds(monkeypatch, cdll):
    monkeypatch.setattr(throughput.ctypes, "CDLL", cdll)
    assert throughput.steady_allocator() is False


def test_rounds_refuse_bad_arguments():
    from ensdiv.models import throughput_rounds

    net = nn.Linear(4, 2)
    with pytest.raises(EnsdivError, match="at least one model, round"):
        throughput_rounds({"a": net}, (4,), rounds=0)
    with pytest.raises(EnsdivError, match="at least one model, round"):
        throughput_rounds({}, (4,))
    with pytest.raises(EnsdivError, match="Unknown timing dtype 'int8'"):
        throughput_rounds({"a": net}, (4,), dtype="int8")
