"""Training speed with one vs two torch threads, on an idle machine and with another process busy.

The zoo page trains two models at once, one thread each (``workers=2`` in the foundations preset),
instead of one model with two threads. On an idle 2-core machine the two measure about the same; this
benchmark shows what happens when something else runs on the second core: one training step (batch 64,
28x28, SGD) of an architecture is timed with 1 and 2 threads, alone and beside a pure-Python busy loop.
Run: ``python benchmarks/bench_contention.py [--archs squeezenet resnet] [--seconds 4]``; writes
``benchmarks/results/contention.json``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write  # noqa: E402

from ensdiv.models.registry import create_model  # noqa: E402


def _busy(stop) -> None:
    while not stop.is_set():
        pass


def images_per_second(arch: str, threads: int, seconds: float) -> float:
    torch.set_num_threads(threads)
    model = create_model(arch, num_classes=10, in_chans=1, img_size=28).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(3):
        step()
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        step()
        n += 1
    return n * 64 / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", nargs="*", default=["squeezenet", "resnet"])
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    rows = []
    for arch in args.archs:
        for busy in (False, True):
            stop = mp.Event()
            proc = mp.Process(target=_busy, args=(stop,)) if busy else None
            if proc:
                proc.start()
            try:
                for threads in (1, 2):
                    ips = images_per_second(arch, threads, args.seconds)
                    rows.append({"arch": arch, "other_process_busy": busy, "threads": threads,
                                 "img_s": round(ips), "load_avg_1min": round(os.getloadavg()[0], 2)})
                    print(rows[-1], flush=True)
            finally:
                if proc:
                    stop.set()
                    proc.join()
    write("contention", {"description": "one training step, 1 vs 2 torch threads, alone and beside a busy process",
                         "rows": rows})


if __name__ == "__main__":
    main()
