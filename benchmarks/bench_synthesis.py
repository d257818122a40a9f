"""Benchmark: every measure and outcome of the synthesis chapter's population, from warm caches.

Builds the population of ``synthesis/measures_vs_outcomes`` once (this warms the caches: models, their
predictions on the four evaluation sets, penultimate features for CKA, design-diversity's saliency maps),
then times a second, warm pass: loading the population, every measure (per measure, summed over the
pools), the outcomes and the correlation analysis with its bootstraps. Target at cpu scale: every measure
and outcome for the whole population in under two minutes.

What is vectorised: the pairwise measures (disagreement, oracle disagreement, Q, ρ, double fault) are one
(P, P) matrix per pool from the library's ``pairwise=True`` form, gathered per ensemble; attribution
diversity is one Gram matrix per pool plus a gather (``ensemble_attribution_diversity``); the bootstrap
evaluates all resamples of a Spearman ρ at once (``scipy.stats.bootstrap(vectorized=True)``). Error
inconsistency, κ and CKA are filled pair by pair over the pool (P(P-1)/2 calls), the per-sample measures
(#unique, equitability, PDS, MI) once per ensemble. SAT similarity is one cached (P, P) matrix per pool
(``ensdiv.sat_matrix``: one PGD run per model, then every model on every other model's adversarial images),
so the warm pass only loads it.

Usage: ``python benchmarks/bench_synthesis.py [--scale cpu]``; writes ``benchmarks/results/synthesis.json``
at cpu and paper scale (at smoke it only prints).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write  # noqa: E402

import ensdiv as ed  # noqa: E402
from ensdiv.chapters import synthesis as ch  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="cpu", choices=["smoke", "cpu", "paper"])
    args = parser.parse_args()
    cfg = ch.preset("measures_vs_outcomes", args.scale, verbose=False)
    t0 = time.perf_counter()
    ch.measure_table(ch.population(cfg))  # warm-up: fills every cache the timed pass reads
    warmup = time.perf_counter() - t0

    t0 = time.perf_counter()
    pop = ch.population(cfg)
    t_pop = time.perf_counter() - t0
    per_measure: dict[str, float] = {}
    t0 = time.perf_counter()
    measures = ch.measure_table(pop, timings=per_measure)
    t_measures = time.perf_counter() - t0
    t0 = time.perf_counter()
    outcomes = ch.outcome_table(pop)
    t_outcomes = time.perf_counter() - t0
    t0 = time.perf_counter()
    ch.correlation_table(measures, outcomes, n_boot=cfg.n_boot, ci=ed.report.LEVEL, seed=cfg.seed)
    t_corr = time.perf_counter() - t0
    slowest = max(per_measure, key=per_measure.get)
    payload = {
        "scale": args.scale, "ensembles": len(pop.ensembles),
        "pools": {s: len(p.members) for s, p in pop.pools.items()},
        "eval_subset": cfg.eval_subset, "n_boot": cfg.n_boot,
        "seconds": {"warmup_cold_or_warm": warmup, "population_warm": t_pop, "measures": t_measures,
                    "outcomes": t_outcomes, "measures_and_outcomes": t_measures + t_outcomes,
                    "correlations_with_bootstrap": t_corr},
        "seconds_per_measure": dict(sorted(per_measure.items(), key=lambda kv: -kv[1])),
        "slowest_measure": slowest,
        "under_two_minutes": t_measures + t_outcomes < 120,
    }
    if args.scale == "smoke":
        print(payload)
    else:
        write("synthesis", payload)


if __name__ == "__main__":
    main()
