"""Training throughput of the cpu-scale zoo, the zoo build time estimate, and vmap-stacked members.

Measures, on this machine:

1. images/s of one training step (forward + backward + SGD step, batch 128, 28x28x1) per architecture,
   through the same Fabric engine as ``ed.fit`` (a short ``fit`` on a fixed set, timed after a warm-up);
2. the estimated cold build time of the cpu-scale zoo (``ensdiv.zoo.ZOO["cpu"]``): sum over recipes of
   ``images seen / images per second`` of its architecture (+ prediction passes);
3. training M members of one architecture at once with ``torch.func.stack_module_state`` + ``vmap``
   (one batched step for all members, each on its own mini-batch) against M sequential steps, M = 4, 8.

Run ``python benchmarks/bench_train.py [--quick]``; writes ``benchmarks/results/train.json``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from ensdiv.data.registry import TensorSet
from ensdiv.models import create_model, list_models
from ensdiv.train import fit


def images_per_second(name: str, *, batch: int = 128, steps: int = 6) -> float:
    g = torch.Generator().manual_seed(0)
    n = batch * steps
    data = TensorSet(torch.rand(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g), "bench",
                     [str(i) for i in range(10)])
    model = create_model(name)
    warm = TensorSet(data.x[: 2 * batch], data.y[: 2 * batch], "warm", data.classes)
    fit(model, warm, epochs=1, lr=0.01, batch_size=batch, progress=False, accelerator="cpu")
    t0 = time.perf_counter()
    fit(model, data, epochs=1, lr=0.01, batch_size=batch, progress=False, accelerator="cpu")
    return n / (time.perf_counter() - t0)


def vmap_speedup(name: str, members: int, *, batch: int = 128, steps: int = 5) -> dict:
    from torch.func import functional_call, grad, replace_all_batch_norm_modules_, stack_module_state, vmap

    torch.manual_seed(0)
    models = [create_model(name) for _ in range(members)]
    for m in models:
        replace_all_batch_norm_modules_(m)  # BN without running stats: vmap-safe (both arms alike)
    x = torch.rand(members, batch, 1, 28, 28)
    y = torch.randint(0, 10, (members, batch))
    # sequential: M independent SGD steps
    opts = [torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9) for m in models]

    def seq_step() -> None:
        for m, o, xb, yb in zip(models, opts, x, y, strict=True):
            o.zero_grad()
            F.cross_entropy(m(xb), yb).backward()
            o.step()

    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")

    def loss_fn(p, b, xb, yb):
        return F.cross_entropy(functional_call(base, (p, b), (xb,)), yb)

    vgrad = vmap(grad(loss_fn), in_dims=(0, 0, 0, 0))
    mom = {k: torch.zeros_like(v) for k, v in params.items()}

    def vmap_step() -> None:
        grads = vgrad(params, buffers, x, y)
        with torch.no_grad():
            for k, gk in grads.items():
                mom[k].mul_(0.9).add_(gk)
                params[k].sub_(0.01 * mom[k])

    out = {}
    for label, fn in (("sequential_s", seq_step), ("vmap_s", vmap_step)):
        fn()
        t0 = time.perf_counter()
        for _ in range(steps):
            fn()
        out[label] = (time.perf_counter() - t0) / steps
    out["speedup"] = out["sequential_s"] / out["vmap_s"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="three architectures, M=4 only")
    args = ap.parse_args()
    names = list_models(include_test=False)
    if args.quick:
        names = ["mlp", "small_cnn", "resnet"]
    ips = {}
    for n in names:
        ips[n] = images_per_second(n, steps=3 if args.quick else 6)
        print(f"{n:14s} {ips[n]:8.0f} images/s")
    from ensdiv.zoo import ZOO, estimate_seconds

    est = estimate_seconds(ZOO["cpu"], ips) if not args.quick else None
    if est is not None:
        print(f"cpu-scale zoo: {len(ZOO['cpu'])} recipes, estimated cold build {est / 60:.1f} min")
    stacked = {}
    for n in ["mlp", "small_cnn"]:
        for m in [4] if args.quick else [4, 8]:
            stacked[f"{n}/M={m}"] = vmap_speedup(n, m)
            print(f"vmap {n} M={m}: speed-up x{stacked[f'{n}/M={m}']['speedup']:.2f}")
    result = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                    "load_avg_1min": os.getloadavg()[0], "torch": torch.__version__},
        "quick": args.quick,
        "images_per_second": ips,
        "zoo_cpu_estimated_build_s": est,
        "stacked_members": stacked,
    }
    out = Path(__file__).parent / "results" / "train.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
