"""Holm's correction as the verdict rule calls it: ``ed.report.holm`` against statsmodels' ``multipletests``.

Every claim calls Holm twice (passes and fails), and the calibration study builds tens of thousands of claims;
statsmodels' ``multipletests`` runs a full garbage collection on each call. Both are timed side by side in one
process, alternating in rounds, on the same p-values (three to nine checks), with many objects alive as in a
notebook that holds its models. Run: ``python benchmarks/bench_holm.py``; writes ``results/holm.json``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write  # noqa: E402

from ensdiv.report import ALPHA, holm  # noqa: E402


def main(rounds: int = 5, calls: int = 40) -> None:
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(0)
    cases = [list(rng.uniform(0, 0.1, rng.integers(3, 10))) for _ in range(calls)]
    alive = [{"i": i, "v": [i] * 4} for i in range(300_000)]  # a notebook's worth of live objects
    timings = {"ensdiv": [], "statsmodels": []}
    for _ in range(rounds):
        for name, fn in (("ensdiv", lambda p: holm(p)),
                         ("statsmodels", lambda p: multipletests(p, alpha=ALPHA, method="holm")[0])):
            start = time.perf_counter()
            for p in cases:
                fn(p)
            timings[name].append((time.perf_counter() - start) / calls)
    best = {k: min(v) for k, v in timings.items()}
    write("holm", {"description": "seconds per Holm call (best of rounds), 300,000 live objects",
                   "rounds": rounds, "calls_per_round": calls, "live_objects": len(alive),
                   "seconds_per_call": best, "ratio_statsmodels_over_ensdiv": best["statsmodels"] / best["ensdiv"]})


if __name__ == "__main__":
    main()
