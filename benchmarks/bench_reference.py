"""The reference workload of ``ensdiv.book.reference`` on this machine: what a reference minute is.

Five 5-second runs of the workload (the zoo ResNet's raw training step, batch 64, one thread) on an idle machine,
and ``bench_train.py``'s raw step of the same model over 1,024 Fashion-MNIST images for comparison with
``results/train.json``. On the reference processor the median is ``ensdiv.book.reference.REFERENCE_IMG_S``.
Writes ``results/reference.json``.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write  # noqa: E402

import ensdiv as ed  # noqa: E402
from ensdiv.book.reference import REFERENCE, workload_speed  # noqa: E402


def main() -> None:
    import bench_train

    quick = "--quick" in sys.argv
    runs, seconds = (2, 1.0) if quick else (5, 5.0)
    workload = [round(workload_speed(seconds=seconds), 1) for _ in range(runs)]
    torch.set_num_threads(1)
    data = ed.get_dataset("fmnist/train").subset(1024, seed=0)
    raw = [round(bench_train.raw_step("resnet", data, batch=64), 1) for _ in range(runs)]
    write("reference", {
        "description": "the reference workload of ensdiv.book.reference (raw training step of the zoo's ResNet, "
                       f"batch 64, one thread): {runs} {seconds:g}-second runs, and bench_train.py's raw step of the "
                       "same model over 1,024 Fashion-MNIST images (its first step included) for comparison with "
                       "train.json",
        "quick": quick, "workload_img_s": workload, "median_img_s": statistics.median(workload),
        "reference_img_s": REFERENCE["img_s"], "speed": round(statistics.median(workload) / REFERENCE["img_s"], 3),
        "bench_train_raw_step_resnet_img_s": raw, "bench_train_raw_step_median": statistics.median(raw),
        "train_json_raw_step_resnet_img_s": 1984.3,
        "note": "train.json's 1,984 img/s (23 Nov 2026) predates the processor field of the records."})


if __name__ == "__main__":
    main()
