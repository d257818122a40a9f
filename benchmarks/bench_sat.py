"""Cost of an N×N SAT similarity matrix (attack-similarity §2) for N = 4, 8, 16 models at cpu scale.

``ensdiv.transfer.sat_matrix`` runs N attacks (each ``steps`` forward+backward passes over the
images) and then N² cheap evaluations (one batched forward pass per target over all N sources'
adversarial images). This benchmark times the whole matrix for several N, times one attack and one
target's evaluation pass directly, and fits T(N) = a·N + b·N² to show where the time goes. Models are
small, untrained zoo architectures (``mlp`` by default, as allowed for a cost benchmark; weights do
not change the cost). Run ``python benchmarks/bench_sat.py [--quick] [--model small_cnn]``; writes
``benchmarks/results/sat.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write  # noqa: E402

from ensdiv.attacks import pgd  # noqa: E402
from ensdiv.data import load_fashion_mnist  # noqa: E402
from ensdiv.models import create_model  # noqa: E402
from ensdiv.transfer import _logits, sat_matrix  # noqa: E402


def models(name: str, n: int) -> list[torch.nn.Module]:
    out = []
    for seed in range(n):
        torch.manual_seed(seed)
        out.append(create_model(name).eval())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 2, 4 on 50 images, 3 steps")
    parser.add_argument("--model", default="mlp", help="zoo architecture used for every member")
    parser.add_argument("--images", type=int, default=200, help="attacked test images (cpu preset: 200)")
    parser.add_argument("--steps", type=int, default=10, help="PGD steps (cpu preset: 10; paper: 50)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message="Some pairs of models")  # untrained members: some X_AB empty
    sizes = [2, 4] if args.quick else [4, 8, 16]
    images = 50 if args.quick else args.images
    steps = 3 if args.quick else args.steps
    test = load_fashion_mnist("test").subset(images, seed=0)
    attack = {"eps": 0.1, "alpha": 0.025, "steps": steps}

    # the two unit costs, measured directly (best of 3)
    one = models(args.model, 1)[0]
    t_attack = min(_time(lambda: pgd(one, test.x, test.y, **attack)) for _ in range(3))
    x_all = test.x.repeat(sizes[-1], 1, 1, 1)
    t_eval = min(_time(lambda: _logits(one, x_all, 256)) for _ in range(3)) / sizes[-1]

    rows = []
    for n in sizes:
        ms = models(args.model, n)
        t = _time(lambda ms=ms: sat_matrix(ms, test, subsample=None, attack_kwargs=attack))
        pairs = n * (n - 1) // 2
        rows.append({"N": n, "seconds": round(t, 3), "pairs": pairs, "seconds_per_pair": round(t / pairs, 4),
                     "predicted_attacks_s": round(n * t_attack, 3),
                     "predicted_evals_s": round(n * n * t_eval, 3)})  # fmt: skip
        print(f"N = {n:2d}: {t:7.2f} s, {t / pairs:.3f} s per pair "
              f"(N attacks ≈ {n * t_attack:.2f} s, N² evaluations ≈ {n * n * t_eval:.2f} s)", flush=True)
    ns = np.array([r["N"] for r in rows], dtype=float)
    ts = np.array([r["seconds"] for r in rows])
    (a, b), *_ = np.linalg.lstsq(np.stack([ns, ns**2], 1), ts, rcond=None)
    write("sat", {
        "description": "time of an N×N SAT matrix: N attacks + N² batched cross evaluations",
        "model": args.model, "images": images, "pgd_steps": steps,
        "one_attack_s": round(t_attack, 4), "one_source_target_eval_s": round(t_eval, 5),
        "attack_to_eval_cost_ratio": round(t_attack / max(t_eval, 1e-9), 1),
        "fit_T_eq_a_N_plus_b_N2": {"a_s": round(float(a), 4), "b_s": round(float(b), 5)},
        "rows": rows,
    })  # fmt: skip


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
