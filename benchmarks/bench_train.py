"""Training speed on this machine: the engine against the raw step, and each lever as a side-by-side ratio.

Measured in one run, on the same inputs (28x28x1, 10 classes), for the cpu-scale zoo's architectures:

1. **raw step** — a bare torch loop (pre-sliced batches, forward, cross-entropy, backward, SGD step) —
   against **the engine** (:func:`ensdiv.train.fit`: Fabric, augmentation, per-step learning rate,
   shuffled indexing): images/s of each and their ratio (the per-step overhead);
2. **bfloat16 autocast** (Fabric ``bf16-mixed``, the CPU's AMX units) against float32, through the engine;
3. **channels_last** against the default memory format (raw step and engine, convolutional models;
   ``fit(channels_last=True)``; off by default until it measures faster for the base ResNet too);
4. **batch size** 64 / 128 / 256 through the engine (images/s only; the accuracy side is the zoo's table);
5. **workers against threads**: four small recipes built by :func:`ensdiv.workers.build_many` with two
   processes of one thread each, against one process with two threads (wall seconds, same recipes,
   fresh caches);
6. ``--compile``: **torch.compile over a whole training run** — per architecture, the compiled raw step
   against the eager one from the same initial weights on the same batches: the first compiled step's
   seconds (compilation), the steady images/s of each, the whole zoo run projected from them (the images
   a cpu zoo model sees, :func:`ensdiv.chapters.zoo.images_seen`, plus compilation), and whether the two
   trained models agree (training loss, top-1 agreement on 512 Fashion-MNIST test images); and **MFU**: the step's FLOP
   per image (``torch.utils.flop_counter``, forward and backward) times the engine's images/s, over the
   machine's FP32 peak as measured here by a large matrix product on the same threads.

Ratios > 1 mean the lever is faster. Every figure is the median of ``--repeats`` timings. Run on an idle
machine: ``python benchmarks/bench_train.py [--quick]``; writes ``benchmarks/results/train.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from _common import write

import ensdiv as ed
from ensdiv.chapters.zoo import ARCHS, images_seen, zoo_recipes
from ensdiv.data import TensorSet
from ensdiv.models import create_model
from ensdiv.train import Optim, fit
from ensdiv.workers import build_many

CONV = {"small_cnn", "squeezenet", "resnet", "resnext", "densenet", "mobilenetv3", "efficientnet", "mnasnet",
        "convnext", "convmixer"}


def _data(n: int, seed: int = 0) -> TensorSet:
    g = torch.Generator().manual_seed(seed)
    return TensorSet(torch.rand(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g), "bench",
                     [str(i) for i in range(10)])


def _median(fn, repeats: int) -> float:
    fn()  # warm-up
    return statistics.median(fn() for _ in range(repeats))


def raw_step(name: str, data: TensorSet, *, batch: int, channels_last: bool = False, **kwargs) -> float:
    """Images/s of a bare training loop (no engine); ``kwargs`` go to ``create_model``. A model returning
    ``(M, B, C)`` or ``(M·B, C)`` (an ensemble) is scored against the labels repeated for every member."""
    torch.manual_seed(0)
    model = create_model(name, **kwargs).train()
    x = data.x
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batches = [(x[i:i + batch], data.y[i:i + batch]) for i in range(0, len(data) - batch + 1, batch)]
    times, _ = _steps(model, batches, opt)
    return len(batches) * batch / sum(times)


#: the Packed-Ensembles chapter's cpu training models (ensdiv.chapters.packed_ensembles, Table 1 preset)
PACKED_MODELS = {
    "single_small": {}, "packed_small": {"alpha": 2, "gamma": 2, "num_estimators": 4},
    "batchensemble_small": {"num_estimators": 4}, "masksembles_small": {"num_estimators": 4},
    "mimo_small": {"num_estimators": 4},
}


def packed_channels_last(data: TensorSet, repeats: int, *, batch: int = 64, threads: tuple[int, ...] = (2, 1)
                         ) -> dict:
    """Raw training step of the Packed-Ensembles chapter's models at Table 1's batch (64), default memory format
    vs channels_last, with each number of torch threads in ``threads`` (two: one process on both cores, as the
    page trains today; one: as each of two worker processes would)."""
    rows = {}
    for n_threads in threads:
        torch.set_num_threads(n_threads)
        for name, kw in PACKED_MODELS.items():
            kw = {"widths": [16, 32, 64], **kw}
            base = _median(lambda n=name, k=kw: raw_step(n, data, batch=batch, **k), repeats)
            cl = _median(lambda n=name, k=kw: raw_step(n, data, batch=batch, channels_last=True, **k), repeats)
            rows[f"{name}@{n_threads}t"] = {"threads": n_threads, "raw_step_img_s": base, "channels_last_img_s": cl,
                                            "channels_last_ratio": cl / base}
            print(f"{name:20s} {n_threads} thread(s) {base:6.0f} img/s, channels_last {cl:6.0f} img/s "
                  f"({cl / base:.2f}x)", flush=True)
    return rows


def engine(name: str, data: TensorSet, *, batch: int, precision: str = "32-true", channels_last: bool = False
           ) -> float:
    """Images/s of :func:`ensdiv.train.fit` (one epoch over ``data``)."""
    torch.manual_seed(0)
    model = create_model(name)
    t0 = time.perf_counter()
    fit(model, data, Optim(epochs=1, lr=0.01, batch_size=batch), augment="flip", progress=False,
        accelerator="cpu", precision=precision, channels_last=channels_last)
    return (len(data) // batch) * batch / (time.perf_counter() - t0)


def workers_vs_threads(repeats: int) -> dict:
    """Wall seconds to build four small recipes: 2 processes x 1 thread vs 1 process x 2 threads."""
    recipes = [ed.Recipe.make(model=m, epochs=1, batch_size=64, train_subset=2000, seed=s, name=f"{m}-{s}")
               for m in ("small_cnn", "resnet") for s in (0, 1)]

    def run(workers: int) -> float:
        with tempfile.TemporaryDirectory(prefix="ensdiv-bench-train-") as root:
            torch.set_num_threads(2 if workers == 1 else 1)
            t0 = time.perf_counter()
            build_many(recipes, "fmnist/test", workers=workers, threads=1, store=ed.Store(root))
            return time.perf_counter() - t0

    two_procs = [run(2) for _ in range(repeats)]
    two_threads = [run(1) for _ in range(repeats)]
    out = {"recipes": [r.label for r in recipes], "two_processes_one_thread_s": statistics.median(two_procs),
           "one_process_two_threads_s": statistics.median(two_threads)}
    out["ratio"] = out["one_process_two_threads_s"] / out["two_processes_one_thread_s"]
    return out


def _steps(model, batches, opt) -> tuple[list[float], float]:
    """Train ``model`` one step per batch; each step's seconds and the last step's loss."""
    times, loss = [], float("nan")
    for xb, yb in batches:
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        out = model(xb)
        out = out.reshape(-1, out.shape[-1])
        lo = F.cross_entropy(out, yb.repeat(out.shape[0] // len(yb)))
        lo.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        loss = float(lo.detach())
    return times, loss


def compile_run(name: str, data: TensorSet, held: TensorSet, *, batch: int = 64) -> dict:
    """Eager against ``torch.compile`` for one architecture: two copies of one initialisation trained on the same
    batches (one pass over ``data``); compilation is the first compiled step less the median eager step."""
    batches = [(data.x[i:i + batch], data.y[i:i + batch]) for i in range(0, len(data) - batch + 1, batch)]
    row: dict = {}
    models = {}
    for mode in ("eager", "compiled"):
        torch.manual_seed(0)
        model = create_model(name).train()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        torch.manual_seed(1)
        step = torch.compile(model) if mode == "compiled" else model
        times, loss = _steps(step, batches, opt)
        steady = statistics.median(times[1:])
        row[f"{mode}_img_s"] = batch / steady
        row[f"{mode}_first_step_s"] = times[0]
        row[f"{mode}_final_loss"] = loss
        models[mode] = model.eval()
    row["compile_s"] = max(0.0, row["compiled_first_step_s"] - batch / row["eager_img_s"])
    row["steady_ratio"] = row["compiled_img_s"] / row["eager_img_s"]
    with torch.no_grad():
        a, b = (models[m](held.x).reshape(-1, len(held), 10).mean(0).argmax(-1) for m in ("eager", "compiled"))
    row["top1_agreement"] = float((a == b).float().mean())
    return row


def step_flop_per_image(name: str, *, batch: int = 64) -> float:
    """FLOP of one training step (forward and backward) per image, as ``torch.utils.flop_counter`` counts them
    (matrix products and convolutions)."""
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    model = create_model(name).train()
    x, y = torch.rand(batch, 1, 28, 28), torch.randint(0, 10, (batch,))
    with FlopCounterMode(display=False) as counter:
        out = model(x)
        out = out.reshape(-1, out.shape[-1])
        F.cross_entropy(out, y.repeat(out.shape[0] // batch)).backward()
    return counter.get_total_flops() / batch


def measured_peak_flops(n: int = 2048, repeats: int = 5) -> float:
    """FP32 FLOP/s of an ``n``x``n`` matrix product on this process's threads (the best of ``repeats``): the peak
    the MFU is taken against, the most a dense kernel reaches here."""
    a, b = torch.rand(n, n), torch.rand(n, n)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2 * n**3 / best


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def compile_and_mfu(names: list[str], images: int) -> dict:
    """Item 6 of the module docstring for ``names``: one row per architecture."""
    # Fashion-MNIST, so that the trained copies' agreement on held-out test images means something (on random
    # labels every prediction is a near-tie that rounding flips)
    data = ed.get_dataset("fmnist/train").subset(images, seed=0)
    held = ed.get_dataset("fmnist/test").subset(512, seed=0)
    recipes = zoo_recipes("cpu")
    peak = measured_peak_flops()
    rows = {}
    for name in names:
        row = compile_run(name, data, held)
        recipe = next(r for r in recipes.values() if r.model.name == name)
        seen = images_seen(recipe)
        row["zoo_run_images"] = seen
        row["zoo_run_eager_s"] = seen / row["eager_img_s"]
        row["zoo_run_compiled_s"] = row["compile_s"] + seen / row["compiled_img_s"]
        row["zoo_run_ratio"] = row["zoo_run_eager_s"] / row["zoo_run_compiled_s"]
        row["same_results"] = bool(row["top1_agreement"] >= 0.95
                                   and abs(row["compiled_final_loss"] - row["eager_final_loss"]) <= 0.05)
        row["step_flop_per_image"] = step_flop_per_image(name)
        row["engine_img_s"] = _median(lambda n=name: engine(n, data, batch=64), 1)
        row["achieved_flop_s"] = row["step_flop_per_image"] * row["engine_img_s"]
        row["mfu"] = row["achieved_flop_s"] / peak
        rows[name] = row
        print(f"{name:13s} compile {row['compile_s']:5.1f} s  steady {row['steady_ratio']:.2f}x  whole zoo run "
              f"{row['zoo_run_ratio']:.2f}x  agree {row['top1_agreement']:.3f}  "
              f"{row['step_flop_per_image'] / 1e6:6.1f} MFLOP/img  MFU {100 * row['mfu']:.0f} %", flush=True)
    return {"threads": torch.get_num_threads(), "peak_flop_s_measured": peak, "images": images, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="three architectures, one repeat")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--images", type=int, default=1024, help="images per timed epoch")
    ap.add_argument("--compile", action="store_true",
                    help="only torch.compile over a whole zoo run and the MFU of each step (into train.json)")
    ap.add_argument("--packed", action="store_true",
                    help="only the Packed-Ensembles chapter's models, default vs channels_last (into train.json)")
    args = ap.parse_args()
    if args.compile:
        # compilation from nothing, as in a first cold book: inductor's on-disk cache starts empty
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="ensdiv-bench-inductor-")
        out = Path(__file__).resolve().parent / "results" / "train.json"
        payload = json.loads(out.read_text()) if out.exists() else {}
        names = ["small_cnn", "resnet", "vit"] if args.quick else list(ARCHS)
        payload["compile_and_mfu"] = {
            "note": "raw training step, batch 64, the process's default threads, inductor's cache empty at the "
                    "start; steady images/s the median step after the first; the compiled and eager copies start "
                    "from one initialisation; zoo_run_* project a cpu zoo model's whole training run (compilation "
                    f"included); load average at start {os.getloadavg()[0]:.2f}",
            **compile_and_mfu(names, args.images)}
        out.write_text(json.dumps(payload, indent=2))
        return
    if args.packed:
        out = Path(__file__).resolve().parent / "results" / "train.json"
        payload = json.loads(out.read_text()) if out.exists() else {}
        payload["packed_chapter_channels_last"] = {
            "note": "raw training step, batch 64 (Table 1's), two threads and one, median of the repeats; "
                    f"load average at start {os.getloadavg()[0]:.2f}",
            "models": packed_channels_last(_data(args.images), args.repeats)}
        out.write_text(json.dumps(payload, indent=2))
        return
    repeats = 1 if args.quick else args.repeats
    names = ["mlp", "small_cnn", "resnet"] if args.quick else list(ARCHS)
    data = _data(args.images)
    torch.set_num_threads(1)  # per-architecture figures: one core, as each zoo worker has
    rows = {}
    for name in names:
        row = {
            "raw_step_img_s": _median(lambda n=name: raw_step(n, data, batch=64), repeats),
            "engine_img_s": _median(lambda n=name: engine(n, data, batch=64), repeats),
            "engine_bf16_img_s": _median(lambda n=name: engine(n, data, batch=64, precision="bf16-mixed"), repeats),
        }
        row["engine_over_raw"] = row["engine_img_s"] / row["raw_step_img_s"]
        row["bf16_ratio"] = row["engine_bf16_img_s"] / row["engine_img_s"]
        if name in CONV:
            cl = _median(lambda n=name: raw_step(n, data, batch=64, channels_last=True), repeats)
            row["channels_last_ratio"] = cl / row["raw_step_img_s"]
            cle = _median(lambda n=name: engine(n, data, batch=64, channels_last=True), repeats)
            row["engine_channels_last_img_s"] = cle
            row["engine_channels_last_ratio"] = cle / row["engine_img_s"]
        for batch in (128, 256):
            row[f"engine_batch{batch}_img_s"] = _median(lambda n=name, b=batch: engine(n, data, batch=b), repeats)
        rows[name] = row
        print(f"{name:13s} raw {row['raw_step_img_s']:7.0f}  engine {row['engine_img_s']:7.0f} "
              f"({row['engine_over_raw']:.2f}x)  bf16 {row['bf16_ratio']:.2f}x  "
              f"channels_last {row.get('channels_last_ratio', float('nan')):.2f}x", flush=True)
    parallel = workers_vs_threads(repeats)
    print(f"4 recipes: 2 processes x 1 thread {parallel['two_processes_one_thread_s']:.1f} s, "
          f"1 process x 2 threads {parallel['one_process_two_threads_s']:.1f} s ({parallel['ratio']:.2f}x)")
    write("train", {
        "description": "training images/s per architecture: raw step vs engine, bf16 autocast, channels_last, "
                       "batch size (one thread each); build_many workers vs threads (wall)",
        "load_avg_1min_at_start": os.getloadavg()[0],
        "quick": args.quick,
        "images_per_epoch": args.images,
        "architectures": rows,
        "workers_vs_threads": parallel,
    })


if __name__ == "__main__":
    main()
