"""Throughput of a model: images per second of inference and of training steps, on CPU or a GPU.

Used by the benchmarks and by the pages that compare the cost of ensembles (Packed-Ensembles Fig. 1,
App. H). Timings on a CUDA device synchronise before the clock is read.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ensdiv.errors import InvalidInputError

__all__ = ["inference_throughput", "training_throughput"]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@torch.no_grad()
def inference_throughput(model: nn.Module, input_shape: tuple[int, ...], *, batch_size: int = 256,
                         repeats: int = 5, warmup: int = 1, min_time: float = 0.2,
                         inputs: Tensor | None = None, device: str | torch.device = "cpu",
                         dtype: torch.dtype | None = None) -> float:
    """Images per second of ``model`` in eval mode (median over ``repeats`` timed runs).

    Each timed run repeats the forward pass until ``min_time`` seconds have passed. ``inputs``
    (default: a seeded random batch of ``batch_size``) lets several models be timed on one batch.
    The model and batch are moved to ``device`` (and cast to ``dtype``, e.g. ``torch.float16`` for
    16-bit inference); on a CUDA device every timed run ends with ``torch.cuda.synchronize`` so the
    clock measures the kernels, not their launch.
    """
    if repeats < 1 or batch_size < 1:
        raise InvalidInputError("inference_throughput needs repeats >= 1 and batch_size >= 1.")
    device = torch.device(device)
    model.eval().to(device=device, dtype=dtype)
    x = inputs if inputs is not None else torch.randn(batch_size, *input_shape,
                                                      generator=torch.Generator().manual_seed(0))
    x = x.to(device=device, dtype=dtype)
    batch_size = x.shape[0]
    for _ in range(warmup):
        model(x)
    _sync(device)
    rates = []
    for _ in range(repeats):
        n, t0 = 0, time.perf_counter()
        while True:
            model(x)
            n += 1
            _sync(device)
            dt = time.perf_counter() - t0
            if dt >= min_time:
                break
        rates.append(n * batch_size / dt)
    return float(sorted(rates)[len(rates) // 2])


def training_throughput(model: nn.Module, input_shape: tuple[int, ...], *, num_classes: int = 10,
                        batch_size: int = 128, steps: int = 5, warmup: int = 1,
                        device: str | torch.device = "cpu") -> float:
    """Images per second of SGD steps (forward, ``training_loss`` or cross-entropy, backward, step) on
    ``device`` (synchronised on CUDA before the clock is read)."""
    device = torch.device(device)
    model.train().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(batch_size, *input_shape, generator=g).to(device)
    y = torch.randint(0, num_classes, (batch_size,), generator=g).to(device)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = model.training_loss(x, y) if hasattr(model, "training_loss") else F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    _sync(device)
    return steps * batch_size / (time.perf_counter() - t0)
