"""The cost of recording which package code runs (``ensdiv.tracing``): for a page, and for a cache entry.

One global ``sys.settrace`` function sees each new Python frame. Under a page's log (``ensdiv run``/``ensdiv
book``) it looks each code object up once per process; while a cache entry is being computed (a store miss
opens a recorder) it also adds the code object to the recorder's set on every call. The overhead is one Python
call per Python function call. This benchmark times the same work in fresh processes, untraced, under a page
log, and inside an entry's recorder, side by side, alternating, on the machine as it is (run it idle): the
training engine's ``fit`` of a small CNN on Fashion-MNIST-sized tensors (Python-heavy per step: the loop,
Lightning Fabric, the modules' ``__call__``), and a paired bootstrap of the report (pure numpy/scipy). Run:
``python benchmarks/bench_tracing.py [--quick]``; writes ``benchmarks/results/tracing.json`` with each workload's
median seconds and the traced/untraced and recorded/untraced ratios.
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


MODES = ("untraced", "page", "entry")


def _time(code: str, mode: str) -> tuple[float, float]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("ENSDIV_TRACE_LOG", None)
    with tempfile.TemporaryDirectory() as tmp:
        if mode == "page":
            env["ENSDIV_TRACE_LOG"] = str(Path(tmp) / "trace.log")
        if mode == "entry":  # what a store miss does: the work runs inside an entry's recorder
            code = f"tr.begin('bench')\n{code}\ntr.end('bench')\n"
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
        times: dict[str, list] = {m: [] for m in MODES}
        for _ in range(repeats):  # alternate, so drift hits every mode alike
            for mode in MODES:
                times[mode].append(_time(code, mode))
        imp = {m: statistics.median(t[0] for t in times[m]) for m in MODES}
        work = {m: statistics.median(t[1] for t in times[m]) for m in MODES}
        rows[name] = {"untraced_s": round(work["untraced"], 3), "traced_s": round(work["page"], 3),
                      "recorded_s": round(work["entry"], 3),
                      "ratio": round(work["page"] / work["untraced"], 3),
                      "recorded_ratio": round(work["entry"] / work["untraced"], 3),
                      "import_untraced_s": round(imp["untraced"], 3), "import_traced_s": round(imp["page"], 3),
                      "repeats": repeats, "n": n}
        print(f"{name:<18} work untraced {work['untraced']:7.2f} s  page log {work['page']:7.2f} s  "
              f"entry recorder {work['entry']:7.2f} s; import {imp['untraced']:.2f} s vs {imp['page']:.2f} s",
              flush=True)
    write("tracing", {"workloads": rows, "load_average": os.getloadavg(), "time": time.strftime("%F %T")})


if __name__ == "__main__":
    main()
