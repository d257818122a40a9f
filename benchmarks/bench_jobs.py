"""``ensdiv run --jobs 2`` against ``--jobs 1`` on the same pages from the same cache, side by side (issue #53,
item 3). Writes ``scales.cpu.jobs_ab`` of ``benchmarks/results/book.json``.

Both runs start cold for the pages measured and warm for everything else: each gets its own hard-linked copy of
a cache that holds a whole build (``--cache``, e.g. the cache of a cold book), from which the entries that the
measured pages were the first to use (in book order, read off the executed copies of ``--build``, datasets kept)
are removed. The pages then train and compute what they would in a cold book once the pages before them have
run. ``--jobs 1`` runs first, then ``--jobs 2``, one after the other on the idle machine; each run's wall time is
the whole ``ensdiv run`` process.

Usage (after a cold build whose cache and build folder are kept)::

    python benchmarks/bench_jobs.py --cache /work/coldcache --build /work/coldrun/_build \\
        --pages notebooks/design-diversity/sec431_attribution_penalty.ipynb notebooks/training-methods/*.ipynb
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def first_used(build: Path, scale: str = "cpu") -> dict[str, str]:
    """Each cache entry the executed copies of ``build`` record (datasets aside), with the first page in book order
    that used it (:func:`ensdiv.book.schedule.first_users`)."""
    from ensdiv.book import schedule, stamps, toc_notebooks

    pages = [nb.relative_to(ROOT).as_posix() for nb in toc_notebooks(root=ROOT)]
    return schedule.first_users(pages, {p: stamps.meta_of(build / "executed" / scale / p).get("cache") or []
                                        for p in pages})


def cold_copy(cache: Path, dest: Path, drop: list[str]) -> int:
    """A hard-linked copy of ``cache`` at ``dest`` without the entries ``drop`` (and their side files)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-al", str(cache), str(dest)], check=True)
    removed = 0
    for entry in drop:
        f = dest / entry
        for g in [f, *f.parent.glob(f.stem + ".*")]:
            if g.exists():
                g.unlink()
                removed += 1
    return removed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, help="the cache of a whole build")
    parser.add_argument("--build", type=Path, help="that build's folder (its executed copies)")
    parser.add_argument("--pages", nargs="+", default=[], help="the pages to measure (notebooks/... paths)")
    parser.add_argument("--quick", action="store_true", help="(make bench) nothing to make quicker")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-jobs"), help="where the copies go")
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    if not (args.cache and args.build and args.pages):
        print("bench_jobs: needs the cache and build folder of a kept cold build (--cache, --build) and --pages; "
              "skipped.")
        return
    from ensdiv.book import toc_notebooks

    order = [nb.relative_to(ROOT).as_posix() for nb in toc_notebooks(root=ROOT)]
    pages = [p for p in order if p in set(args.pages)]
    drop = sorted(e for e, p in first_used(args.build).items() if p in pages)
    row: dict = {"pages": pages, "entries_removed": len(drop), "cpu_count": os.cpu_count(), "note": args.note,
                 "when": time.strftime("%Y-%m-%d %H:%M:%S")}
    for jobs in (1, 2):
        cache = args.work / f"cache-{jobs}"
        cold_copy(args.cache, cache, drop)
        build = args.work / f"build-{jobs}"
        shutil.rmtree(build, ignore_errors=True)
        env = {**os.environ, "ENSDIV_CACHE": str(cache), "ENSDIV_BUILD": str(build)}
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "ensdiv.book.cli", "run", "--scale", "cpu", "--jobs", str(jobs),
                               *pages], env=env, cwd=ROOT, capture_output=True, text=True)
        row[f"jobs{jobs}_s"] = round(time.perf_counter() - t0, 1)
        row[f"jobs{jobs}_ok"] = proc.returncode == 0
    row["speedup"] = round(row["jobs1_s"] / row["jobs2_s"], 3)
    out = ROOT / "benchmarks" / "results" / "book.json"
    payload = json.loads(out.read_text()) if out.exists() else {}
    payload.setdefault("scales", {}).setdefault("cpu", {})["jobs_ab"] = row
    out.write_text(json.dumps(payload, indent=2))
    print(f"--jobs 1 {row['jobs1_s']} s, --jobs 2 {row['jobs2_s']} s: {row['speedup']}x")


if __name__ == "__main__":
    main()
