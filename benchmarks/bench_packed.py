"""Benchmark of Packed-Ensembles: throughput against a single model and a Deep Ensemble, and our
``PackedConv2d`` against torch-uncertainty's on identical layer configurations.

Measured side by side in one run, every model on the same input batch:

1. Inference images/s of the single model, PE-(2,4,2), PE-(2,4,1) and a 4-member Deep Ensemble
   (run sequentially), for the CPU-scale network (28×28×1) and a CIFAR ResNet-18 (32×32×3), plus
   training images/s (SGD step) of the same models.
   Goals: PE ≥ 0.8× the single model's throughput and ≥ 3× the Deep Ensemble's.
2. ``ensdiv.models.layers.packed.PackedConv2d`` vs ``torch_uncertainty.layers.PackedConv2d`` with the same
   weights (outputs checked equal), inference and training (forward + backward) images/s.
   Goal: ours ≥ 1.0× torch-uncertainty's. Skipped when torch-uncertainty is not installed
   (``pip install torch-uncertainty``; it is a benchmark-only dependency).

Usage: ``python benchmarks/bench_packed.py [--quick]``; writes ``benchmarks/results/packed.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import write  # noqa: E402

from ensdiv.chapters.packed_ensembles import build_method, method_cost  # noqa: E402
from ensdiv.models import inference_throughput, training_throughput  # noqa: E402
from ensdiv.models.layers.packed import PackedConv2d  # noqa: E402

VARIANTS = {
    "single": ("single", {}),
    "PE-(2,4,2)": ("packed", {"alpha": 2, "gamma": 2}),
    "PE-(2,4,1)": ("packed", {"alpha": 2, "gamma": 1}),
    "deep_ensemble_4": ("deep_ensemble", {}),
}


def bench_networks(quick: bool) -> dict:
    nets = {
        "cpu_small": {"arch": "small", "shape": (1, 28, 28), "kw": {"widths": [16, 32, 64]},
                      "batch": 128 if quick else 256, "train_batch": 64},
        "cifar_resnet18": {"arch": "resnet18", "shape": (3, 32, 32), "kw": {},
                           "batch": 8 if quick else 32, "train_batch": 8 if quick else 16},
    }
    repeats = 2 if quick else 5
    out = {}
    for name, spec in nets.items():
        shape = spec["shape"]
        x = torch.randn(spec["batch"], *shape, generator=torch.Generator().manual_seed(0))
        rows = {}
        for label, (method, extra) in VARIANTS.items():
            torch.manual_seed(0)
            net = build_method(method, arch=spec["arch"], num_classes=10, in_chans=shape[0],
                               img_size=shape[-1], num_estimators=4, **extra, **spec["kw"])
            rows[label] = {
                **method_cost(net, shape),
                "inference_images_per_s": inference_throughput(net, shape, inputs=x, repeats=repeats),
                "training_images_per_s": training_throughput(net, shape, batch_size=spec["train_batch"],
                                                             steps=1 if quick else 3),
            }
        single, de = rows["single"], rows["deep_ensemble_4"]
        for r in rows.values():
            r["inference_vs_single"] = r["inference_images_per_s"] / single["inference_images_per_s"]
            r["inference_vs_deep_ensemble"] = r["inference_images_per_s"] / de["inference_images_per_s"]
            r["training_vs_single"] = r["training_images_per_s"] / single["training_images_per_s"]
        out[name] = {"input": list(shape), "batch": spec["batch"], "models": rows,
                     "goal_pe_ge_0.8x_single": {k: rows[k]["inference_vs_single"] >= 0.8
                                                for k in ("PE-(2,4,2)", "PE-(2,4,1)")},
                     "goal_pe_ge_3x_deep_ensemble": {k: rows[k]["inference_vs_deep_ensemble"] >= 3
                                                     for k in ("PE-(2,4,2)", "PE-(2,4,1)")}}
    return out


def _time(fn, *, min_time: float, repeats: int) -> float:
    fn()
    rates = []
    for _ in range(repeats):
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < min_time:
            fn()
            n += 1
        rates.append(n / (time.perf_counter() - t0))
    return sorted(rates)[len(rates) // 2]


def bench_layers(quick: bool) -> dict:
    try:
        from torch_uncertainty.layers import PackedConv2d as TUPackedConv2d
    except Exception as exc:  # noqa: BLE001 - any import failure means: skip this part
        return {"skipped": f"torch_uncertainty not importable ({type(exc).__name__}: {exc})"}
    # (in, out, kernel, alpha, M, gamma, H, batch): CPU-scale and ResNet-18-like layers.
    configs = [(8, 8, 3, 2, 4, 1, 28, 64), (16, 16, 3, 2, 4, 2, 14, 64), (32, 32, 3, 2, 4, 2, 7, 64),
               (64, 64, 3, 2, 4, 1, 32, 16), (128, 128, 3, 2, 4, 2, 16, 16), (256, 256, 3, 2, 4, 2, 8, 16)]
    if quick:
        configs = configs[:1] + configs[4:5]
    rows = []
    for c_in, c_out, k, alpha, m, gamma, h, b in configs:
        torch.manual_seed(0)
        ours = PackedConv2d(c_in, c_out, k, alpha=alpha, num_estimators=m, gamma=gamma, padding=1)
        theirs = TUPackedConv2d(c_in, c_out, k, alpha=alpha, num_estimators=m, gamma=gamma, padding=1,
                                minimum_channels_per_group=0)
        with torch.no_grad():
            theirs.conv.weight.copy_(ours.weight)
            theirs.conv.bias.copy_(ours.bias)
        x = torch.randn(b, ours.in_channels, h, h)
        xg = x.clone().requires_grad_(True)

        def infer(layer, inp=x):
            def fn():
                with torch.no_grad():
                    layer(inp)
            return fn

        def step(layer, inp=xg):
            return lambda: F.relu(layer(inp)).sum().backward()

        with torch.no_grad():
            same = bool(torch.allclose(ours(x), theirs(x), atol=1e-4))
        t = 0.1 if quick else 0.3
        inf_ours, inf_theirs = (_time(infer(lay), min_time=t, repeats=3) * b for lay in (ours, theirs))
        tr_ours, tr_theirs = (_time(step(lay), min_time=t, repeats=3) * b for lay in (ours, theirs))
        rows.append({"config": {"in": c_in, "out": c_out, "kernel": k, "alpha": alpha, "M": m, "gamma": gamma,
                                "size": h, "batch": b, "channels_per_group": ours.in_channels // ours.groups},
                     "same_outputs": same,
                     "inference_images_per_s": {"ours": inf_ours, "torch_uncertainty": inf_theirs,
                                                "ratio": inf_ours / inf_theirs},
                     "training_images_per_s": {"ours": tr_ours, "torch_uncertainty": tr_theirs,
                                               "ratio": tr_ours / tr_theirs}})
    return {"layers": rows,
            "goal_ours_ge_1.0x_inference": all(r["inference_images_per_s"]["ratio"] >= 1.0 for r in rows),
            "min_inference_ratio": min(r["inference_images_per_s"]["ratio"] for r in rows),
            "min_training_ratio": min(r["training_images_per_s"]["ratio"] for r in rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller batches and fewer repeats")
    args = parser.parse_args()
    t0 = time.perf_counter()
    payload = {"quick": args.quick, "load_average_at_start": list(os.getloadavg()),
               "networks": bench_networks(args.quick), "layer_vs_torch_uncertainty": bench_layers(args.quick)}
    payload["wall_s"] = time.perf_counter() - t0
    write("packed", payload)


if __name__ == "__main__":
    main()
