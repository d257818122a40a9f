"""Timing and the sources of diversity: throughput in rounds, speed ratios, deterministic kernels."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn

import ensdiv as ed
from ensdiv.chapters.packed_ensembles.methods import method_logits, recipes_for
from ensdiv.errors import InvalidInputError, unknown_name
from ensdiv.paths import project_root

TIMING_DTYPES = ("float32", "float16", "bfloat16")


def speed_table(models: dict[str, nn.Module], shape: tuple[int, int, int], *, device: str, batch_size: int,
                repeats: int, dtypes: Sequence[str] = ("float32",), train_batch: int = 0, train_steps: int = 0,
                num_classes: int = 10, threads: int = 1, process_sets: int = 1) -> pd.DataFrame:
    """Inference (and optionally training) throughput of each model on ``device``: one row per (process set,
    round, model, dtype), ``repeats`` rounds in each of ``process_sets`` sets, through
    :func:`ensdiv.models.throughput_rounds`.

    Each model is timed in a fresh process of its own pinned to ``threads`` threads, warmed up until two
    consecutive timings agree, then once per round while the others wait, the order rotating from round to
    round; so the k-th timings of two models are taken side by side and a ratio of two models is paired by
    round (:func:`speed_ratio`). Every model is timed on the same seeded batch, cast to the dtype; training is
    timed in float32 only, over a window of ``train_steps`` SGD steps (``train_steps`` > 0).

    A *process set* is one such group of fresh processes; each set is spawned, warmed up and timed after the
    previous one has ended. Rounds within a set share their processes (their memory layout, their cores, the
    machine's state at the time); independent sets do not, and they differ more than the rounds of one set do.
    Most of that difference was the processes' allocator: until the timing processes fixed it
    (:func:`ensdiv.models.throughput.steady_allocator`), a fresh process ran the same model up to 3x slower or
    faster than the next, and five runs of Fig. 1 gave PE/single from 0.45 to 0.86
    (``benchmarks/results/timing_allocator.json``). Several sets let :func:`speed_ratio` give an interval that
    covers what is left of that run-to-run spread. Neither covers other machines.
    """
    for dt in dtypes:
        if dt not in TIMING_DTYPES:
            raise unknown_name("timing dtype", dt, TIMING_DTYPES)
    if process_sets < 1:
        raise InvalidInputError(f"speed_table needs at least one process set, got {process_sets}.")
    frames = []
    for process_set in range(process_sets):
        for dt in dtypes:
            rows = ed.models.throughput_rounds(
                models, shape, rounds=repeats, batch_size=batch_size, threads=threads, dtype=dt, device=device,
                train_steps=train_steps if dt == "float32" else 0, train_batch=train_batch, num_classes=num_classes)
            frames.append(pd.DataFrame(rows).assign(dtype=dt, device=str(device), threads=threads,
                                                    **{"process set": process_set}))
    return pd.concat(frames, ignore_index=True)


def speed_summary(speeds: pd.DataFrame) -> pd.DataFrame:
    """:func:`speed_table`'s rounds averaged: one row per (model, dtype), the mean images/s over every round of
    every process set, and how many rounds that is."""
    cols = [c for c in ("inference images/s", "training images/s") if c in speeds]
    g = speeds.groupby(["model", "dtype"], sort=False)
    return g[cols].mean().join(g["round"].count().rename("rounds")).reset_index()


def speed_ratio(speeds: pd.DataFrame, a: str, b: str, *, column: str = "inference images/s",
                dtype: str = "float32") -> Any:
    """The throughput of model ``a`` over model ``b`` (``column``, ``dtype``) as an
    :class:`~ensdiv.report.Estimate` (source ``timing repeats``).

    The ratio is taken round by round (the two models timed side by side). With one process set the
    replicates are the per-round ratios, and the interval covers the spread of timings within those processes
    only. With several (:func:`speed_table`'s ``process_sets``), each set gives one value, the mean of its
    per-round ratios, and the Student-t interval over the sets covers the spread between independent sets of
    processes, the larger one.

    Raises:
        EnsdivError: a model that was not timed (its name and the timed ones in one sentence).
    """
    rows = speeds[speeds["dtype"] == dtype]
    sets = rows["process set"] if "process set" in rows else pd.Series(0, index=rows.index)
    table = rows.assign(**{"process set": sets}).pivot(index=["process set", "round"], columns="model", values=column)
    for name in (a, b):
        if name not in table:
            raise unknown_name("timed model", name, list(table.columns))
    ratios = table[a] / table[b]
    if ratios.index.get_level_values("process set").nunique() > 1:
        ratios = ratios.groupby(level="process set").mean()
    return ed.report.from_seeds(ratios.to_numpy(dtype=float), source="timing repeats")


# ---- App. F: sources of diversity ---------------------------------------------------------------------------
@contextlib.contextmanager
def deterministic_kernels(enabled: bool = True) -> Iterator[bool]:
    """Deterministic CUDA kernels inside the block (``torch.use_deterministic_algorithms`` and cuBLAS's
    ``CUBLAS_WORKSPACE_CONFIG=:4096:8``); yields whether anything changed. On a machine without CUDA it
    changes nothing: CPU kernels are deterministic already."""
    if not (enabled and torch.cuda.is_available()):
        yield False
        return
    was, env = torch.are_deterministic_algorithms_enabled(), os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    bench = torch.backends.cudnn.benchmark
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    try:
        yield True
    finally:
        torch.use_deterministic_algorithms(was)
        torch.backends.cudnn.benchmark = bench
        if env is None:
            os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
        else:
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = env


def sources_of_diversity(cfg: dict, test: Any, *, deterministic: bool = False,
                         scratch: Any = None) -> tuple[dict[str, Tensor], bool]:
    """App. F's ensembles: M members of ``cfg``'s single model differing by chosen sources of randomness,
    and the M members of one PE-(α, M, γ) model; member logits ``(M, N, C)`` per condition.

    The models are built for ``cfg``'s training set (channels, size, classes read from it by the engine).
    With ``deterministic`` (and CUDA), the seed conditions are trained with deterministic kernels into
    a cache of their own (``<cache>/deterministic-kernels``), so that they carry no kernel noise and do
    not mix with the models other pages trained; "non-determinism only" is always trained without.

    Args:
        cfg: a resolved App.-F preset. test: the evaluation set.
        deterministic: see above. scratch: a :class:`~ensdiv.Store` factory for the throw-away retrains
            (default: a temporary folder each).

    Returns:
        ``(conditions, retrains_identical)``: whether every retrain equals the reference bit for bit.
    """
    (reference,) = recipes_for("single", cfg, 0)  # init seed 0, order seed 0
    m = cfg["num_estimators"]
    with deterministic_kernels(deterministic) as det:
        store = ed.Store(ed.default_store().root / "deterministic-kernels") if det else None

        def member(init: int, order: int) -> Tensor:
            return ed.predict(reference.replace(init_seed=init, order_seed=order), test, store=store)

        ref = member(0, 0)
        seeds = {"initialisation only": [member(i, 0) for i in range(m)],
                 "batch order only": [member(0, o) for o in range(m)],
                 "initialisation + order": [member(i, i) for i in range(m)]}

    def retrained() -> Tensor:
        if scratch is not None:
            return ed.predict(reference, test, store=scratch())
        with tempfile.TemporaryDirectory() as tmp:
            return ed.predict(reference, test, store=ed.Store(tmp))

    plain_ref = ed.predict(reference, test)  # the reference as the other pages trained it
    retrains = [retrained() for _ in range(m - 1)]
    conditions = {"nothing varies (one model, M times)": torch.stack([ref] * m),
                  "non-determinism only": torch.stack([plain_ref, *retrains]),
                  **{k: torch.stack(v) for k, v in seeds.items()},
                  "Packed-Ensembles members (one model)": method_logits(recipes_for("packed", cfg, 0), test)}
    return conditions, all(torch.equal(r, plain_ref) for r in retrains)


def disagreement_per_image(logits: Tensor) -> np.ndarray:
    """Per test image, the fraction of member pairs that predict different classes, from member logits
    ``(M, N, C)`` (M >= 2); its mean over the images is ``ed.metrics.disagreement`` of the predictions."""
    preds = logits.argmax(-1)
    m = preds.shape[0]
    if m < 2:
        raise InvalidInputError(f"Disagreement needs at least two members, got {m}.")
    pairs = [(preds[i] != preds[j]).double() for i in range(m) for j in range(i + 1, m)]
    return torch.stack(pairs).mean(0).numpy()


# ---- presets ------------------------------------------------------------------------------------------
# Presets of the Packed-Ensembles chapter (slug ``packed-ensembles``).
#
# The training keys (``arch`` ... ``augment``) are identical in every notebook that evaluates the
# Table-1 methods (tab01_*, tab02_*, fig01_*, appE_*, fig06_07_*, appF_*), so they resolve to the same
# recipes and share the cached models: tab01_efficient_ensembles trains, the others read (App. F's
# "initialisation + order" ensemble is run 0's Deep Ensemble, its reference member run 0's single model).
#
# Paper scale: CIFAR-10/100 with a CIFAR-style ResNet-18/50 and SVHN as OOD (Table 1), ImageNet with a
# ResNet-50 (Table 2). The paper's table of hyper-parameters (its Table 4) is not in the text we have
# (the ORASIS version), so every paper-scale recipe is the reference implementation's (torch-uncertainty,
# March 2023, ``optimization_procedures.py``): SGD with momentum 0.9, weight decay on every parameter,
# batch 128, random crop (4 px padding) + horizontal flip, the learning rate ×0.1 at epochs 25 and 50 of
# 75 (CIFAR-10 / ResNet-18). :data:`PAPER_BLOCKS` holds one recipe per (dataset, backbone) block of
# Table 1; :func:`recipe_differences` lists what still differs.

#: Table 1's (training set, backbone) blocks and the reference implementation's recipe of each: the
#: CIFAR-10 / ResNet-18 block uses heavy-ball momentum and ×0.1 at epochs 25/50 of 75, the other three
#: Nesterov momentum and ×0.2 at epochs 60/120/160 (200 epochs, read from the last milestone).


#: The GPU run of the timing pages (benchmarks/bench_gpu_pages.py on a lent H200), relative to the project root.
GPU_RECORD = "benchmarks/results/gpu_pages.json"


def gpu_record(item: str, path: str = GPU_RECORD) -> tuple[dict[str, float], str]:
    """The speed ratios a GPU run of ``item``'s page recorded (``{"<quantity> (GPU)": value}``, point values)
    and one sentence naming the device and date; ``({}, reason)`` when the file or the item is missing."""

    try:
        record = json.loads((project_root() / path).read_text())
    except (OSError, ValueError):
        return {}, f"No GPU record at {path}."
    found = record.get("gpu_claim_measurements", {}).get(item)
    if not found:
        return {}, f"{path} holds no GPU measurement of {item}."
    facts = {f"{q} (GPU)": round(float(v["value"]), 3) for q, v in found.items()}
    return facts, (f"Recorded on a GPU ({record.get('device', '?')}, torch {record.get('torch', '?')}, "
                   f"{record.get('when', '?')}; {path}): a fact of that run, not re-measured here.")


def share_draws(per_image: dict[str, np.ndarray], a: str, b: str, *, share: float, construction: str,
                draws: int = 100, n_resamples: int = 200, seed: int) -> ed.report.Null:
    """Null (or truth) data for "``a`` gives about as much as ``b``" on per-image values (App. F's
    disagreements): each draw resamples the test images, rescales ``a``'s per-image values so that their mean
    is ``share`` times ``b``'s on that resample (``share`` 1: the claim true; below the margin: false), and
    gives both a paired bootstrap over the images. ``a`` with no disagreement at all is replaced by ``b``'s
    values times ``share``."""
    x, y = np.asarray(per_image[a], dtype=float), np.asarray(per_image[b], dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise InvalidInputError(f"share_draws needs two (N,) arrays of one test set, got {x.shape} and {y.shape}.")
    rng = np.random.default_rng(seed)

    def draw(k: int) -> dict[str, Any]:
        idx = ed.report.resample_indices(x.size, n_resamples=1, seed=rng)[0]
        xa, yb = x[idx], y[idx]
        scaled = xa * (share * yb.mean() / xa.mean()) if xa.mean() > 0 else yb * share
        return ed.report.paired_bootstrap({a: scaled, b: yb}, n_resamples=n_resamples, seed=seed + k)

    return ed.report.Null(construction, [draw(k) for k in range(int(draws))])


#: Why a timing claim of the paper (GPU parallelism) is not testable on a CPU.
GPU_PREMISE = "GPU parallelism; this run times CPU processes"


def gpu_premise(device: str) -> str:
    """``untestable=`` for a timing claim about GPU parallelism: empty on a CUDA device, else :data:`GPU_PREMISE`."""
    return "" if str(device).startswith("cuda") else GPU_PREMISE


def same_model_null(speeds: pd.DataFrame, quantity: str, b: str, *, column: str = "inference images/s",
                    dtype: str = "float32") -> ed.report.Null:
    """Null data for "``a`` runs faster than ``b``": ``b``'s own timings in place of ``a``'s (the ratio of
    ``b`` to itself, round by round: no speed-up by construction)."""
    return ed.report.Null(f"{b}'s timings in place of the faster model's ({quantity} = {b} over itself)",
                          [{quantity: speed_ratio(speeds, b, b, column=column, dtype=dtype)}])
