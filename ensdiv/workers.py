"""Train many recipes at once: one process per worker, one thread each, the cache as the meeting point.

Small models use two CPU cores poorly from one process (two threads on a 16-channel convolution
mostly wait on each other); two processes with one thread each keep both cores busy. Each worker
trains a recipe (:func:`ensdiv.train_recipe`) and caches its predictions on an evaluation set
(:func:`ensdiv.predict`); the store's atomic writes make concurrent workers safe, and whatever a
worker finished survives an interruption.

Dependencies are respected: a distilled recipe waits for its teacher, heads wait for their backbone,
and recipes that share one pre-trained backbone are trained one after the other, so no model is
trained twice. ``benchmarks/bench_train.py`` measures workers against threads on this machine.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

import torch

from ensdiv.errors import InvalidInputError
from ensdiv.predict import predict
from ensdiv.store import Store, config_key, default_store
from ensdiv.train import Distill, Heads, Pretrain, Recipe, train_recipe
from ensdiv.train.build import model_cache_config

__all__ = ["build_many"]


def _init_worker(threads: int) -> None:
    import signal
    import threading

    from tqdm import tqdm

    torch.set_num_threads(threads)
    # a bar in a worker would create tqdm's default lock, a named semaphore that a worker ended mid-recipe (see
    # _stop) never releases, so the resource tracker reports it leaked once the build exits; a worker's bars
    # share no process, and a thread lock serves them
    tqdm.set_lock(threading.RLock())
    # Ctrl-C reaches every process of the terminal's group: the parent alone answers it, by ending the workers
    # (see _stop), so no worker prints a traceback of its own
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stop(pool: ProcessPoolExecutor) -> None:
    """End the workers now, mid-recipe: an interrupted recipe resumes from its checkpoint and the store's
    writes are atomic, so nothing is lost but the running step; waiting for the running recipes to finish
    (``shutdown(wait=True)``, what leaving the ``with`` block does) could take minutes at cpu scale.

    The pool's manager thread, seeing its workers gone, closes its wake-up pipe; Python's exit hook writes to that
    pipe unless it is marked closed, and a close between its check and its write printed a traceback at exit
    (``OSError: Bad file descriptor``, CPython 3.11). The thread is joined here, so it has finished before exit."""
    manager = getattr(pool, "_executor_manager_thread", None)
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        if process.is_alive():
            process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    if manager is not None:
        manager.join(timeout=10)


def _build_one(recipe: Recipe, dataset: str, store_root: str) -> float:
    t0 = time.perf_counter()
    store = Store(store_root)
    train_recipe(recipe, store=store, progress=False)
    predict(recipe, dataset, store=store)
    return time.perf_counter() - t0


def _key(recipe: Recipe) -> str:
    return config_key(model_cache_config(recipe))


def _after(recipe: Recipe) -> list[Recipe]:
    """Recipes that must be trained before ``recipe`` (its teacher or backbone)."""
    method = recipe.method
    if isinstance(method, Distill):
        return [recipe.teacher]
    if isinstance(method, Heads):
        return [recipe.backbone]
    return []


def _shared_backbone(recipe: Recipe) -> tuple | None:
    """What identifies the pre-trained backbone of a :class:`~ensdiv.train.Pretrain` recipe."""
    method = recipe.method
    if not isinstance(method, Pretrain):
        return None
    seed = method.seed if method.seed >= 0 else recipe.seeds.init
    return (repr(recipe.model.to_dict()), repr(recipe.data.to_dict()), recipe.seeds.subset, method.objective,
            method.dataset, method.epochs, method.lr or recipe.optim.lr, seed)


def build_many(
    recipes: Sequence[Recipe],
    dataset: str,
    *,
    workers: int = 2,
    threads: int = 1,
    store: Store | None = None,
    on_done: Callable[[Recipe, float], None] | None = None,
) -> dict[str, float]:
    """Train every recipe and cache its logits on ``dataset``, ``workers`` processes at a time.

    Args:
        recipes: what to build (already cached ones return at once).
        dataset: a registered evaluation set name.
        workers: processes (1 = in this process, no pool).
        threads: torch threads per worker process.
        store: the cache (default store).
        on_done: called as ``on_done(recipe, seconds)`` in this process after each recipe finishes.

    Returns:
        Seconds each recipe took, by its label.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InvalidInputError(f"workers must be an integer >= 1, got {workers!r}.")
    store = store or default_store()
    todo = list(dict.fromkeys(recipes))
    pending_keys = {_key(r) for r in todo}
    times: dict[str, float] = {}
    if workers == 1:
        for r in todo:
            seconds = _build_one(r, dataset, str(store.root))
            times[r.label] = seconds
            if on_done:
                on_done(r, seconds)
        return times
    ctx = mp.get_context("spawn")
    running: dict[Future, Recipe] = {}
    busy_backbones: set[tuple] = set()
    pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker, initargs=(threads,))
    try:
        while todo or running:
            started = False
            for r in list(todo):
                if len(running) >= workers:
                    break
                if any(_key(d) in pending_keys for d in _after(r)):
                    continue  # its teacher or backbone is still to come
                shared = _shared_backbone(r)
                if shared is not None and shared in busy_backbones:
                    continue  # a sibling is pre-training the backbone this recipe will reuse
                if shared is not None:
                    busy_backbones.add(shared)
                todo.remove(r)
                running[pool.submit(_build_one, r, dataset, str(store.root))] = r
                started = True
            if not running:
                if todo and not started:  # a dependency outside the list: train it first, here
                    r = todo.pop(0)
                    for d in _after(r):
                        train_recipe(d, store=store, progress=False)
                    todo.insert(0, r)
                    pending_keys -= {_key(d) for d in _after(r)}
                continue
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                r = running.pop(fut)
                seconds = fut.result()
                times[r.label] = seconds
                pending_keys.discard(_key(r))
                shared = _shared_backbone(r)
                if shared is not None:
                    busy_backbones.discard(shared)
                if on_done:
                    on_done(r, seconds)
    except BaseException:  # an interrupt (or a failed recipe): no worker goes on training
        _stop(pool)
        raise
    pool.shutdown()
    return times


def _describe(times: dict[str, float]) -> dict[str, Any]:  # pragma: no cover - convenience for benchmarks
    return {"models": len(times), "seconds": sum(times.values())}
