"""The book on a GPU machine: pages at cpu scale against their two-core cold times, paper dry runs on CUDA, and
the zoo's training step at the GPU's speed. Writes ``benchmarks/results/gpu_pages.json``.

Run where a GPU is lent (never a dependency of the build or the tests). Each page runs in its own process with
the page's code cells executed in order, its parameters cell followed by ``scale = ...`` as papermill would
inject it (no Jupyter kernel is needed; ``display`` prints nothing), its claim records collected from the run's
staging folder. Pages run in the book's order, largest cold cost first within the time budget
(``--budget`` seconds: no page starts after it, and a running page is stopped at ``--hard``), from an empty
cache, so a page that needs another page's models trains them and its time includes that, as a cold build's
would. The two-core times are the cold build's per-page seconds in ``benchmarks/results/book.json``.

Usage on the GPU machine (from the repository root)::

    ENSDIV_DATA=/path/to/fashion-mnist python benchmarks/bench_gpu_pages.py --budget 400 --hard 500 --out out.json

``--jobs N`` runs N pages at once, each with cores // N threads (as ``ensdiv book --jobs``), sharing the GPU;
``--pages ... --skip-fixed`` runs only the pages named, in that order.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: one page per paper data path that no unit test runs through a page (tests/test_dry_run.py: DRY_IN_MAKE_TEST)
DRY_PAGES = ("notebooks/design-diversity/tab01_architecture_resiliency.ipynb",
             "notebooks/training-methods/fig01_error_inconsistency.ipynb",
             "notebooks/foundations/deep_ensemble_basics.ipynb")
#: the pages whose claims are about GPU parallelism (timed on the device that runs them)
GPU_CLAIM_PAGES = ("notebooks/packed-ensembles/fig03_equivalent_forms.ipynb",
                   "notebooks/packed-ensembles/appH_training_speed.ipynb")


def _one(notebook: str, scale: str, staging: str) -> None:
    """Execute one notebook's code cells in this process (the child side)."""
    import matplotlib

    matplotlib.use("Agg")
    os.environ["ENSDIV_NOTEBOOK"] = notebook
    os.environ["ENSDIV_CLAIMS_STAGING"] = staging
    os.chdir(ROOT / Path(notebook).parent)  # papermill runs a page from its own folder
    nb = json.loads((ROOT / notebook).read_text(encoding="utf-8"))
    ns: dict = {"__name__": "__main__", "display": lambda *a, **k: None}
    for i, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
        exec(compile("".join(cell["source"]), f"{notebook}[{i}]", "exec"), ns)  # noqa: S102
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            ns["scale"] = scale


def _run(notebook: str, scale: str, *, timeout: float, dry: bool, threads: int | None = None) -> dict:
    staging = tempfile.mkdtemp(prefix="claims-")
    cmd = [sys.executable, __file__, "--one", notebook, "--scale", scale, "--staging", staging]
    if dry:
        cmd.append("--dry")
    env = dict(os.environ)
    if threads:  # as ``ensdiv book --jobs``: each page's process gets cores // jobs threads
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    t0 = time.perf_counter()
    started = time.strftime("%H:%M:%S")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=max(timeout, 1), env=env)
        status = "ok" if proc.returncode == 0 else "failed"
        error = proc.stderr.strip().splitlines()[-1] if proc.returncode and proc.stderr.strip() else ""
    except subprocess.TimeoutExpired:
        status, error = "stopped at the time limit", ""
    seconds = round(time.perf_counter() - t0, 1)
    verdicts = []
    for f in sorted(Path(staging).glob("*.json")):
        rec = json.loads(f.read_text())
        verdicts.append({"item": rec["item"], "claim_id": rec.get("claim_id"), "verdict": rec["verdict"],
                         **{k: (rec.get("strength") or {}).get(k)
                            for k in ("counted", "passed", "failed", "inconclusive", "excluded")}})
    return {"notebook": notebook, "scale": "paper (dry run)" if dry else scale, "status": status, "seconds": seconds,
            "started": started, "threads": threads, "error": error[-300:], "verdicts": verdicts}


