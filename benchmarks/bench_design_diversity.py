"""Benchmark of design-diversity's Fig. 5 pipeline: cold attributions, warm 364-ensemble sweep, and a loop.

Measures, side by side in one run:

1. **cold**: captum Saliency maps (w.r.t. the label, absolute values) of the 14 cpu-scale ``dd/*``
   architectures on ``--images`` (default 1,000, the cpu preset's ``attr_images``) 28×28 images of one
   set, written to a fresh store in bfloat16 as the chapter caches them. Untrained weights: the cost of a
   backward pass does not depend on the weights' values.
2. **warm**: what Fig. 5 does once the maps are cached — load the 14 maps from the store, run
   :func:`ensdiv.metrics.ensemble_sweep` on the 364 ensembles (logit averaging, 10,000 test samples ×
   10 classes) and add Eq. 7 raw and on unit-L2 maps (:func:`ensdiv.metrics.ensemble_attribution_diversity`,
   one Gram matrix each). Target: under one second.
3. **loop**: the same columns with one Python iteration per ensemble (combine, accuracy, Eq. 4 over the
   pairs, :func:`ensdiv.metrics.attribution_diversity` of the three members' maps, raw and normalised).

Usage: ``python benchmarks/bench_design_diversity.py [--images N]``; writes
``benchmarks/results/design_diversity.json``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write  # noqa: E402

from ensdiv.chapters.zoo import zoo_recipes  # noqa: E402
from ensdiv.ensembles import combine  # noqa: E402
from ensdiv.metrics import (  # noqa: E402
    attribution_diversity,
    attribution_gram,
    attributions,
    combination_index,
    ensemble_attribution_diversity,
    ensemble_sweep,
    normalize_attributions,
    oracle_disagreement,
)
from ensdiv.store import Store  # noqa: E402
from ensdiv.train.build import build_model  # noqa: E402


def cold(store: Store, n_images: int) -> tuple[dict, list[dict]]:
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(n_images, 1, 28, 28, generator=g), torch.randint(0, 10, (n_images,), generator=g)
    per_model, configs = {}, []
    t_all = time.perf_counter()
    for key, recipe in zoo_recipes("cpu", "dd/*").items():
        net = build_model(recipe, num_classes=10, in_chans=1, img_size=28).eval()
        for p in net.parameters():
            p.requires_grad_(False)
        t = time.perf_counter()
        a = attributions(net, x, y, method="saliency", batch_size=250)
        conf = {"bench": key, "images": n_images}
        store.save("dd-attributions", conf, {"maps": a.to(torch.bfloat16)})
        per_model[key.split("/", 1)[1]] = round(time.perf_counter() - t, 3)
        configs.append(conf)
    return {"seconds": round(time.perf_counter() - t_all, 2), "per_model_seconds": per_model}, configs


def logits_zoo(m: int = 14, n: int = 10000, c: int = 10) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    y = torch.randint(0, c, (n,), generator=g)
    z = torch.randn(m, n, c, generator=g)
    z[:, torch.arange(n), y] += torch.linspace(0.5, 2.0, m)[:, None]
    return z, y


def warm(store: Store, configs: list[dict], z: torch.Tensor, y: torch.Tensor) -> tuple[float, dict]:
    t = time.perf_counter()
    attr = torch.stack([store.load("dd-attributions", c)["maps"].float() for c in configs])
    t_load = time.perf_counter() - t
    df = ensemble_sweep(z, y, size=3, how="mean_logits")
    combos = torch.tensor(df["members"].tolist())
    df["attribution_diversity"] = ensemble_attribution_diversity(attribution_gram(attr), combos, gram=True).numpy()
    df["attribution_diversity_l2"] = ensemble_attribution_diversity(
        attribution_gram(normalize_attributions(attr)), combos, gram=True).numpy()
    total = time.perf_counter() - t
    return total, {"load_maps_seconds": round(t_load, 3), "ensembles": len(df), "frame": df}


def loop(attr: torch.Tensor, z: torch.Tensor, y: torch.Tensor) -> float:
    t = time.perf_counter()
    unit = normalize_attributions(attr)
    correct = z.argmax(-1) == y
    for c in itertools.combinations(range(z.shape[0]), 3):
        idx = list(c)
        acc = float((combine(z[idx], "mean_logits").argmax(-1) == y).double().mean())
        best = float(correct[idx].double().mean(1).max())
        _ = acc - best, float(oracle_disagreement(z[idx].argmax(-1), y))
        _ = float(attribution_diversity(attr[idx])), float(attribution_diversity(unit[idx]))
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=1000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(tmp)
        cold_res, configs = cold(store, args.images)
        z, y = logits_zoo()
        warm_runs = [warm(store, configs, z, y) for _ in range(3)]
        warm_s = min(t for t, _ in warm_runs)
        info = warm_runs[0][1]
        attr = torch.stack([store.load("dd-attributions", c)["maps"].float() for c in configs])
        loop_s = loop(attr, z, y)
        df = info.pop("frame")
        # the two paths agree (the loop's Eq. 7 against the sweep's column)
        check = [float(attribution_diversity(attr[list(m)])) for m in df["members"][:20]]
        agree = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(df["attribution_diversity"][:20], check,
                                                                       strict=True))
    write("design_diversity", {
        "load_average_at_end": [round(v, 2) for v in os.getloadavg()],
        "setting": {"models": 14, "ensembles": len(combination_index(14, 3)), "attr_images": args.images,
                    "logit_samples": int(z.shape[1]), "classes": int(z.shape[2])},
        "cold_attributions": cold_res,
        "warm_sweep_seconds": round(warm_s, 3), **info,
        "loop_seconds": round(loop_s, 3),
        "speedup_sweep_vs_loop": round(loop_s / warm_s, 1),
        "max_relative_difference_sweep_vs_loop": agree,
        "target_warm_under_1s": warm_s < 1.0,
    })


if __name__ == "__main__":
    main()
