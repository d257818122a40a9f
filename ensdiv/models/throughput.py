"""Throughput of a model: images per second of inference and of training steps, on CPU or a GPU.

Used by the benchmarks and by the pages that compare the cost of ensembles (Packed-Ensembles Fig. 1,
App. H). Timings on a CUDA device synchronise before the clock is read.

:func:`throughput_rounds` is the timer whose ratios a verdict may rest on: every model in a fresh process of
its own with a stated number of threads, warmed up until two consecutive timings agree, then timed in
rounds, one model at a time, in an order that rotates from round to round, so that the k-th timings of two
models are taken side by side (a ratio is paired by round) and no model is always first or last.

A timing process fixes glibc's allocator first (:func:`steady_allocator`). Without it the timer measured the
kernel's page faults as much as the model: a process that had never freed a large block returned every freed
activation to the kernel and faulted it back in on the next pass, at a speed that depended on what the process
happened to allocate first (`benchmarks/bench_timing_allocator.py`, 27 Nov 2026: the small ResNet of
Packed-Ensembles Fig. 1 on one thread, batch 128, six process sets each way: 3,039-4,907 images/s with glibc's
default allocator against 7,289-7,921 with it fixed, and PE-(2, 4, 2) 1,533-2,419 against 3,685-4,020;
`benchmarks/results/timing_allocator.json`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import multiprocessing as mp
import time
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ensdiv.errors import InvalidInputError

__all__ = ["inference_throughput", "training_throughput", "throughput_rounds", "steady_allocator"]

# mallopt parameters (glibc malloc.h) and the values steady_allocator sets
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD = 32 << 20  # glibc's largest dynamic threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX)
_TRIM_THRESHOLD = 1 << 30


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


def steady_allocator() -> bool:
    """Make this process's glibc allocator keep freed memory for reuse, as a long-running process settles into:
    blocks up to 32 MiB come from the heap rather than from ``mmap``, and freed memory at the heap's top is
    returned to the kernel only past 1 GiB (``mallopt(M_MMAP_THRESHOLD)``, ``mallopt(M_TRIM_THRESHOLD)``).

    glibc adjusts both thresholds on its own, upwards, the first time a large ``mmap``-ed block is freed; a fresh
    process that has not freed one yet hands every activation back to the kernel and pays a page fault per page
    on the next forward pass, so two fresh processes running the same model differ by up to 3x (see the module
    docstring). Fixing the thresholds removes that state. On GPUs the caching allocator already does this.

    Returns:
        True if both thresholds were set; False where the C library has no ``mallopt`` (not glibc: macOS,
        Windows) or refused a value, and then nothing is changed beyond what was accepted.
    """
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c")).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))


def _timing_worker(conn: Any, model: nn.Module, input_shape: tuple[int, ...], opts: dict[str, Any]) -> None:
    """One model's process: steady the allocator (unless told not to), pin the threads, then answer the parent's
    commands — ``"warmup"`` (time until two consecutive runs agree), ``"time"`` (one timed run of inference, and
    of training when asked) — until ``None``."""
    steady = steady_allocator() if opts["steady_allocator"] else False
    torch.set_num_threads(opts["threads"])
    dtype = getattr(torch, opts["dtype"]) if opts["dtype"] else None
    inputs = torch.randn(opts["batch_size"], *input_shape, generator=torch.Generator().manual_seed(0))

    def infer() -> float:
        return inference_throughput(model, input_shape, repeats=1, warmup=0, min_time=opts["min_time"],
                                    inputs=inputs, device=opts["device"], dtype=dtype)

    def train() -> float | None:
        if not opts["train_steps"]:
            return None
        model.float()
        return training_throughput(model, input_shape, num_classes=opts["num_classes"],
                                   batch_size=opts["train_batch"], steps=opts["train_steps"], warmup=1,
                                   device=opts["device"])

    while (command := conn.recv()) is not None:
        if command == "warmup":
            runs, last = 1, infer()
            train()
            while runs < opts["max_warmup"]:
                now = infer()
                runs += 1
                settled = abs(now - last) <= opts["settle"] * max(now, last)
                last = now
                if settled:
                    break
            conn.send((runs, steady))
        else:
            conn.send((infer(), train()))
    conn.close()


def throughput_rounds(models: dict[str, nn.Module], input_shape: tuple[int, ...], *, rounds: int = 10,
                      batch_size: int = 128, threads: int = 1, dtype: str | None = None,
                      device: str = "cpu", min_time: float = 0.2, train_steps: int = 0, train_batch: int = 32,
                      num_classes: int = 10, settle: float = 0.05, max_warmup: int = 20,
                      steady: bool = True) -> list[dict[str, Any]]:
    """Inference (and training) throughput of every model, each in a fresh process, in ``rounds`` rounds.

    Every model is sent to a process of its own (spawned: nothing of another model's allocations or threads in
    it) that uses ``threads`` threads (:func:`torch.set_num_threads`) and, with ``steady`` (the default), fixes its
    allocator's thresholds first (:func:`steady_allocator`; ``steady=False`` keeps glibc's default, for comparison).
    The models are warmed up one after the other: each times inference (and one training window) until two
    consecutive inference timings differ by at most ``settle`` (relative), at most ``max_warmup`` runs. Then, round
    after round, each model is timed once — one inference run of at least ``min_time`` seconds on a seeded batch of
    ``batch_size`` (cast to ``dtype``), and with ``train_steps`` a training window of that many SGD steps at
    ``train_batch`` (float32) — while the other processes wait, in the order of ``models`` rotated by the round
    number.

    Args:
        models: ``{label: model}``; the models are pickled to their processes (the caller's stay as they are).
        dtype: ``"float32"``, ``"float16"``, ``"bfloat16"`` or None (the models' own).

    Returns:
        One row per (round, model): ``round``, ``model``, ``position`` (its place in that round),
        ``warmup runs``, ``steady allocator`` (whether :func:`steady_allocator` took effect in that process),
        ``inference images/s`` and, with ``train_steps``, ``training images/s``.

    Raises:
        InvalidInputError: fewer than one round, model, thread or image, or an unknown dtype.
    """
    if rounds < 1 or threads < 1 or batch_size < 1 or not models:
        raise InvalidInputError("throughput_rounds needs at least one model, round, thread and image per batch.")
    if dtype not in (None, "float32", "float16", "bfloat16"):
        raise InvalidInputError(f"Unknown timing dtype {dtype!r}; use float32, float16 or bfloat16.")
    opts = {"threads": threads, "dtype": dtype, "device": str(device), "min_time": min_time, "batch_size": batch_size,
            "train_steps": train_steps, "train_batch": train_batch, "num_classes": num_classes, "settle": settle,
            "max_warmup": max_warmup, "steady_allocator": steady}
    ctx = mp.get_context("spawn")
    workers: dict[str, tuple[Any, Any]] = {}
    try:
        for label, model in models.items():
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_timing_worker, args=(child, model, tuple(input_shape), opts), daemon=True)
            proc.start()
            child.close()
            workers[label] = (proc, parent)
        warmups = {}
        for label, (_, conn) in workers.items():  # one at a time: a warm-up is a timing too
            conn.send("warmup")
            warmups[label] = conn.recv()  # (runs, steady allocator)
        labels, rows = list(models), []
        for rnd in range(rounds):
            order = labels[rnd % len(labels):] + labels[:rnd % len(labels)]
            for position, label in enumerate(order):
                conn = workers[label][1]
                conn.send("time")
                inference, training = conn.recv()
                row = {"round": rnd, "model": label, "position": position, "warmup runs": warmups[label][0],
                       "steady allocator": warmups[label][1], "inference images/s": inference}
                if training is not None:
                    row["training images/s"] = training
                rows.append(row)
        return rows
    finally:
        for proc, conn in workers.values():
            try:
                conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