def _zoo_step(device: str) -> dict:
    """The zoo's base ResNet: raw training-step images/s at batch 64 and 512 (float32, channels-last and not)."""
    import torch
    import torch.nn.functional as F
    from torch.utils.flop_counter import FlopCounterMode

    from ensdiv.models import create_model

    out = {}
    for batch in (64, 512):
        for cl in (False, True):
            torch.manual_seed(0)
            model = create_model("resnet").to(device)  # the zoo's base architecture at cpu scale
            fmt = torch.channels_last if cl else torch.contiguous_format
            model = model.to(memory_format=fmt)
            opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
            x = torch.randn(batch, 1, 28, 28, device=device).to(memory_format=fmt)
            y = torch.randint(0, 10, (batch,), device=device)

            def step(model=model, opt=opt, x=x, y=y) -> None:
                opt.zero_grad(set_to_none=True)
                F.cross_entropy(model(x), y).backward()
                opt.step()

            for _ in range(5):
                step()
            if device == "cuda":
                torch.cuda.synchronize()
            with FlopCounterMode(display=False) as fc:
                step()
            n = 50
            t0 = time.perf_counter()
            for _ in range(n):
                step()
            if device == "cuda":
                torch.cuda.synchronize()
            dt = (time.perf_counter() - t0) / n
            out[f"batch{batch}{'_channels_last' if cl else ''}"] = {
                "images_per_s": round(batch / dt, 1), "gflop_per_s": round(fc.get_total_flops() / dt / 1e9, 1),
                "mflop_per_image": round(fc.get_total_flops() / batch / 1e6, 2)}
    return {"arch": "resnet", **out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--staging", help=argparse.SUPPRESS)
    parser.add_argument("--dry", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scale", default="cpu", choices=["smoke", "cpu", "paper"])
    parser.add_argument("--budget", type=float, default=400.0, help="no page starts after this many seconds")
    parser.add_argument("--hard", type=float, default=500.0, help="a running page is stopped at this many seconds")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "gpu_pages.json"))
    parser.add_argument("--pages", nargs="*", help="pages to run (default: the book's, largest cold cost first)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="pages run at once (each with cores // jobs threads), as ensdiv book --jobs")
    parser.add_argument("--skip-fixed", action="store_true",
                        help="leave out the zoo step, the GPU-claim pages and the dry runs (only --pages)")
    args = parser.parse_args()
    if args.one:
        if args.dry:
            from ensdiv.book.dry import dry_environment

            with dry_environment(Path(tempfile.mkdtemp(prefix="dry-"))):
                _one(args.one, "paper", args.staging)
        else:
            _one(args.one, args.scale, args.staging)
        return
    import torch

    t0 = time.perf_counter()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    record: dict = {"benchmark": "gpu_pages", "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
                    "torch": torch.__version__, "cpu_count": os.cpu_count(),
                    "when": time.strftime("%Y-%m-%d %H:%M:%S")}
    cold = {r["notebook"]: r["seconds"] for r in json.loads((ROOT / "benchmarks" / "results" / "book.json")
                                                            .read_text())["scales"]["cpu"]["cold"]["notebooks"]}
    pages = []
    fixed = () if args.skip_fixed else GPU_CLAIM_PAGES
    if not args.skip_fixed:
        record["zoo_step"] = _zoo_step(device)
    for nb in fixed:
        pages.append({**_run(nb, args.scale, timeout=args.hard - (time.perf_counter() - t0), dry=False),
                      "two_core_s": cold.get(nb)})
        _save(args.out, record, pages)
    for nb in () if args.skip_fixed else DRY_PAGES:
        pages.append({**_run(nb, "paper", timeout=args.hard - (time.perf_counter() - t0), dry=True),
                      "two_core_s": None})
        _save(args.out, record, pages)
    order = args.pages or [nb for nb, _ in sorted(cold.items(), key=lambda kv: -(kv[1] or 0))
                           if nb not in GPU_CLAIM_PAGES]
    record["jobs"] = args.jobs
    threads = max(1, (os.cpu_count() or 1) // args.jobs) if args.jobs > 1 else None

    def page(nb: str) -> None:
        if time.perf_counter() - t0 > args.budget:
            return
        row = {**_run(nb, args.scale, timeout=args.hard - (time.perf_counter() - t0), dry=False, threads=threads),
               "two_core_s": cold.get(nb)}
        with lock:
            pages.append(row)
            _save(args.out, record, pages)

    lock = threading.Lock()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:  # pages start in order as workers free up
        list(pool.map(page, order))
    print(json.dumps(pages, indent=1))


def _save(out: str, record: dict, pages: list) -> None:
    for p in pages:
        p["speedup"] = round(p["two_core_s"] / p["seconds"], 2) if p.get("two_core_s") and p["status"] == "ok" \
            else None
    Path(out).write_text(json.dumps({**record, "pages": pages}, indent=1) + "\n")


if __name__ == "__main__":
    main()
