"""What the timer measured before its processes fixed their allocator: Packed-Ensembles Fig. 1's six models timed
in independent process sets with glibc's default allocator and with ``ensdiv.models.throughput.steady_allocator``,
side by side.

Issue #31 asked why five runs of Fig. 1 gave PE/single from 0.53 to 0.72. A fresh timing process that has not yet
freed a large block returns every freed activation to the kernel and faults it back in on the next pass; when that
stops depends on what the process happened to allocate first, so the same model ran 2-3x faster in one process
than in the next. This script alternates the two modes set by set (``--sets`` sets of ``--rounds`` rounds each,
every model in a process of its own on one thread, batch 128, as the page times them) and records each set's
images/s and ratios, and their spread over the sets. The models are untrained (speed does not depend on the
weights). Run it on an idle machine: ``python benchmarks/bench_timing_allocator.py [--sets 6] [--rounds 3]``;
writes ``benchmarks/results/timing_allocator.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write  # noqa: E402

import ensdiv as ed  # noqa: E402
from ensdiv.chapters import packed_ensembles as ch  # noqa: E402

PAIRS = {"PE / single": ("Packed-Ensembles", "Single Model"), "PE / DE": ("Packed-Ensembles", "Deep Ensembles")}


def one_set(nets: dict, shape: tuple, rounds: int, steady: bool) -> dict:
    rows = ed.models.throughput_rounds(nets, shape, rounds=rounds, batch_size=128, threads=1, steady=steady)
    table = pd.DataFrame(rows).pivot(index="round", columns="model", values="inference images/s")
    return {"steady allocator": all(r["steady allocator"] for r in rows) if steady else False,
            "images/s": {m: round(float(table[m].mean()), 1) for m in table},
            **{name: round(float((table[a] / table[b]).mean()), 4) for name, (a, b) in PAIRS.items()}}


def spread(values: list[float]) -> dict:
    v = np.asarray(values, dtype=float)
    return {"min": round(float(v.min()), 4), "max": round(float(v.max()), 4), "mean": round(float(v.mean()), 4),
            "cv": round(float(v.std(ddof=1) / v.mean()), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cfg = ch.preset("fig01_accuracy_vs_speed", "cpu")
    test = ch.eval_set(cfg.test_set, subset=256)
    shape = ch.data_shape(test)
    torch.manual_seed(0)
    nets = {ch.METHOD_LABELS[m]: ch.build_for(m, cfg, test) for m in ch.METHODS}
    sets: dict[str, list[dict]] = {"default": [], "steady": []}
    t0 = time.perf_counter()
    for k in range(args.sets):
        order = ("default", "steady") if k % 2 == 0 else ("steady", "default")
        for mode in order:
            sets[mode].append(one_set(nets, shape, args.rounds, steady=mode == "steady"))
            print(k, mode, sets[mode][-1], flush=True)
    summary = {mode: {**{name: spread([s[name] for s in rows]) for name in PAIRS},
                      **{f"{m} images/s": spread([s["images/s"][m] for s in rows])
                         for m in ("Single Model", "Packed-Ensembles", "Deep Ensembles")}}
               for mode, rows in sets.items()}
    write("timing_allocator", {
        "description": __doc__.split("\n\n")[1].replace("\n", " "),
        "sets": args.sets, "rounds": args.rounds, "threads": 1, "batch": 128,
        "seconds": round(time.perf_counter() - t0, 1), "summary": summary, "per_set": sets,
    })


if __name__ == "__main__":
    main()
