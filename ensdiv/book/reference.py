"""How fast this machine trains, in one number: the reference workload that turns wall minutes into reference minutes.

The same cold book takes 2.5 hours on one two-core machine and five on another (a Zen 3 without AVX-512 ran the
pages 1.8 to 2.2 times as long as the Zen 4 that set the book's budget). A budget or an estimate tied to one
processor cannot be checked on the others, so ``ensdiv book`` times a fixed workload at its start
(:func:`reference_speed`, a few seconds), writes it with the processor into its timings file, and the build's
record (``benchmarks/bench_book.py --record-run``) states its time both in wall minutes and in *reference minutes*:
wall × this machine's speed ÷ :data:`REFERENCE_IMG_S` (:func:`reference_minutes`), the minutes the reference
processor would have taken if every page scaled as the workload does.

**The workload**: the raw training step of the zoo's base ResNet (``resnet``, Fashion-MNIST-sized 1×28×28 inputs,
batch 64, cross-entropy, SGD with momentum), one thread: the bulk of a cold book is training such models on one
thread per page. **The reference** (:data:`REFERENCE`): the two-core Intel Xeon (family 6, model 207, AVX-512)
that runs this project's CI and its measured builds since 5 Dec 2026. The Zen 4 that set the 150-minute budget
did not record the workload; the one chapter measured on both with the same code per seed (SED's pages, 17.4 min
at five seeds there, 20.1 at six here) puts the two within a few percent, while the two pages whose work the code
did not change between the Zen 4's cold book and the cold book of 6d59812 on a Xeon model 167 (the zoo, and
Packed-Ensembles Table 1 per seed: 1.18-1.19 times as long on the Xeon, where the workload predicts 1.52) put
the Zen 4 at about 0.78 of the reference. Across processor families a reference minute is good to about ±30 %,
on one processor model to about ±10 to 25 % on this shared VM (``book/benchmarks.md``).
"""

from __future__ import annotations

import platform
import time
from pathlib import Path
from typing import Any

from ensdiv.environment import versions
from ensdiv.models import create_model

__all__ = ["REFERENCE", "REFERENCE_IMG_S", "reference_speed", "reference_minutes", "workload_speed", "cpu_of",
           "processor"]

#: The workload's speed on the reference processor (images per second, one thread) and where it was measured: the
#: median of five 5-second runs on an idle machine (2,232 to 2,713 img/s). ``benchmarks/bench_reference.py``
#: measures it again: 2,508 (idle) and 2,180 (a minute after a test run) later the same evening, so one measurement
#: on this shared machine is good to about ±15 %, and a reference minute to the same.
REFERENCE: dict[str, Any] = {
    "img_s": 2578.0,
    "cpu": "Intel Xeon, family 6 model 207 (AVX-512), two cores",
    "when": "2026-12-05",
    "workload": "raw training step of the zoo's ResNet ('resnet', 1x28x28 inputs, batch 64, SGD momentum 0.9, "
                "cross-entropy), one thread",
}
REFERENCE_IMG_S: float = REFERENCE["img_s"]


def workload_speed(*, threads: int = 1, seconds: float = 3.0, batch: int = 64, warmup: int = 3) -> float:
    """Images per second of the reference workload on this machine: ``warmup`` steps, then steps until
    ``seconds`` have passed (at least five), with ``threads`` torch threads (restored afterwards)."""
    import torch
    import torch.nn.functional as F

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        gen = torch.Generator().manual_seed(0)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = create_model("resnet").train()
        x = torch.rand(batch, 1, 28, 28, generator=gen)
        y = torch.randint(0, 10, (batch,), generator=gen)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

        def step() -> None:
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x), y).backward()
            opt.step()

        for _ in range(warmup):
            step()
        steps, t0 = 0, time.perf_counter()
        while steps < 5 or time.perf_counter() - t0 < seconds:
            step()
            steps += 1
        return steps * batch / (time.perf_counter() - t0)
    finally:
        torch.set_num_threads(before)


def reference_speed(*, seconds: float = 3.0) -> dict[str, Any]:
    """This machine's speed on the reference workload, one thread, with its processor and the ratio to the
    reference (``speed``: above 1 is faster than the reference)."""
    img_s = workload_speed(seconds=seconds)
    return {"img_s": round(img_s, 1), "speed": round(img_s / REFERENCE_IMG_S, 3),
            "cpu": processor(), "torch": versions().get("torch"), "when": time.strftime("%Y-%m-%d %H:%M:%S")}


def reference_minutes(wall_s: float, img_s: float | None) -> float | None:
    """Reference minutes of a build that took ``wall_s`` seconds on a machine of speed ``img_s`` on the workload
    (None when either is unknown).

    >>> reference_minutes(600.0, REFERENCE_IMG_S / 2)  # half as fast as the reference: 10 wall minutes are 5
    5.0
    """
    if wall_s is None or not img_s:
        return None
    return wall_s / 60 * img_s / REFERENCE_IMG_S


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


def processor() -> dict[str, Any]:
    """This machine's first processor (:func:`cpu_of` of ``/proc/cpuinfo``)."""
    info = Path("/proc/cpuinfo")
    return cpu_of(info.read_text() if info.exists() else "")
