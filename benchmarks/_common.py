"""Shared bits of the benchmarks: where results go and how they are written."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results"


def cpu_of(cpuinfo: str) -> dict:
    """The processor a timing was made on, from the text of Linux's ``/proc/cpuinfo`` (its first processor): the
    name, the vendor's family and model numbers and whether it has AVX-512. Two hosts that both call themselves
    "AMD EPYC" can differ by a generation (family 25, model 1 is a Zen 3 without AVX-512; family 25, model 17 a
    Zen 4 with it; PyTorch picks its CPU kernels by the instruction set). The book's zoo page took 2.16 times as
    long on such a Zen 3 as in the one-run build before it, so a time compares only with times of the same
    processor. Where there is no ``/proc/cpuinfo`` (``cpuinfo`` empty: not Linux) each field is None but the name,
    which is then :func:`platform.processor`'s, or None."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():  # the first processor's block ends at its blank line
            break
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    if not fields:
        return {"name": platform.processor() or None, "family": None, "model": None, "avx512": None}
    number = {k: int(fields[k]) if fields.get(k, "").isdigit() else None for k in ("cpu family", "model")}
    return {
        "name": fields.get("model name") or None,
        "family": number["cpu family"],
        "model": number["model"],
        "avx512": "avx512f" in fields.get("flags", "").split(),
    }


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
