"""Training speed on a GPU: the book's training engine against a bare training step, at the paper's size.

Issue #33 item 7. For ResNet-50 (timm's ``resnet50``) and Packed-Ensembles' PE-(α=3, M=4, γ=1) ResNet-50
(``packed_resnet50`` with the ImageNet stem), at 224 px, 1000 classes, bfloat16 autocast and channels_last:

1. **bare step** — what timm's ``train.py`` does per batch, with the batch already on the GPU: forward
   under ``torch.autocast(bfloat16)``, the loss (cross-entropy; PE: the mean of its members'
   cross-entropies, :meth:`PackedResNet.training_loss`), backward, SGD step, ``zero_grad``. Timed with
   CUDA events over ``--steps`` steps after ``--warmup`` steps on the same synthetic batch;
2. **the engine** — :func:`ensdiv.train.fit` (Lightning Fabric ``bf16-mixed``, ``channels_last=True``) on
   an in-memory :class:`~ensdiv.data.TensorSet` held in host memory, as the book trains: shuffled
   indexing, per-step learning rate, the finite-loss check, the host-to-device copy of each batch. Its
   per-step time is the difference of two ``fit`` calls (``warmup`` and ``warmup + steps`` steps), which
   cancels Fabric's setup and cuDNN's autotuning.

The ratio engine/bare is the engine's cost per step at paper size (> 1: the engine is slower). Every figure
is the median of ``--repeats`` timings. Without a GPU the script says so and writes nothing (``--device
cpu`` runs it at any size, for checking the script itself). Writes ``benchmarks/results/gpu.json``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from _common import write

from ensdiv.data import TensorSet
from ensdiv.models import create_model
from ensdiv.train import Optim, fit

MODELS = {
    "resnet50": {},  # timm's ResNet-50, random weights
    "packed_resnet50": {"alpha": 3, "num_estimators": 4, "gamma": 1},  # PE-(3, 4, 1), the paper's ImageNet PE
}


def _model(name: str, img: int, classes: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return create_model(name, num_classes=classes, in_chans=3, img_size=img, **MODELS[name])


def _loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if hasattr(model, "training_loss"):
        return model.training_loss(x, y)
    return F.cross_entropy(model(x), y)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _memory(device: str, *, reset: bool = False) -> dict:
    """Peak GPU memory (GiB) and the caching allocator's retries (each one frees the cache and syncs) since
    the last reset."""
    if device != "cuda":
        return {}
    stats = {"peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 1),
             "alloc_retries": int(torch.cuda.memory_stats().get("num_alloc_retries", 0))}
    if reset:
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.reset_accumulated_memory_stats()
    return stats


def bare_step_seconds(name: str, *, device: str, img: int, batch: int, classes: int, warmup: int, steps: int,
                      repeats: int) -> list[float]:
    """Seconds per step of the bare loop (one batch resident on the device), one figure per repeat."""
    model = _model(name, img, classes).to(device).to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5)
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(batch, 3, img, img, generator=gen).to(device).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, classes, (batch,), generator=gen).to(device)
    dtype = torch.bfloat16

    def step() -> None:
        with torch.autocast(device_type=device, dtype=dtype):
            loss = _loss(model, x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(warmup):
        step()
    _sync(device)
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        _sync(device)
        out.append((time.perf_counter() - t0) / steps)
    return out


def engine_step_seconds(name: str, *, device: str, img: int, batch: int, classes: int, warmup: int, steps: int,
                        repeats: int) -> list[float]:
    """Seconds per step of :func:`ensdiv.train.fit`: (time of warmup + steps) - (time of warmup), per step."""
    gen = torch.Generator().manual_seed(1)
    n_long = (warmup + steps) * batch
    x = torch.rand(n_long, 3, img, img, generator=gen)
    y = torch.randint(0, classes, (n_long,), generator=gen)
    long_set = TensorSet(x, y, "synthetic/long", classes=[str(c) for c in range(classes)])
    short_set = TensorSet(x[: warmup * batch], y[: warmup * batch], "synthetic/short",
                          classes=[str(c) for c in range(classes)])
    optim = Optim(epochs=1, batch_size=batch, lr=0.1, weight_decay=5e-5, schedule="constant")
    precision = "bf16-mixed"

    def timed(data: TensorSet) -> float:
        model = _model(name, img, classes)
        _sync(device)
        t0 = time.perf_counter()
        fit(model, data, optim, channels_last=True, accelerator=device, precision=precision, progress=False)
        _sync(device)
        return time.perf_counter() - t0

    timed(short_set)  # the first call pays Fabric's launch and CUDA's context
    out = []
    for _ in range(repeats):
        short, long = timed(short_set), timed(long_set)
        out.append((long - short) / steps)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    ap.add_argument("--img", type=int, default=224)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--quick", action="store_true", help="(ignored: the GPU run is already short)")
    ap.add_argument("--no-write", action="store_true", help="print, do not write results/gpu.json")
    args = ap.parse_args()
    device = args.device
    if device == "auto":
        if not torch.cuda.is_available():
            print("bench_gpu: no GPU on this machine; nothing measured (benchmarks/results/gpu.json is kept).")
            return
        device = "cuda"
    if device == "cuda":
        torch.backends.cudnn.benchmark = True
    sizes = {k: getattr(args, k) for k in ("img", "batch", "classes", "warmup", "steps", "repeats")}
    rows = {}
    for name in args.models:
        _memory(device, reset=True)
        bare = bare_step_seconds(name, device=device, **sizes)
        bare_mem = _memory(device, reset=True)
        engine = engine_step_seconds(name, device=device, **sizes)
        engine_mem = _memory(device, reset=True)
        b, e = statistics.median(bare), statistics.median(engine)
        rows[name] = {
            "model_options": MODELS[name],
            "bare_step_s": round(b, 5),
            "engine_step_s": round(e, 5),
            "bare_images_per_s": round(args.batch / b, 1),
            "engine_images_per_s": round(args.batch / e, 1),
            "engine_over_bare": round(e / b, 3),
            "bare_all_s": [round(v, 5) for v in bare],
            "engine_all_s": [round(v, 5) for v in engine],
            "bare_memory": bare_mem,
            "engine_memory": engine_mem,
        }
        print(name, rows[name], flush=True)
    payload = {
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        "sizes": sizes,
        "precision": "bf16 autocast (bare) / Fabric bf16-mixed (engine); channels_last in both",
        "models": rows,
    }
    if args.no_write:
        print(payload)
    else:
        write("gpu", payload)


if __name__ == "__main__":
    main()
