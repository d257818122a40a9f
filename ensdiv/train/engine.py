"""Engine utilities of :mod:`ensdiv.train`: Lightning Fabric set-up, optimisers, schedules and seeding."""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn as nn

from ensdiv.seeding import seed_base
from ensdiv.train.recipes import Optim

__all__ = ["derive_seed", "moved", "seed_everything", "make_fabric", "make_optimizer", "lr_factor", "LossFn"]

LossFn = Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]
_FABRICS: dict[tuple, Any] = {}


def derive_seed(*parts: int) -> int:
    """A 31-bit seed mixed from integers (stable across runs and platforms); under a seed base ``K`` above 0
    (:mod:`ensdiv.seeding`) ``K`` is mixed in first, so every derived seed moves."""
    h = 0x9E3779B1
    base = seed_base()
    for p in (_BASE_TAG, base, *parts) if base else parts:
        h = (h * 1_000_003 ^ (int(p) & 0xFFFFFFFF)) & 0xFFFFFFFFFFFF
    return h % (2**31 - 1)


#: mixed in before the seed base, so that a based seed is never the unbased seed of other parts
_BASE_TAG = 0x5EEDBA5E


def moved(seed: int) -> int:
    """``seed`` itself under seed base 0, else a seed derived from it and the base (:func:`derive_seed`): for the
    few seeds the training uses directly (a fresh head's or a probe's draw).

    >>> moved(7)
    7
    """
    return int(seed) if not seed_base() else derive_seed(seed)


def seed_everything(seed: int) -> None:
    """Seed Python's, numpy's and torch's global generators (dropout, timm mixup/erasing)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def make_fabric(accelerator: str = "auto", precision: str | None = None) -> Any:
    """A launched ``lightning.fabric.Fabric`` (reused per process): DDP when started by torchrun.

    Args:
        accelerator: ``"auto"`` (GPU when available), ``"cpu"`` or ``"cuda"``.
        precision: Fabric precision; default ``"bf16-mixed"`` on GPU, ``"32-true"`` on CPU.
    """
    from lightning.fabric import Fabric

    if accelerator == "auto":
        accelerator = "cuda" if torch.cuda.is_available() else "cpu"
    if precision is None:
        precision = "bf16-mixed" if accelerator == "cuda" else "32-true"
    world = int(os.environ.get("WORLD_SIZE", "1"))
    key = (accelerator, precision, world)
    if key not in _FABRICS:
        if world > 1:
            devices = int(os.environ.get("LOCAL_WORLD_SIZE", world))
            nodes = max(world // devices, 1)
            fabric = Fabric(
                accelerator=accelerator, devices=devices, num_nodes=nodes, strategy="ddp", precision=precision
            )
        else:
            fabric = Fabric(accelerator=accelerator, devices=1, precision=precision)
        fabric.launch()
        _FABRICS[key] = fabric
    return _FABRICS[key]


def make_optimizer(model: nn.Module, optim: Optim):
    """SGD (heavy-ball, or Nesterov's with ``optim.nesterov``), AdamW, RMSprop or AdaBelief of ``optim``
    from :func:`timm.optim.create_optimizer_v2` (SGD is ``torch.optim.SGD``).

    Weight decay is not applied to biases and normalisation parameters (timm's default) unless
    ``optim.decay_all``. Adam-family
    optimisers get ``optim.eps`` (timm's AdaBelief default is 1e-16; design-diversity uses 1e-8).
    """
    from timm.optim import create_optimizer_v2

    opt = {"sgd": "momentum", "adamw": "adamw", "rmsprop": "rmsprop", "adabelief": "adabelief"}[optim.optimizer]
    kwargs: dict[str, Any] = {"momentum": optim.momentum} if optim.optimizer in ("sgd", "rmsprop") else {}
    if optim.optimizer == "sgd":
        kwargs["nesterov"] = optim.nesterov
    if optim.optimizer in ("adamw", "adabelief"):
        kwargs["eps"] = optim.eps
    return create_optimizer_v2(model, opt=opt, lr=optim.lr, weight_decay=optim.weight_decay,
                               filter_bias_and_bn=not optim.decay_all, **kwargs)


def lr_factor(progress: float, *, schedule: str, warmup: float = 0.0, milestones: tuple[float, ...] = (),
              decay: float = 0.1) -> float:
    """Multiplier of the peak learning rate at ``progress`` in [0, 1] of training.

    ``cosine``: ``0.5 (1 + cos(pi t))``; ``step``: ×``decay`` after 50% and again after 75%;
    ``multistep``: ×``decay`` at each of ``milestones`` (fractions of training, counted from its start
    like torch's MultiStepLR with ``gamma=decay``); ``constant``: 1; all after a linear warm-up over the
    first ``warmup`` fraction. ``decay`` is ``Optim.lr_decay`` (0.1 by default).
    """
    if warmup > 0 and progress < warmup:
        return (progress + 1e-8) / warmup
    if schedule == "multistep":
        return decay ** sum(progress >= m - 1e-12 for m in milestones)
    t = (progress - warmup) / max(1.0 - warmup, 1e-8)
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * min(max(t, 0.0), 1.0)))
    if schedule == "step":
        return decay ** ((t >= 0.5) + (t >= 0.75))
    return 1.0
