"""Time to build the whole book, cold cache and warm cache, at smoke (and optionally cpu) scale.

Cold: an empty cache and build folder (every model trained, every notebook executed). Warm: the same
command again (nothing changed, so every notebook is reused). Run: ``python benchmarks/bench_book.py
[--quick] [--scales smoke cpu]``; writes ``benchmarks/results/book.json``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def build(scale: str, cache: Path, build_dir: Path) -> tuple[float, int]:
    env = {**os.environ, "ENSDIV_CACHE": str(cache), "ENSDIV_BUILD": str(build_dir)}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ensdiv.chapters.cli", "book", "--scale", scale], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    return time.perf_counter() - t0, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", nargs="*", default=["smoke"])
    parser.add_argument("--quick", action="store_true", help="smoke scale only")
    args = parser.parse_args()
    scales = ["smoke"] if args.quick else args.scales
    rows = {}
    for scale in scales:
        with tempfile.TemporaryDirectory() as tmp:
            cache, build_dir = Path(tmp) / "cache", Path(tmp) / "_build"
            cold, rc_cold = build(scale, cache, build_dir)
            warm, rc_warm = build(scale, cache, build_dir)
        rows[scale] = {"cold_s": round(cold, 1), "warm_s": round(warm, 1), "speedup": round(cold / warm, 1),
                       "exit_codes": [rc_cold, rc_warm]}
        print(f"{scale}: cold {cold:.1f} s, warm {warm:.1f} s", flush=True)
    write("book", {"description": "whole-book build time (ensdiv book), cold vs warm cache", "scales": rows})


if __name__ == "__main__":
    main()
