"""Benchmark: SED's training step time against ensemble size M (Rubinstein et al., §3.2.2 and §4.4).

Times one training step (forward of the trained members, loss, backward, AdamW step) of M linear heads
on random 48-dimensional features, batch 64, for M in {2, 5, 10, 20, 50}: SED with |I| = 2 against
naive A2D with all pairs (Eq. 3) and with the reference's one-vs-rest pairing (both on a labelled batch
plus an unlabeled batch of the same size). Reports the median over repeats and the fitted exponent k of
time ∝ M^k per variant. Expected: SED flat (k ≈ 0), naive at least linear.

Usage: ``python benchmarks/bench_sed.py [--quick]``; writes ``benchmarks/results/sed.json``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write  # noqa: E402

from ensdiv.chapters import sed as ch  # noqa: E402

VARIANTS = {"sed_subset2": ("sed", "all"), "naive_a2d_all_pairs": ("naive_a2d", "all"),
            "naive_a2d_one_vs_rest": ("naive_a2d", "one_vs_rest")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="M in {2, 5, 10}, fewer steps")
    args = parser.parse_args()
    sizes = [2, 5, 10] if args.quick else [2, 5, 10, 20, 50]
    steps, repeats = (10, 2) if args.quick else (30, 3)
    results: dict[str, dict] = {}
    for name, (loss, pairs) in VARIANTS.items():
        ms = {m: 1000 * ch.time_steps(m, loss, pairs=pairs, steps=steps if m < 50 or loss == "sed" else 5,
                                      repeats=repeats) for m in sizes}
        results[name] = {"ms_per_step": ms, "exponent": ch.fit_exponent(list(ms), list(ms.values()))}
        print(name, {m: round(v, 3) for m, v in ms.items()}, "k =", round(results[name]["exponent"], 2), flush=True)
    write("sed", {"sizes": sizes, "batch": 64, "feature_dim": 48, "classes": 10, "subset": 2, "variants": results})


if __name__ == "__main__":
    main()
