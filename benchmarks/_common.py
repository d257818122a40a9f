"""Shared bits of the benchmarks: where results go and how they are written."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

import torch

from ensdiv.book.reference import cpu_of

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    """What the numbers were measured on."""
    cpuinfo = Path("/proc/cpuinfo")
    return {
        "cpu": cpu_of(cpuinfo.read_text() if cpuinfo.exists() else ""),
        "cpu_count": torch.get_num_threads(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda": torch.cuda.is_available(),
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def write(name: str, payload: dict) -> Path:
    """Write ``benchmarks/results/<name>.json`` (with the machine description) and print it."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {"benchmark": name, "machine": machine(), **payload}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2))
    print(json.dumps(payload, indent=2))
    return path
