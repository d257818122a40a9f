"""The accuracy/time table the zoo's cpu recipes are chosen from.

For each architecture family, a small grid of budgets (training images, epochs, batch size with its
learning rate) over the zoo's own recipe: test accuracy on Fashion-MNIST's 10,000 test images and the
training time, from the shared cache (a budget that the zoo then uses is not trained again). The
time column is only comparable between rows measured on the same machine at the same load: the load
average is recorded with every row.

Run ``python benchmarks/bench_zoo_recipes.py --arch resnet vit`` (``--grid`` to choose budgets);
writes ``benchmarks/results/zoo_recipes.json`` (rows are merged with earlier runs of other families).
"""

from __future__ import annotations

import argparse
import json
import os

import torch
from _common import RESULTS, write

import ensdiv as ed
from ensdiv.chapters.zoo import zoo_recipes

#: (training images, epochs, batch size, learning-rate multiplier[, weight-decay multiplier]) over the zoo's
#: recipe when the row is measured; each row records the absolute learning rate and weight decay it used
#: (the rows before the SGD base moved to lr 0.1 / wd 2e-3 are relative to lr 0.05 / wd 5e-4)
GRID = {
    "base": (10000, 4, 64, 1.0),
    "20k-4": (20000, 4, 64, 1.0),
    "20k-8": (20000, 8, 64, 1.0),
    "30k-4": (30000, 4, 64, 1.0),
    "55k-2": (0, 2, 64, 1.0),
    "55k-3": (0, 3, 64, 1.0),
    "55k-4": (0, 4, 64, 1.0),
    "55k-4-b128": (0, 4, 128, 2.0),
    "55k-8-b128": (0, 8, 128, 2.0),
    # the zoo's budget with a larger step or a stronger weight decay (hparam/resnet-lr0.2: 90.2 %)
    "30k-4-lr4": (30000, 4, 64, 4.0),
    "30k-4-lr2-wd4": (30000, 4, 64, 2.0, 4.0),
}


def row(arch: str, budget: str) -> dict:
    subset, epochs, batch, lr_mult, *wd = GRID[budget]
    base = zoo_recipes("cpu", f"arch/{arch}")[f"arch/{arch}"]
    r = base.replace(train_subset=subset, epochs=epochs, batch_size=batch, lr=base.optim.lr * lr_mult,
                     weight_decay=base.optim.weight_decay * (wd[0] if wd else 1.0), name=f"{arch}-{budget}")
    load = os.getloadavg()[0]
    model = ed.train_recipe(r, progress=False)
    logits = ed.predict(r, "fmnist/test")
    acc = float((logits.argmax(-1) == ed.get_dataset("fmnist/test").y).float().mean())
    return {"arch": arch, "budget": budget, "train_images": subset or 55000, "epochs": epochs, "batch_size": batch,
            "lr": r.optim.lr, "weight_decay": r.optim.weight_decay, "test_acc": acc,
            "train_time_s": model.ensdiv_meta["train_time_s"],
            "images_seen": (subset or 55000) * epochs, "load_avg_1min": load, "threads": torch.get_num_threads()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", nargs="+", default=["resnet"])
    ap.add_argument("--grid", nargs="+", default=list(GRID), choices=list(GRID), metavar="BUDGET",
                    help=f"rows of the grid to measure, among: {', '.join(GRID)}")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    path = RESULTS / "zoo_recipes.json"
    for arch in args.arch:
        for budget in args.grid:
            new = row(arch, budget)
            # merged into the file as it is now, so runs side by side (one per core) keep each other's rows
            rows = json.loads(path.read_text())["rows"] if path.exists() else []
            rows = [x for x in rows if (x["arch"], x["budget"]) != (arch, budget)] + [new]
            print(f"{arch:13s} {budget:12s} acc {new['test_acc']:.4f}  {new['train_time_s']:7.1f} s  "
                  f"(load {new['load_avg_1min']:.1f})", flush=True)
            _write(rows)


def _write(rows: list) -> None:
    write("zoo_recipes", {"description": "test accuracy and training time of the zoo's recipes over a grid of "
                                         "budgets (benchmarks/bench_zoo_recipes.py)", "rows": rows})


if __name__ == "__main__":
    main()
