"""The budget curve that chose Packed-Ensembles Table 1's cpu training budget (#31).

Trains the single model and PE-(2, 4, 2) of Table 1's cpu preset — the zoo's recipe: 30,000 Fashion-MNIST
images, batch 64, SGD lr 0.1, weight decay 2e-3, flips, cosine — at several budgets, each budget a run of its
own with its whole schedule, and scores each on the 5,000 validation images (never the test set). The models
go to the shared cache, so the run at the budget Table 1 uses is Table 1's own model.

Run ``python benchmarks/bench_packed_budget.py --epochs 1 2 4 8``; writes
``benchmarks/results/packed_budget.json``: the record of the curve that chose ``TABLE1_EPOCHS`` (with the
machine and load), and the same record to ``book/data/packed_budget.json`` (``ch.RECORD``), where Table 1's page
reads the budgets it does not train itself (it trains only Table 1's own, ``budget_epochs``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import time

from _common import write

import ensdiv as ed
from ensdiv.chapters import packed_ensembles as ch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--tolerance", type=float, default=1.0, help="points of validation accuracy")
    args = ap.parse_args()
    cfg = ch.preset("tab01_efficient_ensembles", "cpu", verbose=False)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    curve = ch.budget_curve(cfg, epochs=args.epochs)
    choice = ch.plateau_budget(curve, tolerance=args.tolerance)
    path = write("packed_budget", {
        "description": "Validation accuracy (%) of Table 1's single model and PE-(2,4,2) at each budget "
                       "(separate runs, cosine over each budget), the cpu preset's recipe; the chosen budget is "
                       "the cheapest at which both are within the tolerance of their best measured accuracy.",
        "recipe": {k: cfg[k] for k in ch.CURVE_RECIPE_KEYS},
        "validation_set": ch.VALIDATION_SET,
        "tolerance_points": args.tolerance,
        "curve": curve.to_dict(orient="records"),
        "choice": choice,
        "wall_s": round(time.perf_counter() - t0, 1),
        "load_avg_1min_at_start": load,
    })
    shutil.copyfile(path, ed.paths.project_root() / ch.RECORD)


if __name__ == "__main__":
    main()
