"""Work that fans out over models, split across the processes of a ``torchrun`` job (issue #33 item 6).

Training already runs data-parallel under ``torchrun``: every rank trains the same model on its share of the
batches. Work that is a loop over *models* (the SAT attack of each source model and its transfer row, every
model's evaluation, each member's attributions) is split the other way: rank ``r`` of ``W`` computes items
``r, r + W, r + 2W, ...`` of the loop, each into the cache, the ranks wait for each other, and then every rank
reads the whole loop from the cache. The cache is the meeting point, as it is for the zoo's training workers
(:mod:`ensdiv.workers`): it must be a folder every rank sees (one machine, or a shared disk), and its atomic
writes make concurrent ranks safe.

Only work that trains nothing may be split so: under ``torchrun`` a training is a collective of every rank
(Fabric's DDP), so a rank training a model alone would wait for the others forever. Callers train first, on
every rank in the same order, and split what follows.

Without ``torchrun`` (``WORLD_SIZE`` unset or 1) nothing changes: the loop runs once, in order.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import torch.distributed as dist

from ensdiv.progress import bar

__all__ = ["rank_and_world", "share", "wait_for_all_ranks", "fan_out"]

def rank_and_world() -> tuple[int, int]:
    """``(rank, world size)`` of this process: the initialised process group's, else what ``torchrun`` set in
    the environment (``RANK``, ``WORLD_SIZE``), else ``(0, 1)``."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def share(items: Sequence[Any], rank: int | None = None, world: int | None = None) -> list[Any]:
    """This rank's items of ``items``: positions ``rank, rank + world, ...`` (every item once over the ranks;
    the round robin spreads a loop whose costs grow along it evenly).

    >>> share(list("abcde"), 0, 2), share(list("abcde"), 1, 2)
    (['a', 'c', 'e'], ['b', 'd'])
    """
    if rank is None or world is None:
        rank, world = rank_and_world()
    return list(items)[rank::world]


def wait_for_all_ranks() -> None:
    """Block until every rank of the job has arrived (a barrier). Joins the job's process group first when no
    library has (``gloo``, from ``torchrun``'s environment: the barrier carries no tensors). One process alone
    returns at once."""
    _, world = rank_and_world()
    if world < 2:
        return
    if not dist.is_initialized():
        dist.init_process_group("gloo")
    dist.barrier()


def fan_out(items: Sequence[Any], compute: Callable[[Any], Any], *, desc: str = "") -> list[Any]:
    """``[compute(item) for item in items]``, the work split across the job's ranks.

    ``compute`` must answer from the cache once an item has been computed (a :func:`ensdiv.store.cached` call
    whose key names the item), and must train nothing (module docstring). Each rank computes its
    :func:`share`, waits for the others (:func:`wait_for_all_ranks`), then calls ``compute`` on every item, which
    the cache answers; every rank returns the same list. With one process: the plain loop. ``desc`` labels a
    progress bar over the items this rank computes (the book's progress mode, ``ensdiv.progress``).
    """
    items = list(items)
    _, world = rank_and_world()
    if world < 2:
        return [compute(item) for item in bar(items, desc=desc, leave=False, disable=len(items) < 2)]
    mine = share(items)
    for item in bar(mine, desc=desc, leave=False, disable=len(mine) < 2):
        compute(item)
    wait_for_all_ranks()
    return [compute(item) for item in items]
