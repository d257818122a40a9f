"""Benchmark: the training step time of SED and of the naive losses against ensemble size M (Rubinstein et al.,
§3.2.2 and §4.4), on the heads SED trains.

Times one training step (forward of the trained members, loss, backward, AdamW step) of M heads on random
features, batch 64, for M in {2, 5, 10, 20, 50}: SED with |I| = 2 (only those members forwarded) against naive
A2D with all pairs (Eq. 3), naive A2D with the reference's one-vs-rest pairing, and naive DivDis (mutual
information of every pair), the naive losses on a labelled batch plus an unlabeled batch of the same size and
their pair terms computed in one tensor operation (``ed.losses``: no Python loop over pairs). Heads
(``ensdiv.chapters.sed.timing_head``): ``block`` — the last block's MLP branch, final norms and classifier of
a ViT, the head SED trains — at the cpu ViT's width (48, MLP 96, 10 classes), and at DeiT3-B's (768, MLP 3072,
1000 classes) with ``--paper-width`` (on the GPU when there is one); ``linear`` — the earlier 48-d linear
heads, for comparison. Reports the median over repeats, the fitted exponent k of time ∝ M^k per variant, and
the updates each member gets per step (|I|/M for SED, 1 for the naive losses: at a fixed number of epochs a
SED member gets |I|/M of a naive member's updates).

Usage: ``python benchmarks/bench_sed.py [--quick] [--paper-width]``; writes ``benchmarks/results/sed.json``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write  # noqa: E402

from ensdiv.chapters import sed as ch  # noqa: E402

VARIANTS = {"sed_subset2": ("sed", "all"), "naive_a2d_all_pairs": ("naive_a2d", "all"),
            "naive_a2d_one_vs_rest": ("naive_a2d", "one_vs_rest"), "naive_divdis": ("naive_divdis", "all")}
HEADS = {"block_cpu_width": {"head": "block", "dim": 48, "hidden": 96, "classes": 10},
         "linear_48": {"head": "linear", "dim": 48, "hidden": 0, "classes": 10},
         "block_paper_width": {"head": "block", "dim": 768, "hidden": 3072, "classes": 1000}}
SUBSET = 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="M in {2, 5, 10}, fewer steps")
    parser.add_argument("--paper-width", action="store_true", help="also DeiT3-B-wide heads (GPU if available)")
    args = parser.parse_args()
    sizes = [2, 5, 10] if args.quick else [2, 5, 10, 20, 50]
    steps, repeats = (10, 2) if args.quick else (30, 3)
    heads = [h for h in HEADS if args.paper_width or h != "block_paper_width"]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    results: dict[str, dict] = {}
    for head in heads:
        spec = HEADS[head]
        where = device if head == "block_paper_width" else "cpu"
        results[head] = {"device": where, **spec, "variants": {}}
        for name, (loss, pairs) in VARIANTS.items():
            ms = {m: 1000 * ch.time_steps(m, loss, pairs=pairs, steps=steps if m < 50 or loss == "sed" else 5,
                                          repeats=repeats, subset=SUBSET, device=where, **spec) for m in sizes}
            updates = {m: min(1.0, SUBSET / m) if loss == "sed" else 1.0 for m in sizes}
            results[head]["variants"][name] = {"ms_per_step": ms,
                                               "exponent": ch.fit_exponent(list(ms), list(ms.values())),
                                               "updates_per_member_per_step": updates}
            print(head, name, {m: round(v, 3) for m, v in ms.items()}, "k =",
                  round(results[head]["variants"][name]["exponent"], 2), flush=True)
    write("sed", {"sizes": sizes, "batch": 64, "subset": SUBSET, "heads": results})


if __name__ == "__main__":
    main()
