"""Benchmark of the metrics package: vectorised ensemble sweeps and streaming CKA memory.

Measures, side by side in one run:

1. ``ensemble_sweep`` over all C(14, 3) = 364 three-member ensembles of 14 models on 10,000
   samples × 10 classes (random logits), against a per-ensemble Python loop computing the same
   columns with :func:`ensdiv.ensembles.combine` and the pairwise metrics (goal: sweep < 1 s).
2. The same for all C(69, 2) = 2,346 pairs of a 69-model zoo (attack-similarity Fig. 2).
3. Peak memory of :class:`ensdiv.metrics.MinibatchCKA` as N grows (10k, 60k samples, batches of
   256, two layers per model), measured as the peak RSS growth of a fresh process, against the
   size of the N × N Gram matrix a full-data CKA would need.

Usage: ``python benchmarks/bench_metrics.py [--quick]``; writes ``benchmarks/results/metrics.json``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing as mp
import os
import platform
import time
from pathlib import Path

import torch

from ensdiv.ensembles import combine
from ensdiv.metrics import MinibatchCKA, disagreement, ensemble_sweep, oracle_disagreement

RESULTS = Path(__file__).resolve().parent / "results" / "metrics.json"


def make_zoo(m: int, n: int, c: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, c, (n,), generator=g)
    z = torch.randn(m, n, c, generator=g)
    z[:, torch.arange(n), y] += torch.linspace(0.5, 2.0, m)[:, None]
    return z, y


def loop_sweep(z: torch.Tensor, y: torch.Tensor, size: int, how: str, limit: int | None = None) -> int:
    """The naive way: one Python iteration per ensemble. Returns the number of ensembles done."""
    combos = list(itertools.combinations(range(z.shape[0]), size))[:limit]
    member_acc = (z.argmax(-1) == y).double().mean(1)
    rows = []
    for c in combos:
        idx = list(c)
        acc = float((combine(z[idx], how).argmax(-1) == y).double().mean())
        preds = z[idx].argmax(-1)
        rows.append(
            (acc, acc - float(member_acc[idx].max()), disagreement(preds), oracle_disagreement(preds, y))
        )
    return len(rows)


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bench_sweep(m: int, size: int, n: int, c: int, how: str, loop_limit: int | None, repeats: int) -> dict:
    z, y = make_zoo(m, n, c)
    k = len(list(itertools.combinations(range(m), size)))
    t_vec = best_of(lambda: ensemble_sweep(z, y, size=size, how=how), repeats)
    limit = loop_limit if loop_limit and loop_limit < k else None
    t0 = time.perf_counter()
    done = loop_sweep(z, y, size, how, limit)
    t_loop = (time.perf_counter() - t0) * k / done  # extrapolated when only part of the loop ran
    return {
        "members": m,
        "size": size,
        "ensembles": k,
        "samples": n,
        "classes": c,
        "rule": how,
        "vectorised_s": round(t_vec, 4),
        "loop_s": round(t_loop, 4),
        "loop_ensembles_timed": done,
        "speedup": round(t_loop / t_vec, 1),
    }


def _cka_child(n: int, batch: int, dims: tuple[int, ...], queue) -> None:  # runs in a fresh process
    import psutil

    torch.set_num_threads(1)
    proc = psutil.Process()
    g = torch.Generator().manual_seed(0)
    acc = MinibatchCKA()
    # warm-up: one batch through the same code path, so allocator and library pages are counted
    warm = [torch.randn(batch, d, generator=g) for d in dims]
    MinibatchCKA().update(warm[:2], warm[2:])
    base = proc.memory_info().rss
    largest, rss_max = 0, base
    t0 = time.perf_counter()
    for lo in range(0, n, batch):
        b = min(batch, n - lo)
        if b < 4:
            break
        feats = [torch.randn(b, d, generator=g) for d in dims]  # features arrive batch by batch
        acc.update(feats[:2], feats[2:])
        largest = max(largest, b * b * 8, *(f.numel() * 8 for f in feats))
        rss_max = max(rss_max, proc.memory_info().rss)
    acc.compute()
    seconds = time.perf_counter() - t0
    queue.put(
        {
            "rss_base_mb": base / 2**20,
            "rss_peak_mb": rss_max / 2**20,  # RSS sampled after every batch
            "largest_tensor_mb": largest / 2**20,
            "seconds": seconds,
        }
    )


def bench_cka_memory(ns: list[int], batch: int = 256) -> list[dict]:
    dims = (512, 128, 512, 128)  # two layers of model A, two of model B
    out = []
    ctx = mp.get_context("spawn")
    for n in ns:
        q = ctx.Queue()
        p = ctx.Process(target=_cka_child, args=(n, batch, dims, q))
        p.start()
        r = q.get()
        p.join()
        out.append(
            {
                "samples": n,
                "batch": batch,
                "peak_rss_growth_mb": round(max(0.0, r["rss_peak_mb"] - r["rss_base_mb"]), 1),
                "largest_tensor_mb": round(r["largest_tensor_mb"], 3),
                "full_gram_mb": round(n * n * 8 / 2**20, 1),
                "seconds": round(r["seconds"], 2),
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes, partial loop (CI smoke)")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    n = 2_000 if args.quick else 10_000
    repeats = 1 if args.quick else 3
    res = {
        "benchmark": "metrics",
        "quick": args.quick,
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "load_average_at_start": [round(v, 2) for v in os.getloadavg()],
        "machine": platform.platform(),
        "sweeps": [
            bench_sweep(14, 3, n, 10, "mean_logits", 60 if args.quick else None, repeats),
            bench_sweep(14, 3, n, 10, "vote", 60 if args.quick else None, repeats),
            bench_sweep(69, 2, n, 10, "mean_logits", 200 if args.quick else 600, repeats),
        ],
        "minibatch_cka": bench_cka_memory([2_000, 10_000] if args.quick else [10_000, 60_000]),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(res, indent=2))
    for s in res["sweeps"]:
        print(
            f"sweep M={s['members']:>2} k={s['size']} ({s['ensembles']} ensembles, N={s['samples']}, "
            f"{s['rule']}): "
            f"vectorised {s['vectorised_s']:.3f} s, loop {s['loop_s']:.2f} s -> {s['speedup']}x"
        )
    for r in res["minibatch_cka"]:
        print(
            f"MinibatchCKA N={r['samples']}: peak RSS growth {r['peak_rss_growth_mb']} MB, largest tensor "
            f"{r['largest_tensor_mb']} MB (a full Gram would be {r['full_gram_mb']} MB), {r['seconds']} s"
        )
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
