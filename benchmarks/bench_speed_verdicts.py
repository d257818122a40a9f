"""Do the speed verdicts hold from one run to the next? Packed-Ensembles Fig. 1, Fig. 3 and App. H, five times each.

Issue #31: before the timer moved to a process per model (``ed.models.throughput_rounds``), four idle runs of
Fig. 1 gave PE/DE = 1.88, 2.31, 1.53 and 2.52, so its "at least 2x the Deep Ensemble" check passed or failed
by chance. This script executes each page ``--runs`` times in a row at ``--scale`` (``ensdiv run --force``
into a folder of its own, so the book's executed pages are untouched; the models come from the cache) and
records, per run, the page's verdict and every speed ratio with its interval and check outcome. The pages
agree when every run gives the same verdict and the same outcome on every check; a check *contradicts* itself
when it passes in one run and fails in another. Run it on an idle machine:
``python benchmarks/bench_speed_verdicts.py [--runs 5] [--scale cpu]``; writes
``benchmarks/results/speed_verdicts.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, write  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("notebooks/packed-ensembles/fig01_accuracy_vs_speed.ipynb",
         "notebooks/packed-ensembles/fig03_equivalent_forms.ipynb",
         "notebooks/packed-ensembles/appH_training_speed.ipynb")


def one_run(page: str, scale: str, out: Path) -> dict:
    """Execute ``page`` once; its verdict, and each check's value, interval and outcome."""
    from ensdiv.book import page_run, run_notebooks

    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    (res,) = run_notebooks([ROOT / page], scale=scale, out_root=out, force=True, progress=False)
    row = {"status": res.status, "seconds": round(time.perf_counter() - t0, 1), "load_avg_1min_before": round(load, 2)}
    if res.status != "ok":
        return {**row, "error": res.error}
    (record,) = page_run(res.output, page).records
    checks = {c["name"]: {"value": c.get("value"), "interval": c.get("interval"), "outcome": c["ours"],
                          "counted": c.get("counted")} for c in record["checks"]}
    return {**row, "verdict": record["verdict"], "checks": checks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--quick", action="store_true", help="two runs at smoke scale")
    parser.add_argument("--pages", nargs="+", choices=[Path(p).stem for p in PAGES], default=None,
                        help="only these pages (default: all three); the others' results are kept from the last run")
    parser.add_argument("--resume", action="store_true",
                        help="keep each page's recorded runs at this scale and run only the missing ones up to --runs")
    args = parser.parse_args()
    runs, scale = (2, "smoke") if args.quick else (args.runs, args.scale)
    old = RESULTS / "speed_verdicts.json"
    kept, done = {}, {}
    before = json.loads(old.read_text()) if old.exists() else {}
    if before.get("scale") == scale:
        if args.pages:  # keep the other pages' last runs, if they were at this scale
            kept = {k: v for k, v in before.get("pages", {}).items() if k not in args.pages}
        if args.resume and before.get("runs") == runs:  # a page's runs so far, continued
            done = {k: list(v["runs"]) for k, v in before.get("pages", {}).items()}
    pages = dict(kept)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["ENSDIV_BUILD"] = str(Path(tmp) / "build")
        for page in PAGES:
            if args.pages and Path(page).stem not in args.pages:
                continue
            rows = done.get(Path(page).stem, [])[:runs]
            for k in range(len(rows), runs):
                rows.append(one_run(page, scale, Path(tmp) / f"run{k}"))
                print(f"{Path(page).stem} run {k + 1}/{runs}: {rows[-1].get('verdict', rows[-1]['status'])} "
                      f"in {rows[-1]['seconds']} s", flush=True)
                # written after every run: a long page's runs survive an interrupted benchmark
                pages[Path(page).stem] = _page_record(rows, runs)
                _write(pages, scale, runs)


def _page_record(rows: list[dict], runs: int) -> dict:
    """One page's runs so far: verdicts, whether all ``runs`` agree, each check's values, contradicting checks."""
    ok = [r for r in rows if r["status"] == "ok"]
    outcomes = {tuple(sorted((n, c["outcome"]) for n, c in r["checks"].items())) for r in ok}
    return {
        "runs": rows,
        "verdicts": [r.get("verdict") for r in rows],
        "completed": f"{len(rows)} of {runs}",
        "agree": len(ok) == runs and len({r["verdict"] for r in ok}) == 1 and len(outcomes) == 1,
        "values": {n: [r["checks"][n]["value"] for r in ok] for n in (ok[0]["checks"] if ok else {})},
        # a check that passed in one run and failed in another: the runs contradict each other (an
        # inconclusive run beside a pass or a fail only says that run's interval was wider)
        "contradicting_checks": sorted(n for n in (ok[0]["checks"] if ok else {})
                                       if {"pass", "fail"} <= {r["checks"][n]["outcome"] for r in ok}),
    }


def _write(pages: dict, scale: str, runs: int) -> None:
    write("speed_verdicts", {
        "description": "Packed-Ensembles Fig. 1, Fig. 3 and App. H executed several times in a row: the verdict and "
                       "every speed check per run (each model timed in a process of its own whose allocator keeps "
                       "freed memory, ed.models.throughput_rounds and ensdiv.models.throughput.steady_allocator; a "
                       "ratio's interval over the page's independent process sets). The runs with glibc's default "
                       "allocator are in speed_verdicts_default_allocator.json, the runs before process sets (one "
                       "set of 15 or 10 rounds per run) in speed_verdicts_one_process_set.json",
        "scale": scale, "runs": runs, "pages": pages,
        "verdict": "agree" if all(p["agree"] for p in pages.values()) else "DISAGREE",
    })

if __name__ == "__main__":
    main()
