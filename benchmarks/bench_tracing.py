"""The cost of recording which package code a page runs (``ensdiv.tracing``, #34).

``ensdiv run``/``ensdiv book`` trace every page's kernel: a global ``sys.settrace`` function sees each new
Python frame and returns at once for code objects it has seen. The overhead is one Python call per Python
function call of the page. This benchmark times the same work in fresh processes, traced and untraced, side by
side, alternating, on the machine as it is (run it idle): the training engine's ``fit`` of a small CNN on
Fashion-MNIST-sized tensors (Python-heavy per step: the loop, Lightning Fabric, the modules' ``__call__``),
and a paired bootstrap of the report (pure numpy/scipy). Run: ``python benchmarks/bench_tracing.py [--quick]``;
writes ``benchmarks/results/tracing.json`` with each workload's median seconds and the traced/untraced ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write  # noqa: E402

WORK = {
    "fit_small_cnn": (
        "import torch, ensdiv as ed\n"
        "from ensdiv.models.registry import create_model\n"
        "from ensdiv.data import TensorSet\n"
        "torch.manual_seed(0); torch.set_num_threads(1)\n"
        "data = TensorSet(torch.rand(N, 1, 28, 28), torch.randint(0, 10, (N,)), name='bench')\n"
        "model = create_model('small_cnn', num_classes=10, in_chans=1, img_size=28)\n"
        "ed.train.fit(model, data, ed.Optim(epochs=1, batch_size=64, lr=0.05), seed=0, progress=False)\n"
    ),
    "paired_bootstrap": (
        "import numpy as np, ensdiv as ed\n"
        "a = (np.random.default_rng(0).random(N) < 0.9).astype(float)\n"
        "ed.report.paired_bootstrap({'a': a, 'b': a[::-1].copy()}, seed=0, n_resamples=1000)\n"
    ),
}


def _time(code: str, traced: bool) -> tuple[float, float]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("ENSDIV_TRACE_LOG", None)
    with tempfile.TemporaryDirectory() as tmp:
        if traced:
            env["ENSDIV_TRACE_LOG"] = str(Path(tmp) / "trace.log")
        # the import of ensdiv (torch, timm, scipy: every Python frame of their imports is seen once) is timed
        # apart from the work, which is what a page repeats
        # (both import the same third-party packages first, as the traced import does: ensdiv.tracing.PRELOAD)
        wrapped = (f"import time, importlib\nt0 = time.perf_counter()\nimport ensdiv, ensdiv.tracing as tr\n"
                   f"[importlib.import_module(m) for m in tr.PRELOAD]\nt1 = time.perf_counter()\n{code}\n"
                   "print(t1 - t0, time.perf_counter() - t1)\n")
        out = subprocess.run([sys.executable, "-c", wrapped], env=env, capture_output=True, text=True, check=True)
    first, second = out.stdout.strip().splitlines()[-1].split()
    return float(first), float(second)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    n = 2048 if args.quick else 8192
    repeats = 2 if args.quick else args.repeats
    rows = {}
    for name, code in WORK.items():
        code = f"N = {n}\n{code}"
        times = {False: [], True: []}
        for _ in range(repeats):  # alternate, so drift hits both alike
            for traced in (False, True):
                times[traced].append(_time(code, traced))
        imp = [statistics.median(t[0] for t in times[k]) for k in (False, True)]
        plain, traced = (statistics.median(t[1] for t in times[k]) for k in (False, True))
        rows[name] = {"untraced_s": round(plain, 3), "traced_s": round(traced, 3), "ratio": round(traced / plain, 3),
                      "import_untraced_s": round(imp[0], 3), "import_traced_s": round(imp[1], 3),
                      "repeats": repeats, "n": n}
        print(f"{name:<18} work untraced {plain:7.2f} s  traced {traced:7.2f} s  ratio {traced / plain:.3f}; "
              f"import {imp[0]:.2f} s vs {imp[1]:.2f} s", flush=True)
    write("tracing", {"workloads": rows, "load_average": os.getloadavg(), "time": time.strftime("%F %T")})


if __name__ == "__main__":
    main()
